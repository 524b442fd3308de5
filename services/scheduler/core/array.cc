#include "scheduler/core/array.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "scheduler/core/validation.h"  // kMaxEnv, kMaxLabels

namespace ringmaster::scheduler {
namespace {

// What a task adds to its spec.
constexpr size_t kTaskEnvEntries = 3;
constexpr size_t kTaskLabels = 1;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

}  // namespace

absl::Status ValidateArray(const JobSpec& spec) {
  if (!spec.array) return absl::OkStatus();
  const ArraySpec& a = *spec.array;
  if (a.count < 1 || a.count > kMaxArrayCount) {
    return Invalid("array.count", absl::StrCat("must be 1..", kMaxArrayCount, ", got ", a.count));
  }
  if (a.parallelism < 0 || a.parallelism > a.count) {
    return Invalid("array.parallelism", absl::StrCat("must be 0 (no limit)..array.count (", a.count,
                                                     "), got ", a.parallelism));
  }
  if (!spec.command) {
    return Invalid("array",
                   "only with a command workload (a task tells itself apart by "
                   "RINGMASTER_ARRAY_INDEX or {index} in its argv)");
  }
  if (spec.command->env.size() > kMaxEnv - kTaskEnvEntries) {
    return Invalid(
        "command.env",
        absl::StrCat("at most ", kMaxEnv - kTaskEnvEntries, " entries in an array (each task adds ",
                     kTaskEnvEntries, "), got ", spec.command->env.size()));
  }
  if (spec.labels.size() > kMaxLabels - kTaskLabels) {
    return Invalid("labels", absl::StrCat("at most ", kMaxLabels - kTaskLabels,
                                          " in an array (each task adds ", kArrayLabel, "), got ",
                                          spec.labels.size()));
  }
  if (spec.labels.count(kArrayLabel)) {
    return Invalid(absl::StrCat("labels[", kArrayLabel, "]"),
                   "is set by the scheduler for every task");
  }
  return absl::OkStatus();
}

std::string TaskId(const std::string& array_id, int32_t index) {
  return absl::StrCat(array_id, "-", index);
}

std::optional<std::pair<std::string, int32_t>> ParseTaskId(const std::string& job_id) {
  const size_t dash = job_id.rfind('-');
  if (dash == std::string::npos || dash < 2 || dash + 1 >= job_id.size() ||
      job_id.size() - dash > 7) {
    return std::nullopt;
  }
  const std::string digits = job_id.substr(dash + 1);
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;  // one spelling per index
  int32_t index = 0;
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(digits, &index) || index >= kMaxArrayCount) {
    return std::nullopt;
  }
  std::string array = job_id.substr(0, dash);
  bool ok = array.size() > 2 && array.rfind("j-", 0) == 0;
  for (size_t i = 2; ok && i < array.size(); ++i) {
    ok = (array[i] >= '0' && array[i] <= '9') || (array[i] >= 'a' && array[i] <= 'f');
  }
  if (!ok) return std::nullopt;
  return std::make_pair(std::move(array), index);
}

ArrayProgress ProgressOf(const ArraySpec& spec, const ArrayTally& tally) {
  ArrayProgress p;
  p.count = spec.count;
  p.parallelism = spec.parallelism;
  p.next = tally.next;
  p.live = tally.pending + tally.running;
  p.running = tally.running;
  p.succeeded = tally.succeeded;
  p.failed = tally.failed;
  p.cancelled = tally.cancelled;
  p.failed_indices = tally.failed_indices;
  return p;
}

int32_t TasksToCreate(const ArrayProgress& p) {
  const int32_t limit = p.parallelism > 0 ? p.parallelism : kArrayWindow;
  return std::max(0, std::min(p.count - p.next, limit - p.live));
}

Job TaskOf(const Job& array, int32_t index, int64_t now_ms) {
  Job task;
  task.id = TaskId(array.id, index);
  task.spec = array.spec;
  task.spec.array.reset();
  task.spec.after.clear();
  task.spec.labels[kArrayLabel] = array.id;
  if (task.spec.command) {
    const std::string shown = absl::StrCat(index);
    for (std::string& arg : task.spec.command->argv) {
      arg = absl::StrReplaceAll(arg, {{"{index}", shown}});
    }
    auto& env = task.spec.command->env;
    env["RINGMASTER_ARRAY_ID"] = array.id;
    env["RINGMASTER_ARRAY_INDEX"] = shown;
    env["RINGMASTER_ARRAY_COUNT"] = absl::StrCat(array.spec.array ? array.spec.array->count : 0);
  }
  task.state = JobState::kPending;
  task.team = array.team;
  task.created_at_ms = now_ms;
  task.updated_at_ms = now_ms;
  return task;
}

