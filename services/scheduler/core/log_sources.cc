#include "scheduler/core/log_sources.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

absl::StatusOr<LogPlan> PlanLogRead(const Job& job, int32_t rank, std::optional<int32_t> attempt,
                                    const std::vector<Worker>& workers) {
  // An elastic job's attempts may have run with up to max_replicas ranks.
  const int32_t replicas = std::max(job.spec.replicas, job.spec.max_replicas);
  if (rank < 0 || (replicas > 0 && rank >= replicas)) {
    return absl::InvalidArgumentError(absl::StrCat("rank: job ", job.id, " has ", replicas,
                                                   " ranks (0..", replicas - 1, "), got ", rank));
  }
  if (attempt && (*attempt < 0 || *attempt > job.attempt)) {
    return absl::InvalidArgumentError(absl::StrCat("attempt: job ", job.id, " has attempts 0..",
                                                   job.attempt, ", got ", *attempt));
  }
  LogPlan plan;
  plan.job_id = job.id;
  plan.rank = rank;
  plan.attempt = attempt.value_or(job.attempt);
  plan.pending = job.state == JobState::kPending && job.placement.empty();
  if (plan.attempt == job.attempt) {
    for (const RankPlacement& r : job.placement) {
      if (r.rank == rank) {
        plan.sources.push_back(
            {r.worker_id, absl::StrCat(r.worker_address, ":", r.worker_port)});
      }
    }
  }
  plan.placed = !plan.sources.empty();
  if (!plan.placed) {
    for (const Worker& w : workers) {
      plan.sources.push_back({w.id, absl::StrCat(w.address, ":", w.port)});
    }
    std::sort(plan.sources.begin(), plan.sources.end(),
              [](const LogSource& a, const LogSource& b) { return a.worker_id < b.worker_id; });
  }
  return plan;
}

namespace {

// An agent's answer as the scheduler's caller should see it.
absl::Status FromAgent(const LogPlan& plan, const LogSource& source, const absl::Status& s) {
  const std::string where =
      absl::StrCat("reading the log of job ", plan.job_id, " rank ", plan.rank, " attempt ",
                   plan.attempt, " from worker ", source.worker_id, " at ", source.address, ": ");
  switch (s.code()) {
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return absl::FailedPreconditionError(absl::StrCat(
          where, "the worker refused the scheduler (its --log-reader-names must name a DNS name "
                 "of the scheduler's certificate): ",
          s.message()));
    default:
      return absl::Status(s.code(), absl::StrCat(where, s.message()));
  }
}

}  // namespace

absl::Status ReadFromSources(const LogPlan& plan, const LogSourceReader& read) {
  std::optional<absl::Status> last;  // the most telling failure so far
  for (const LogSource& source : plan.sources) {
    bool wrote = false;
    absl::Status s = read(source, &wrote);
    if (s.ok() || absl::IsCancelled(s)) return s;
    if (wrote || plan.placed) return FromAgent(plan, source, s);
    // Not this worker (or it is down): try the next; a NOT_FOUND is the more useful answer.
    if (!last || !absl::IsNotFound(*last) || absl::IsNotFound(s)) {
      last = FromAgent(plan, source, s);
    }
  }
  if (!last) last = absl::NotFoundError("no worker is registered");
  std::string why = absl::StrCat("no worker has a log of job ", plan.job_id, " rank ", plan.rank,
                                 " attempt ", plan.attempt);
  if (plan.pending) {
    absl::StrAppend(&why, " (the job is PENDING: that attempt has not started)");
  } else if (!absl::IsNotFound(*last)) {
    return absl::Status(last->code(), absl::StrCat(why, " (", last->message(), ")"));
  }
  return absl::NotFoundError(why);
}

}  // namespace ringmaster::scheduler
