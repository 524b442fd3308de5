// Job dependencies (JobSpec.after): whether a pending job may run, must wait, or can never run,
// judged from what is known of the jobs it names. Plain data in, plain data out; the scheduler
// (scheduler.h, "After") keeps the states it is judged on.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_DEPENDENCY_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_DEPENDENCY_H_

#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

inline constexpr size_t kMaxDependencies = 64;

// INVALID_ARGUMENT naming the field: at most kMaxDependencies, every job id as the scheduler
// mints them, no job twice.
absl::Status ValidateDependencies(const std::vector<Dependency>& after);

// Whether a job that ended in `state` (a terminal state) satisfies `condition`.
bool Satisfies(AfterCondition condition, JobState state);

struct DependencyVerdict {
  enum class Kind { kReady, kWaiting, kNever };
  Kind kind = Kind::kReady;
  // kWaiting: the pending reason ("waiting for j-1 to succeed, and 2 more"); kNever: why the
  // job is cancelled ("j-1 ended FAILED, but it waits for it to succeed").
  std::string reason;
};

// `state_of` gives a named job's state as far as it is known: a live or a terminal state, or
// nullopt when not known yet (it is waited for, as a live one). Never wins over waiting: a job
// that can no longer run is cancelled at once, whatever else it waits for.
DependencyVerdict JudgeDependencies(
    const std::vector<Dependency>& after,
    const std::function<std::optional<JobState>(const std::string& job_id)>& state_of);

// What the scheduler knows of the jobs that live jobs wait for, kept beside its live jobs (no
// lock of its own: the scheduler's guards it). A named job that is live is asked of the
// scheduler; this book keeps the end of every named job that ended while named, and of the most
// recent ends of all (kRecentEnds), for a submit whose dependency ended while the submit was on
// its way to Postgres.
class DependencyBook {
 public:
  static constexpr size_t kRecentEnds = 4096;

  // A live job with dependencies came into the scheduler's memory, or left it.
  void Add(const std::string& job_id, const std::vector<Dependency>& after);
  void Remove(const std::string& job_id, const std::vector<Dependency>& after);
  // A job ended in `state`: returns the live jobs that wait for it (to be judged again).
  std::vector<std::string> Ended(const std::string& job_id, JobState state);
  // The live jobs that wait for `job_id` (an array whose task failed: judged again at once).
  std::vector<std::string> WaitersOf(const std::string& job_id) const;
  // The end of a job known from elsewhere (Postgres, read for a submit or a restart).
  void Remember(const std::string& job_id, JobState state);
  // The end of `job_id` if it is known here.
  std::optional<JobState> EndOf(const std::string& job_id) const;
  size_t named() const { return dependents_.size(); }

 private:
  // named job -> the live jobs that wait for it
  std::unordered_map<std::string, std::set<std::string>> dependents_;
  // named job -> its end, while it is named
  std::unordered_map<std::string, JobState> ends_;
  std::deque<std::pair<std::string, JobState>> recent_;
  std::unordered_map<std::string, JobState> recent_index_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_DEPENDENCY_H_
