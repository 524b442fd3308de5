// The research baselines that ringmaster-sim judges the scheduler's policy against, on the same
// trace, cluster and preemption costs: SRTF with the true durations (the oracle Helios reports)
// and Tiresias' discretized 2D-LAS (attained GPU-service, no durations). Both preempt freely,
// per VC or over one pool of all VCs. Not the service's policy: that is SchedulePass, which
// Replay (sim/replay.h) runs.
//
// Each event (an arrival, an end, a preempted job stopped, a LAS job crossing a threshold)
// re-decides the pool the way the Tiresias simulator does: every job of the pool, running or
// not, in priority order; the first ones whose GPUs add up to the pool's size should run. Those
// running beyond that are preempted (they stop after the grace period and keep the work up to
// their last checkpoint, as in Replay); those that should run start when a placement of them
// fits (ClusterState::Place, as the service places), else wait. Running jobs are never moved.
#ifndef RINGMASTER_SERVICES_SCHEDULER_SIM_BASELINES_H_
#define RINGMASTER_SERVICES_SCHEDULER_SIM_BASELINES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/sim/replay.h"

namespace ringmaster::scheduler::sim {

enum class Baseline {
  kSrtf,  // shortest remaining time first, with the trace's true durations
  kLas,   // Tiresias' 2D-LAS: queues by attained GPU-seconds, FIFO within a queue
};

struct BaselineOptions {
  Baseline policy = Baseline::kSrtf;
  // One pool of every VC's GPUs; false: each VC alone with its own nodes.
  bool pooled = false;
  int32_t gpus_per_node = 8;
  int64_t checkpoint_interval_s = 1800;
  int64_t grace_s = 30;
  // 2D-LAS queue thresholds in attained GPU-seconds, ascending: a job below the first is in
  // queue 0, and so on. Tiresias' example of two queues split at 3,600.
  std::vector<int64_t> las_thresholds_gpu_s = {3600};
};

SimReport ReplayBaseline(const std::vector<TraceJob>& jobs,
                         const std::map<std::string, int32_t>& vcs, const BaselineOptions& options);

}  // namespace ringmaster::scheduler::sim

#endif  // RINGMASTER_SERVICES_SCHEDULER_SIM_BASELINES_H_
