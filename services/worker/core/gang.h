// GangState: one worker's share of a job attempt (the ranks placed on it) and the supervision
// decisions that follow from what happens to them. The worker turns each Decision into rank
// statuses for the scheduler and, when `stop_local` is set, stops every process of the attempt
// on this worker; the scheduler's StopJob then stops the rest of the gang everywhere.
//
// The rules:
//  - a rank's first start and first end are reported once each; repeats are ignored;
//  - a rank that failed (non-zero exit or a signal) stops the local gang at once;
//  - a rank whose wrapper vanished without reporting (SIGKILL) counts as killed by SIGKILL;
//  - on the launcher, mpirun's end fails every local rank that never started (LAUNCH_FAILED,
//    with the tail of mpirun's output); a failed mpirun also stops the local gang;
//  - once the worker itself is stopping the attempt, exits are still reported (the scheduler
//    may not know yet) but decide nothing more;
//  - when every process of a stopped attempt has ended here, a rank that never reported is
//    reported all the same (its wrapper was killed first: mpirun kills its ranks a second
//    after its own SIGTERM), so that the scheduler never waits on a rank nobody runs.
// Not thread-safe; the agent guards it.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_GANG_H_
#define RINGMASTER_SERVICES_WORKER_CORE_GANG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "worker/core/types.h"

namespace ringmaster::worker {

// The exit code under which a rank that could not be started is listed in RegisterWorker
// (the wire format has no other way to say it), as a shell says "command not found".
inline constexpr int32_t kLaunchFailedExitCode = 127;

class GangState {
 public:
  enum class Phase { kAssigned, kStarted, kExited, kLaunchFailed };

  struct Decision {
    std::vector<RankStatus> reports;
    bool stop_local = false;
    std::string why;  // with stop_local: what failed, for the log and OnTornDown's reports
  };

  // `launcher`: what the launcher runs, as its messages name it (mpirun, or ringmaster-rank for
  // a one-rank attempt started directly).
  GangState(std::string job_id, int32_t attempt, std::vector<int32_t> local_ranks,
            std::string launcher = "mpirun");

  Decision OnStarted(int32_t rank, int32_t pid);
  Decision OnExited(int32_t rank, int32_t exit_code, int32_t signal, const std::string& message);
  // The wrapper's process is gone and it never reported an exit.
  Decision OnVanished(int32_t rank);
  // Launcher only: mpirun (or the directly started rank) ended (exit_code, or signal);
  // `output_tail` explains failures.
  Decision OnLauncherExited(int32_t exit_code, int32_t signal, const std::string& output_tail);
  // Launcher only: mpirun could not even be started.
  Decision OnLaunchFailed(const std::string& why);
  // An Exec'd command (orted) of this attempt ended on this worker.
  Decision OnExecExited(int32_t exit_code, int32_t signal);
  // Every process of the attempt on this worker has ended after the worker stopped it: a
  // started rank still unreported counts as killed by the strongest signal the worker sent
  // (`signal_sent`: SIGKILL over SIGTERM; 0, none: SIGKILL, as a vanished rank), an unstarted
  // one as not started; both messages say why the worker stopped it.
  Decision OnTornDown(int32_t signal_sent);

  // The worker began stopping the attempt's processes here, for `why`.
  void MarkStopping(std::string why) {
    stopping_ = true;
    stop_why_ = std::move(why);
  }
  bool stopping() const { return stopping_; }

  bool HasRank(int32_t rank) const { return ranks_.count(rank) > 0; }
  Phase phase(int32_t rank) const;
  // True when no local rank is still assigned or running.
  bool AllEnded() const;
  // True when every local rank started and exited with code 0.
  bool AllSucceeded() const;
  // Started ranks that have not ended: rank -> wrapper pid, for the vanish check.
  std::map<int32_t, int32_t> RunningPids() const;
  // What RegisterWorker lists for this attempt: every local rank; ended ones with their status
  // (a signal as 128 + signal, a launch failure as kLaunchFailedExitCode).
  std::vector<HeldRank> Held() const;

 private:
  struct Rank {
    Phase phase = Phase::kAssigned;
    int32_t pid = 0;
    int32_t exit_code = 0;
    int32_t signal = 0;
  };
  RankStatus Status(int32_t rank, RankStatus::Kind kind) const;

  std::string job_id_;
  int32_t attempt_;
  std::map<int32_t, Rank> ranks_;
  bool stopping_ = false;
  std::string launcher_;
  std::string stop_why_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_GANG_H_
