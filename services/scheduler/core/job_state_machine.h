// The job state machine, written once here:
//
//   PENDING -> STARTING -> RUNNING -> SUCCEEDED | FAILED | CANCELLED
//   STARTING | RUNNING -> PENDING   (a restart under restart_policy OnFailure)
//
// 1. kPlaced moves PENDING to STARTING with a placement and a fresh token.
// 2. kAllStarted (every rank's process is up) moves STARTING to RUNNING.
// 3. kAllSucceeded (every rank exited 0) ends the job SUCCEEDED.
// 4. kFailed (a rank exited non-zero, could not launch, or its worker was lost) restarts the
//    job (back to PENDING, attempt + 1) while attempt < backoff_limit under OnFailure, else
//    ends it FAILED.
// 5. kDeadlineExceeded (max_runtime_seconds passed) ends it FAILED; no restart, as with
//    Kubernetes' activeDeadlineSeconds.
// 6. kCancel ends any live job CANCELLED.
// 7. kPreempted (the fair-share policy needs its GPUs) moves STARTING | RUNNING back to
//    PENDING with attempt + 1; preemptions do not count against backoff_limit.
// 8. kChecked (the attempt's pre-run check reported) records an event, no state change.
// 9. kCheckFailed (the check named an unhealthy worker) moves STARTING | RUNNING back to
//    PENDING with attempt + 1, counted with preemptions: not against backoff_limit.
// 10. kResized (an elastic job restarts at another size) moves STARTING | RUNNING back to
//    PENDING with attempt + 1, counted with preemptions: not against backoff_limit.
// An elastic job's last_replicas is its placement's size at kPlaced and the new size at
// kResized; kPreempted clears it (the scheduler stopped it on purpose: it starts afresh). Every
// other restart keeps it, so the job comes back at the size it had reached where that fits.
// Nothing leaves a terminal state. Every transition yields one JobEvent; a transition away
// from a placement says the ranks must be stopped and the placement released.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_JOB_STATE_MACHINE_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_JOB_STATE_MACHINE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

struct JobInput {
  enum class Kind {
    kPlaced,
    kAllStarted,
    kAllSucceeded,
    kFailed,
    kDeadlineExceeded,
    kCancel,
    kPreempted,
    kChecked,
    kCheckFailed,
    // The attempt never reached its worker (its assignment was lost with a scheduler restart):
    // PENDING again, not counted against backoff_limit, as kCheckFailed.
    kNotDelivered,
    // An elastic job is stopped to start again at another size (PassResult::Resize): as
    // kPreempted, its ranks get the grace, and it is not counted against backoff_limit.
    kResized,
    // The job cannot run as it asks (a volume it mounts is gone): FAILED from any state that
    // is not terminal, without a restart (the next attempt could not run either).
    kUnrunnable,
  };
  Kind kind;
  std::string reason = {};
  int32_t exit_code = 0;
  // kPlaced only.
  std::vector<RankPlacement> placement = {};
  std::string token = {};
  // kResized only: the size the job restarts at (Job::last_replicas).
  int32_t resized_to = 0;
};

struct Transition {
  JobEvent event;
  // The placement the job held before; the caller stops its ranks (unless they all ended by
  // themselves) and releases it.
  std::vector<RankPlacement> released;
  bool stop_ranks = false;
};

// Applies `input` to `job` at `now_ms`: updates state, attempt, placement, token, times,
// exit_code, message and last_event_seq, and returns the event to record.
// FAILED_PRECONDITION (and `job` unchanged) when the input does not apply in the job's state.
absl::StatusOr<Transition> ApplyInput(Job& job, const JobInput& input, int64_t now_ms);

// Which ranks of one attempt have started and exited. Duplicate reports are harmless.
class RankTracker {
 public:
  explicit RankTracker(int32_t world_size = 0) : world_size_(world_size) {}
  // True when this report completed the set of started ranks.
  bool OnStarted(int32_t rank);
  // True when this report completed the set of ranks that exited 0.
  bool OnSucceeded(int32_t rank);
  bool AllStarted() const { return static_cast<int32_t>(started_.size()) == world_size_; }
  bool Started(int32_t rank) const;

 private:
  int32_t world_size_;
  std::set<int32_t> started_;
  std::set<int32_t> succeeded_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_JOB_STATE_MACHINE_H_
