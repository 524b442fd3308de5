// AttemptTable: the job attempts this worker holds (AttemptRecord) and the statuses queued for
// the scheduler (the outbox), with the few transitions every part of the agent shares: a gang
// decision turned into statuses (Apply), the start of a teardown (BeginTeardown), a caller's
// token checked against an attempt (Authorize), a check's report queued (SendCheck).
//
// Thread-safe: one mutex, mu(), guards the table, the outbox and every AttemptRecord's mutable
// fields; the methods marked so need it held. Lock order: AttemptTable's mutex, then
// AgentMetrics' and PortPool's (leaves). Nothing here waits on a process or the disk.
#ifndef RINGMASTER_SERVICES_WORKER_ATTEMPT_TABLE_H_
#define RINGMASTER_SERVICES_WORKER_ATTEMPT_TABLE_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "agent_metrics.h"
#include "common/checkpoint_metadata.h"
#include "common/mutex.h"
#include "core/gang.h"
#include "core/health_check.h"
#include "core/launch.h"
#include "core/progress.h"
#include "core/teardown.h"
#include "core/types.h"
#include "host/process.h"
#include "host/users.h"

namespace ringmaster::worker {

// "code N" or "signal N".
std::string ExitText(const ExitInfo& info);

// One job attempt this worker holds. `assignment` and `user` never change once it is in the
// table; every other field is guarded by the table's mutex.
struct AttemptRecord {
  using Clock = std::chrono::steady_clock;

  AttemptRecord(Assignment a, std::vector<int32_t> local_ranks)
      : assignment(std::move(a)),
        gang(assignment.job_id, assignment.attempt, std::move(local_ranks),
             assignment.start_directly ? "ringmaster-rank" : "mpirun") {}

  const Assignment assignment;  // never changes; readable without the lock
  // When the assignment arrived (BootTicksNow): none of the attempt's processes is older.
  const uint64_t assigned_ticks = BootTicksNow();
  // Whom its processes run as (--run-as); none: the worker's own user. Set once, at the
  // assignment, before anything reads it.
  std::optional<UnixUser> user;
  GangState gang;
  ProgressForwarder progress;        // which progress reports go on to the scheduler
  std::vector<int32_t> mpi_to_rank;  // placed rank of each MPI rank
  bool launcher = false;
  // Sessions started for the attempt (mpirun, Exec'd commands): everything in them is its.
  std::set<pid_t> sessions;
  // Launcher thread and Exec calls still working with this record; it is not erased before
  // they are done.
  int in_flight = 0;
  // StopJob arrived: erase once nothing of it runs.
  bool forget = false;
  // Teardown: started (`stop` says what was sent when); finished (nothing left).
  bool teardown = false;
  bool quiet = false;
  Teardown stop;
  std::thread launcher_thread;
  // Launcher only: the checkpoint.meta last reported, and the last complaint about it.
  std::optional<CheckpointMetadata> checkpoint_sent;
  std::string checkpoint_error;
  // Launcher only: an in-session check not yet reported, and when to stop waiting for it.
  std::optional<Clock::time_point> precheck_deadline;
  // An Exec with the job's own token arrived: the job's mpirun runs, so the pre-run check's
  // is over, and its token (assignment.check_token) is no longer taken.
  bool check_over = false;
};

class AttemptTable {
 public:
  using Key = std::pair<std::string, int32_t>;  // (job id, attempt)
  using Attempts = std::map<Key, std::unique_ptr<AttemptRecord>>;
  using Clock = std::chrono::steady_clock;

  // `now`: the agent's clock (AgentOptions::now); `wake`: called when a teardown starts, to
  // run the reaper's next pass at once.
  AttemptTable(std::string worker_id, std::chrono::milliseconds clean_exit_wait,
               AgentMetrics& metrics, std::function<Clock::time_point()> now,
               std::function<void()> wake);
  AttemptTable(const AttemptTable&) = delete;
  AttemptTable& operator=(const AttemptTable&) = delete;

  Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }
  Attempts& attempts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return attempts_; }
  const std::string& worker_id() const { return worker_id_; }
  Clock::time_point Now() const { return now_(); }

  // The attempt when it is held, not told to stop, and `token` is its job token: NOT_FOUND,
  // PERMISSION_DENIED otherwise.
  absl::StatusOr<AttemptRecord*> Authorize(const std::string& job_id, int32_t attempt,
                                           const std::string& token)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Turns a GangState decision into statuses and, when asked, a local teardown.
  void Apply(AttemptRecord& attempt, const GangState::Decision& decision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `normal_end`: a StopJob that may be the attempt's normal end; when every local rank exited
  // 0 its mpirun/orted get clean_exit_wait before any signal (Stop protocol, step 2).
  // `workload_grace`: a StopJob's own grace (a preemption), SIGTERM to the workloads first.
  void BeginTeardown(AttemptRecord& attempt, const std::string& why, bool normal_end = false,
                     std::optional<std::chrono::milliseconds> workload_grace = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every process of the attempt on this worker: its sessions and anything carrying its tags.
  ProcessSelector Selector(const AttemptRecord& attempt) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends a check's report to the scheduler (a culprit outside the placement is dropped first:
  // only placed workers can be blamed) and logs it.
  void SendCheck(const AttemptRecord& attempt, CheckReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a status for the scheduler.
  void Push(RankStatus status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ranks-by-phase and attempts gauges, from the table.
  void UpdateGauges() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // See Agent::TakeRegistration and Agent::NextStatuses. Take the mutex.
  std::vector<HeldRank> TakeRegistration() ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<RankStatus> NextStatuses(size_t max, std::chrono::milliseconds timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string worker_id_;
  const std::chrono::milliseconds clean_exit_wait_;
  AgentMetrics& metrics_;
  const std::function<Clock::time_point()> now_;
  const std::function<void()> wake_;

  Mutex mu_;
  Attempts attempts_ ABSL_GUARDED_BY(mu_);
  std::deque<RankStatus> outbox_ ABSL_GUARDED_BY(mu_);
  CondVar outbox_cv_;  // the outbox got a status
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_ATTEMPT_TABLE_H_