void TaskEnded(ArrayProgress& p, int32_t index, JobState state) {
  p.live = std::max(0, p.live - 1);
  if (state == JobState::kSucceeded) {
    ++p.succeeded;
  } else if (state == JobState::kFailed) {
    ++p.failed;
    auto at = std::lower_bound(p.failed_indices.begin(), p.failed_indices.end(), index);
    if (at == p.failed_indices.end() || *at != index) p.failed_indices.insert(at, index);
    if (p.failed_indices.size() > kShownFailedIndices) p.failed_indices.pop_back();
  } else {
    ++p.cancelled;
  }
}

std::optional<ArrayEnd> EndOf(const ArrayProgress& p) {
  if (p.next < p.count || p.live > 0) return std::nullopt;
  if (p.succeeded == p.count) {
    return ArrayEnd{JobState::kSucceeded, absl::StrCat("all ", p.count, " tasks succeeded")};
  }
  std::string why = absl::StrCat(p.count - p.succeeded, " of ", p.count, " tasks did not succeed (",
                                 p.failed, " failed, ", p.cancelled, " cancelled)");
  if (!p.failed_indices.empty()) {
    absl::StrAppend(
        &why, "; failed: ",
        absl::StrJoin(p.failed_indices.begin(),
                      p.failed_indices.begin() + std::min<size_t>(p.failed_indices.size(), 10),
                      ", "),
        p.failed > 10 ? ", ..." : "");
  }
  return ArrayEnd{JobState::kFailed, std::move(why)};
}

ArrayStatus StatusOf(const ArrayProgress& p, bool cancelled_array) {
  ArrayStatus s;
  s.count = p.count;
  const int32_t uncreated = p.count - p.next;
  s.waiting = cancelled_array ? 0 : uncreated;
  s.running = p.running;
  s.pending = p.live - p.running;
  s.succeeded = p.succeeded;
  s.failed = p.failed;
  s.cancelled = p.cancelled + (cancelled_array ? uncreated : 0);
  s.failed_indices = p.failed_indices;
  return s;
}

ArrayStatus StatusOfEnded(const ArraySpec& spec, const ArrayTally& tally) {
  ArrayProgress p = ProgressOf(spec, tally);
  return StatusOf(p, /*cancelled_array=*/true);
}

std::string ArraySummary(const ArrayProgress& p) {
  std::string s = absl::StrCat(p.running, " running, ", p.live - p.running, " pending, ",
                               p.count - p.next, " waiting");
  if (p.succeeded + p.failed + p.cancelled > 0) {
    absl::StrAppend(&s, "; ", p.succeeded, " succeeded, ", p.failed, " failed, ", p.cancelled,
                    " cancelled");
  }
  absl::StrAppend(&s, " (of ", p.count, " tasks; ",
                  p.parallelism > 0 ? absl::StrCat("at most ", p.parallelism, " at once")
                                    : std::string("no limit"),
                  ")");
  return s;
}

DependencyVerdict JudgeWaiting(
    const std::vector<Dependency>& after,
    const std::function<const ArrayProgress*(const std::string& job_id)>& array_of,
    const std::function<std::optional<JobState>(const std::string& job_id)>& state_of) {
  const ArrayProgress* array = nullptr;  // the first live array it waits for
  for (const Dependency& d : after) {
    const ArrayProgress* p = array_of(d.job_id);
    if (p == nullptr) continue;
    if (d.condition == AfterCondition::kSucceeded && p->failed + p->cancelled > 0) {
      return {
          DependencyVerdict::Kind::kNever,
          absl::StrCat("array ", d.job_id, " cannot succeed (failed: ", p->failed,
                       ", cancelled: ", p->cancelled, "), but this job waits for it to succeed")};
    }
    if (array == nullptr) array = p;
  }
  DependencyVerdict v = JudgeDependencies(after, state_of);
  if (v.kind == DependencyVerdict::Kind::kWaiting && array != nullptr) {
    absl::StrAppend(&v.reason, " (",
                    array->count - array->succeeded - array->failed - array->cancelled, " of ",
                    array->count, " tasks of the array left)");
  }
  return v;
}

}  // namespace ringmaster::scheduler
