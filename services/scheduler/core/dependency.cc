#include "scheduler/core/dependency.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "scheduler/core/validation.h"

namespace ringmaster::scheduler {

absl::Status ValidateDependencies(const std::vector<Dependency>& after) {
  if (after.size() > kMaxDependencies) {
    return absl::InvalidArgumentError(
        absl::StrCat("after: at most ", kMaxDependencies, " dependencies, got ", after.size()));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < after.size(); ++i) {
    const std::string field = absl::StrCat("after[", i, "].job_id");
    if (auto s = ValidateJobId(after[i].job_id, field); !s.ok()) return s;
    if (!seen.insert(after[i].job_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", after[i].job_id, " is named twice; name each job once"));
    }
  }
  return absl::OkStatus();
}

bool Satisfies(AfterCondition condition, JobState state) {
  switch (condition) {
    case AfterCondition::kSucceeded:
      return state == JobState::kSucceeded;
    case AfterCondition::kEnded:
      return IsTerminal(state);
    case AfterCondition::kFailed:
      return state == JobState::kFailed || state == JobState::kCancelled;
  }
  return false;
}

namespace {

const char* Waits(AfterCondition condition) {
  switch (condition) {
    case AfterCondition::kSucceeded:
      return "to succeed";
    case AfterCondition::kEnded:
      return "to end";
    case AfterCondition::kFailed:
      return "to fail";
  }
  return "";
}

}  // namespace

DependencyVerdict JudgeDependencies(
    const std::vector<Dependency>& after,
    const std::function<std::optional<JobState>(const std::string& job_id)>& state_of) {
  DependencyVerdict verdict;
  const Dependency* first_waited = nullptr;
  size_t waited = 0;
  for (const Dependency& d : after) {
    const std::optional<JobState> state = state_of(d.job_id);
    if (state && IsTerminal(*state)) {
      if (Satisfies(d.condition, *state)) continue;
      verdict.kind = DependencyVerdict::Kind::kNever;
      verdict.reason =
          absl::StrCat("dependency never satisfied: ", d.job_id, " ended ", JobStateName(*state),
                       ", and this job waits for it ", Waits(d.condition));
      return verdict;
    }
    if (first_waited == nullptr) first_waited = &d;
    ++waited;
  }
  if (first_waited == nullptr) return verdict;
  verdict.kind = DependencyVerdict::Kind::kWaiting;
  verdict.reason =
      absl::StrCat("waiting for ", first_waited->job_id, " ", Waits(first_waited->condition));
  if (waited > 1) absl::StrAppend(&verdict.reason, " (", waited, " of ", after.size(), " left)");
  return verdict;
}

void DependencyBook::Add(const std::string& job_id, const std::vector<Dependency>& after) {
  for (const Dependency& d : after) {
    dependents_[d.job_id].insert(job_id);
    // Kept while named: the recent ends move on.
    if (auto it = recent_index_.find(d.job_id); it != recent_index_.end()) {
      ends_[d.job_id] = it->second;
    }
  }
}

void DependencyBook::Remove(const std::string& job_id, const std::vector<Dependency>& after) {
  for (const Dependency& d : after) {
    auto it = dependents_.find(d.job_id);
    if (it == dependents_.end()) continue;
    it->second.erase(job_id);
    if (it->second.empty()) {
      dependents_.erase(it);
      ends_.erase(d.job_id);
    }
  }
}

std::vector<std::string> DependencyBook::Ended(const std::string& job_id, JobState state) {
  Remember(job_id, state);  // and in ends_ while it is named
  auto it = dependents_.find(job_id);
  if (it == dependents_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

std::vector<std::string> DependencyBook::WaitersOf(const std::string& job_id) const {
  auto it = dependents_.find(job_id);
  if (it == dependents_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

void DependencyBook::Remember(const std::string& job_id, JobState state) {
  if (dependents_.contains(job_id)) ends_[job_id] = state;
  if (recent_index_.insert_or_assign(job_id, state).second) recent_.emplace_back(job_id, state);
  while (recent_.size() > kRecentEnds) {
    recent_index_.erase(recent_.front().first);
    recent_.pop_front();
  }
}

std::optional<JobState> DependencyBook::EndOf(const std::string& job_id) const {
  if (auto it = ends_.find(job_id); it != ends_.end()) return it->second;
  if (auto it = recent_index_.find(job_id); it != recent_index_.end()) return it->second;
  return std::nullopt;
}

}  // namespace ringmaster::scheduler
