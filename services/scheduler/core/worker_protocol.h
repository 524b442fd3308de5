// The workers' side of the scheduler's decisions: what a rank report does to its job, which
// checkpoints and image digests are taken, what a registering worker's held ranks say, and
// which silent workers are lost. Plain data in, plain data out; the scheduler applies the
// results under its lock (scheduler_workers.cc) and the tests need no thread or clock.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_WORKER_PROTOCOL_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_WORKER_PROTOCOL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/core/job_state_machine.h"
#include "scheduler/core/run_watch.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// A rank a worker reports holding when it registers.
struct HeldRank {
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  bool exited = false;
  int32_t exit_code = 0;
  // Told to stop and still exiting, and the GPUs it holds (empty: a CPU slot).
  bool stopping = false;
  std::vector<int32_t> gpu_indices;
};

struct RankReport {
  enum class Kind { kStarted, kExited, kLaunchFailed, kCheckpoint, kProgress, kImageResolved };
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  Kind kind = Kind::kStarted;
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string message;
  int64_t checkpoint_step = 0;  // kCheckpoint
  int64_t checkpoint_time_ms = 0;
  // kProgress only: the rank's cumulative counters.
  RankActivity activity;
  std::string image_digest = "";  // kImageResolved: "sha256:..." (validated by the adapter)
};

// Whether `rank` of `job`'s current placement is on `worker_id`.
bool PlacedOn(const Job& job, int32_t rank, const std::string& worker_id);

// The input a start, exit or launch failure of a rank of `job`'s current attempt makes, if
// any: the last rank started -> kAllStarted, the last exited 0 -> kAllSucceeded, one exited
// otherwise, killed or not launched -> kFailed saying which and why. `tracker` counts the
// attempt's ranks and is updated here. Other kinds of report make none.
std::optional<JobInput> InputOfRankReport(const Job& job, const std::string& worker_id,
                                          const RankReport& report, RankTracker& tracker);

// Whether a checkpoint report is recorded on `job`: only rank 0 reports them; one from an
// attempt already preempted counts (the checkpoint its SIGTERM made), never one from a later
// attempt than the job's; a time far ahead of ours (a bad clock, a forged checkpoint.meta)
// would shut out every later report and bend victim choice; an older one than the last
// changes nothing.
bool AcceptsCheckpoint(const Job& job, const RankReport& report, int64_t now_ms);

// What a launcher's report of the digest its image resolved to does: pins it, is ignored
// (an earlier attempt, no image, pinned already), or is refused (not from the launcher).
enum class DigestVerdict { kPin, kIgnore, kNotLauncher };
DigestVerdict JudgeImageDigest(const Job& job, const std::string& worker_id,
                               const RankReport& report);

// What a registering worker's held ranks mean, against the live attempts placed on it.
struct Reconciliation {
  // Held ranks of no live attempt placed here: the worker is told to stop them, and those
  // still stopping keep their GPUs until they exit.
  std::vector<HeldRank> orphans;
  // Live attempts placed here whose ranks the worker does not hold, and what becomes of them.
  struct End {
    std::string job_id;
    JobInput input;
  };
  std::vector<End> ends;
  // Held ranks of live attempts placed here: their start (and exit, where they exited) as
  // reports, applied after `ends`.
  std::vector<RankReport> replay;
};

// `live` finds a live job by id (null: none); `placed` are the STARTING and RUNNING jobs;
// `started` says whether the scheduler heard a rank of a job's current attempt start. A rank
// placed here and not held is gone: its attempt fails, unless the attempt is STARTING, the
// worker holds none of its ranks and none of those placed here was heard to start: then its
// assignment never reached the worker (a scheduler restarted between storing the placement
// and sending it), and the job is placed again without counting it (kNotDelivered).
Reconciliation ReconcileWorker(
    const std::string& worker_id, const std::vector<HeldRank>& held,
    const std::function<const Job*(const std::string&)>& live,
    const std::vector<const Job*>& placed,
    const std::function<bool(const std::string& job_id, int32_t rank)>& started);

// Ready workers whose liveness key is gone (`alive` lacks them): those this process heard
// within `timeout_ms` are alive after all (a Redis flush or restart also drops keys) and get a
// beat; the others are lost.
struct SilentWorkers {
  std::vector<std::string> lost;
  std::vector<std::string> beats;
};
SilentWorkers SweepSilentWorkers(const std::map<std::string, Worker>& workers,
                                 const std::set<std::string>& alive, int64_t now_ms,
                                 int64_t timeout_ms);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_WORKER_PROTOCOL_H_
