// Job arrays (JobSpec.array): one submit, `count` tasks, each a job of its own. Plain data in,
// plain data out; the scheduler (scheduler.h, "Arrays") keeps an ArrayProgress per live array.
//
// Tasks are created lazily: the array is one stored job, and the scheduler creates its tasks
// (stored jobs "<array id>-<index>", in index order) only as the parallelism limit and a window
// let them run, so a 100,000-task array is accepted as one row and a pass never sees more
// than the window of its tasks. What a client observes is the same as if every task had been
// created at once: each task is a job with its own attempts, logs and state, the array counts
// the ones not created yet as waiting, and a cancelled array's uncreated tasks as cancelled.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_ARRAY_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_ARRAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/core/dependency.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

inline constexpr int32_t kMaxArrayCount = 100'000;
// Tasks of an array without a parallelism limit that are created and not ended at once: more
// than any cluster here runs, few enough that a pass over the pending ones stays cheap.
inline constexpr int32_t kArrayWindow = 4'096;
// Failed indices an array's status lists (the lowest).
inline constexpr size_t kShownFailedIndices = 100;
// The label every task carries: its array's id.
inline constexpr char kArrayLabel[] = "ringmaster/array";

// INVALID_ARGUMENT naming the field: count 1..kMaxArrayCount, parallelism 0..count, a command
// workload, room for a task's environment and label. OK for a spec without `array`.
absl::Status ValidateArray(const JobSpec& spec);

// "<array_id>-<index>".
std::string TaskId(const std::string& array_id, int32_t index);
// The array and index of a task id; nullopt for any other id.
std::optional<std::pair<std::string, int32_t>> ParseTaskId(const std::string& job_id);

// What the store holds of an array's tasks (JobStore::TallyArray).
struct ArrayTally {
  int32_t next = 0;     // one past the highest index created (0: none)
  int32_t pending = 0;  // tasks PENDING
  int32_t running = 0;  // tasks STARTING or RUNNING
  int32_t succeeded = 0;
  int32_t failed = 0;
  int32_t cancelled = 0;
  std::vector<int32_t> failed_indices;  // the lowest, at most kShownFailedIndices, ascending
  bool operator==(const ArrayTally&) const = default;
};

// What the scheduler knows of one live array's tasks.
struct ArrayProgress {
  int32_t count = 0;
  int32_t parallelism = 0;  // 0: kArrayWindow
  int32_t next = 0;         // tasks created so far (indices below it), stored or on their way
  int32_t live = 0;         // created and not ended
  int32_t running = 0;      // of those, STARTING or RUNNING
  int32_t succeeded = 0;
  int32_t failed = 0;
  int32_t cancelled = 0;
  std::vector<int32_t> failed_indices;  // ascending, at most kShownFailedIndices
};

// JudgeDependencies, knowing the live arrays' progress (`array_of`: null for a job that is not
// a live array): a job that waits for an array to succeed can never run once one of its tasks
// failed or was cancelled, known before the array ends; a wait says how many tasks of the
// first live array it waits for are left.
DependencyVerdict JudgeWaiting(
    const std::vector<Dependency>& after,
    const std::function<const ArrayProgress*(const std::string& job_id)>& array_of,
    const std::function<std::optional<JobState>(const std::string& job_id)>& state_of);

// A live array as stored: its spec, and what the store holds of its tasks (at start-up).
ArrayProgress ProgressOf(const ArraySpec& spec, const ArrayTally& tally);

// How many tasks to create now (0 once all are).
int32_t TasksToCreate(const ArrayProgress& p);

// Task `index` of `array` as a new job (attempt 0, PENDING, created now): the array's spec
// without `array` and `after`, its index in the environment and argv, the array label; team
// and queue as the array's; no request id.
Job TaskOf(const Job& array, int32_t index, int64_t now_ms);

// A task ended in `state` (a terminal state).
void TaskEnded(ArrayProgress& p, int32_t index, JobState state);

// The array's end, once every task was created and ended: SUCCEEDED when every task
// succeeded, else FAILED, and why. nullopt while tasks remain.
struct ArrayEnd {
  JobState state = JobState::kSucceeded;
  std::string reason;
};
std::optional<ArrayEnd> EndOf(const ArrayProgress& p);

// The counts readers see. `cancelled_array`: the array was cancelled, so its uncreated tasks
// count as cancelled rather than waiting.
ArrayStatus StatusOf(const ArrayProgress& p, bool cancelled_array);
// The same for an array that is not live, from what the store holds: its uncreated tasks were
// kept from running by its cancellation (an array that ends otherwise created them all).
ArrayStatus StatusOfEnded(const ArraySpec& spec, const ArrayTally& tally);

// An array's pending reason: "3 running, 1 pending, 996 waiting (parallelism 4)".
std::string ArraySummary(const ArrayProgress& p);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_ARRAY_H_
