// Runs one job attempt's pre-run allreduce check (docs/health-check.md): mpirun of
// ringmaster-check over the attempt's hostfile, bounded by a timeout, then its result parsed
// and judged (core/health_check.h). Called on the attempt's launcher thread, before the
// attempt's own mpirun. Stateless; the caller tracks the spawned session.
#ifndef RINGMASTER_SERVICES_WORKER_CHECK_RUNNER_H_
#define RINGMASTER_SERVICES_WORKER_CHECK_RUNNER_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "core/health_check.h"
#include "host/process.h"

namespace ringmaster::worker {

struct CheckRun {
  // mpirun ... ringmaster-check -- --result RESULT_PATH, output to a log of its own.
  SpawnOptions spawn;
  std::string result_path;
  std::string log_path;
  std::chrono::milliseconds timeout{10000};
  CheckPolicy policy;
};

// Spawns the check, waits for it (killing its session past the timeout), and returns the
// judged report (completed = false with the log's tail when it failed). `spawned` is called
// with the session's pid under the caller's bookkeeping and may refuse (false: the attempt is
// stopping; the check is killed at once); `exited` is called once it ended.
CheckReport RunCheck(const CheckRun& run, const std::function<bool(pid_t)>& spawned,
                     const std::function<void(pid_t)>& exited);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CHECK_RUNNER_H_
