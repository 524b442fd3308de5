// Replays a GPU-cluster job trace through the scheduler's own policy (core/fair_share.h) on a
// simulated clock: no processes, no sleeping. Used by ringmaster-sim and its test.
#ifndef RINGMASTER_SERVICES_SCHEDULER_SIM_REPLAY_H_
#define RINGMASTER_SERVICES_SCHEDULER_SIM_REPLAY_H_

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/core/fair_share.h"

namespace ringmaster::scheduler::sim {

struct TraceJob {
  int64_t submit_s = 0;  // seconds since the epoch, the trace's local time read as UTC
  int64_t duration_s = 0;
  int32_t gpus = 0;
  std::string vc;
};

// philly.csv of the Pollux artifact: timestamp,duration,num_gpus,gpu_time,cluster. Errors
// name the line and column. The result is sorted by submit time (the file is not).
absl::StatusOr<std::vector<TraceJob>> ParsePhillyCsv(std::istream& in);
// helios_qssf_philly_vc.csv: vc,node num.
absl::StatusOr<std::map<std::string, int32_t>> ParseVcSizes(std::istream& in);
// "2017-10-01 00:00:00" as seconds since the epoch (UTC).
absl::StatusOr<int64_t> ParseTime(const std::string& text);

struct SimOptions {
  PolicyOptions policy;
  // Queues lend to each other (one cohort) and reclaim what they lent; false: each VC is
  // alone with its nominal quota (Helios' per-VC baseline).
  bool sharing = true;
  int32_t gpus_per_node = 8;
  // A preempted job keeps the work up to its last checkpoint, taken this often.
  int64_t checkpoint_interval_s = 1800;
  int64_t grace_s = 30;
  // Each job's max_runtime_seconds: its duration rounded up to the next multiple of this
  // (0: no limits, so nothing backfills into reserved GPUs).
  int64_t runtime_limit_round_s = 3600;
  // Elastic jobs (docs/fair-share.md, "Elastic jobs in the simulator"): every job of two or
  // more GPUs may run from half to double its GPUs (ElasticShape), at the throughput of its
  // model family's curve (FamilyThroughput); the trace's duration is at the GPUs it asked for.
  // The policy's own settings are policy.elastic.
  bool elastic = false;
  // A resize's restart: time the job holds its new GPUs before it makes progress again (beyond
  // the grace, and the work since its last checkpoint, which it loses).
  int64_t resize_restart_s = 60;
};

struct QueueOutcome {
  int32_t nominal_gpus = 0;
  int64_t jobs = 0;
  double gpu_seconds = 0;         // run time of its jobs, work lost to preemption included
  double demand_gpu_seconds = 0;  // the work its jobs asked for
  // Longest time one of its pending jobs fit the queue's unused nominal quota while another
  // queue borrowed: how long it waited for what it was promised.
  int64_t longest_refused_s = 0;
  int64_t preempted = 0;
};

struct SimReport {
  int64_t jobs = 0;
  double avg_jct_s = 0, p50_jct_s = 0, p99_jct_s = 0;
  double avg_queue_s = 0, p50_queue_s = 0, p99_queue_s = 0;
  double utilisation = 0;  // GPU-seconds used / (GPUs x makespan)
  int64_t longest_wait_32plus_s = 0;
  int64_t preemptions = 0;
  // Work preempted jobs lost: GPU-seconds run after their last checkpoint, grace included.
  double lost_gpu_seconds = 0;
  int64_t passes = 0;
  int64_t over_allocations = 0;   // starts the cluster refused: must stay 0
  int64_t partial_gangs = 0;      // starts with fewer ranks than replicas: must stay 0
  int64_t longest_refused_s = 0;  // max over queues
  int64_t total_gpus = 0;
  // Queueing of jobs whose queue was within its nominal quota, this job included, at submit.
  double p99_queue_within_nominal_s = 0;
  int64_t elastic_jobs = 0;
  int64_t resizes = 0;  // grows and shrinks
  int64_t grows = 0;
  // GPU-seconds resizes cost: the work since the last checkpoint, the grace and the restart.
  double resize_lost_gpu_seconds = 0;
  std::map<std::string, QueueOutcome> queues;
};

// A trace job's gang: ranks of up to one node's GPUs each (the largest divisor of `gpus` that
// fits a node, so 16 GPUs are 2 x 8 and 6 are 1 x 6).
void GangShape(int32_t gpus, int32_t per_node, int32_t* replicas, int32_t* per_replica);
// An elastic trace job of `gpus` (2 or more, even): ranks of half its GPUs' gang shape, so that
// half, the request and double are whole numbers of ranks (8 GPUs: 2 x 4, from 1 to 4 ranks).
void ElasticShape(int32_t gpus, int32_t per_node, int32_t* replicas, int32_t* per_replica);
// The model families of the simulator's jobs: scaling efficiency at g GPUs is 1 / (1 + a log2 g),
// with `a` from published or the project's figures (docs/fair-share.md). Job i is family i % 3.
inline constexpr int kModelFamilies = 3;
const char* FamilyName(int family);
// Throughput at `gpus` GPUs in GPUs' worth of one GPU's (g x efficiency).
double FamilyThroughput(int family, int32_t gpus);
// Node `n` of a simulated cluster: `gpus_per_node` GPUs of the one type "gpu".
Worker SimNode(int n, int32_t gpus_per_node);
// The part of a preempted run of `ran` seconds that its checkpoints keep: up to the last one
// (none with an interval of 0). The same cost model for every policy the simulator compares.
int64_t WorkKept(int64_t ran, int64_t checkpoint_interval_s);
// Sets the report's JCT and queueing averages and percentiles from per-job figures.
void Summarize(const std::vector<double>& jct, const std::vector<double>& queued, SimReport* r);

// Replays `jobs` (sorted by submit time) on a cluster of sum(vc nodes) x gpus_per_node GPUs,
// one queue per VC with the VC's GPUs as its nominal quota.
SimReport Replay(const std::vector<TraceJob>& jobs, const std::map<std::string, int32_t>& vcs,
                 const SimOptions& options);

}  // namespace ringmaster::scheduler::sim

#endif  // RINGMASTER_SERVICES_SCHEDULER_SIM_REPLAY_H_
