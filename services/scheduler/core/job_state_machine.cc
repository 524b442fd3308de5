#include "scheduler/core/job_state_machine.h"

#include "absl/strings/str_cat.h"
#include "scheduler/core/elastic.h"

namespace ringmaster::scheduler {
namespace {

absl::Status NotIn(const Job& job, const char* what) {
  return absl::FailedPreconditionError(
      absl::StrCat("job ", job.id, " is ", JobStateName(job.state), ": cannot ", what));
}

}  // namespace

absl::StatusOr<Transition> ApplyInput(Job& job, const JobInput& input, int64_t now_ms) {
  using Kind = JobInput::Kind;
  const bool live = job.state == JobState::kStarting || job.state == JobState::kRunning;
  JobState to = job.state;
  int32_t attempt = job.attempt;
  bool keep_placement = false;
  bool stop_ranks = false;
  switch (input.kind) {
    case Kind::kPlaced:
      if (job.state != JobState::kPending) return NotIn(job, "place it");
      if (input.placement.empty()) {
        return absl::InvalidArgumentError("a placement needs at least one rank");
      }
      to = JobState::kStarting;
      keep_placement = true;
      break;
    case Kind::kAllStarted:
      if (job.state != JobState::kStarting) return NotIn(job, "mark it running");
      to = JobState::kRunning;
      keep_placement = true;
      break;
    case Kind::kAllSucceeded:
      if (!live) return NotIn(job, "mark it succeeded");
      to = JobState::kSucceeded;
      break;
    case Kind::kFailed: {
      if (!live) return NotIn(job, "fail it");
      const bool restart = job.spec.restart_policy == RestartPolicy::kOnFailure &&
                           job.attempt - job.preemptions < job.spec.backoff_limit.value_or(0);
      to = restart ? JobState::kPending : JobState::kFailed;
      if (restart) ++attempt;
      stop_ranks = true;
      break;
    }
    case Kind::kDeadlineExceeded:
      if (!live) return NotIn(job, "time it out");
      to = JobState::kFailed;
      stop_ranks = true;
      break;
    case Kind::kPreempted:
      if (!live) return NotIn(job, "preempt it");
      to = JobState::kPending;
      ++attempt;
      ++job.preemptions;
      stop_ranks = true;
      break;
    case Kind::kChecked:
      if (!live) return NotIn(job, "record its check");
      keep_placement = true;
      break;
    case Kind::kCheckFailed:
    case Kind::kNotDelivered:
    case Kind::kResized:
      if (!live) return NotIn(job, "re-place it");
      to = JobState::kPending;
      ++attempt;
      ++job.preemptions;
      stop_ranks = true;
      break;
    case Kind::kUnrunnable:
      if (IsTerminal(job.state)) return NotIn(job, "fail it");
      to = JobState::kFailed;
      stop_ranks = live;
      break;
    case Kind::kCancel:
      if (IsTerminal(job.state)) return NotIn(job, "cancel it");
      to = JobState::kCancelled;
      stop_ranks = live;
      break;
  }

  Transition t;
  if (!keep_placement) t.released = std::move(job.placement);
  t.stop_ranks = stop_ranks && !t.released.empty();
  if (input.kind == Kind::kPlaced) {
    job.placement = input.placement;
    job.token = input.token;
    job.pending_reason.clear();
  }
  if (IsElastic(job.spec)) {
    if (input.kind == Kind::kPlaced) {
      job.last_replicas = static_cast<int32_t>(input.placement.size());
    } else if (input.kind == Kind::kResized && input.resized_to > 0) {
      job.last_replicas = input.resized_to;
    } else if (input.kind == Kind::kPreempted) {
      job.last_replicas = 0;
    }
  }
  if (!keep_placement) {
    job.placement.clear();
    job.token.clear();
  }
  // Why it waits means nothing once it no longer does (a cancelled pending job showed it).
  if (to != JobState::kPending) job.pending_reason.clear();
  job.state = to;
  job.attempt = attempt;
  job.updated_at_ms = now_ms;
  if (to == JobState::kRunning && job.started_at_ms == 0) job.started_at_ms = now_ms;
  if (to == JobState::kStarting) job.started_at_ms = 0;
  if (IsTerminal(to)) job.finished_at_ms = now_ms;
  if (input.kind == Kind::kFailed || input.kind == Kind::kDeadlineExceeded) {
    if (input.exit_code != 0) job.exit_code = input.exit_code;
  }
  if (input.kind != Kind::kPlaced && input.kind != Kind::kAllStarted &&
      input.kind != Kind::kChecked) {
    job.message = input.reason;
  }
  if (to == JobState::kPending &&
      (input.kind == Kind::kPreempted || input.kind == Kind::kCheckFailed ||
       input.kind == Kind::kNotDelivered || input.kind == Kind::kResized)) {
    job.message = input.reason;
  } else if (to == JobState::kPending) {
    job.message = absl::StrCat("restarting (attempt ", attempt - job.preemptions, " of at most ",
                               job.spec.backoff_limit.value_or(0), " restarts): ", input.reason);
  }

  t.event.job_id = job.id;
  t.event.seq = ++job.last_event_seq;
  t.event.state = to;
  t.event.attempt = attempt;
  t.event.reason = to == JobState::kPending ? job.message : input.reason;
  t.event.exit_code = input.exit_code;
  t.event.time_ms = now_ms;
  return t;
}

bool RankTracker::OnStarted(int32_t rank) {
  bool was_complete = AllStarted();
  started_.insert(rank);
  return !was_complete && AllStarted();
}

bool RankTracker::Started(int32_t rank) const { return started_.contains(rank); }

bool RankTracker::OnSucceeded(int32_t rank) {
  started_.insert(rank);
  bool was_complete = static_cast<int32_t>(succeeded_.size()) == world_size_;
  succeeded_.insert(rank);
  return !was_complete && static_cast<int32_t>(succeeded_.size()) == world_size_;
}

}  // namespace ringmaster::scheduler
