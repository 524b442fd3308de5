// Placement of tasks that ask for a share of one GPU (or whole GPUs) on nodes whose GPUs may be
// shared, and the measure of fragmentation it is judged by: FGD's (Weng et al., "Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX
// ATC'23). Pure: nodes and tasks in, a choice out. The simulator (sim/share_experiment.h) runs
// every policy here on the Alibaba openb trace; the live scheduler places shares with
// ChooseShare too (placement_shares.cc), by the policy of its --share-placement flag.
//
// Units: CPU in millicores, memory in MiB, a GPU's capacity in thousandths (1000 = a whole GPU).
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_SHARE_PLACEMENT_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_SHARE_PLACEMENT_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace ringmaster::scheduler {

inline constexpr int32_t kWholeGpu = 1000;

struct ShareNode {
  std::string model;  // GPU type of every GPU of the node
  int64_t cpu_total = 0, memory_total = 0;
  int64_t cpu_free = 0, memory_free = 0;
  std::vector<int32_t> gpu_free;  // per GPU: thousandths not allocated, 0..1000
};

struct ShareTask {
  int64_t cpu = 0, memory = 0;
  // GPUs asked for, 0..8; with one, `gpu_milli` of it (1..1000); with more, whole GPUs.
  int32_t num_gpu = 0;
  int32_t gpu_milli = 0;
  std::vector<std::string> models;  // GPU types it may run on; empty: any
  // Thousandths it needs of each GPU it takes (0 for a CPU task).
  int32_t PerGpu() const { return num_gpu == 0 ? 0 : num_gpu == 1 ? gpu_milli : kWholeGpu; }
  // Thousandths of GPU it takes in all.
  int64_t GpuDemand() const { return static_cast<int64_t>(num_gpu) * PerGpu(); }
};

// The tasks FGD's measure expects: task shapes and how often each comes (weights sum to 1).
struct TaskShape {
  ShareTask task;
  double weight = 0;
};
using TaskMix = std::vector<TaskShape>;

// Shapes by (GPUs, share, GPU types), each with the median CPU and memory of its tasks.
TaskMix MixOf(const std::vector<ShareTask>& tasks);

// Whether `task` fits `node` now (type, CPU, memory, and GPUs with room for its share).
bool Fits(const ShareNode& node, const ShareTask& task);

// FGD's fragmentation of `node` for `task`, in thousandths of a GPU: the node's free GPU
// capacity that the task cannot use. All of it when the task does not fit the node or asks for
// no GPU; otherwise the free capacity of the GPUs that have less free than the task needs of
// one GPU (a whole GPU for a task of whole GPUs).
int64_t Fragmentation(const ShareNode& node, const ShareTask& task);
// The same expected over `mix`.
double ExpectedFragmentation(const ShareNode& node, const TaskMix& mix);

// Takes `task` onto `node`, on the GPUs `gpus` (indices into node.gpu_free).
void Allocate(ShareNode& node, const ShareTask& task, const std::vector<int32_t>& gpus);

enum class SharePolicy {
  kRandom,      // a random node that fits; a random GPU that fits
  kBestFit,     // the node left with the least (CPU, memory and GPU, each of its capacity)
  kDotProduct,  // the node whose free resources align most with the demand (Tetris)
  kGpuPacking,  // shared GPUs first (the fullest that fits), then the node with fewest free GPUs
  kFgd,         // the node and GPUs that grow the expected fragmentation least (FGD)
  kRingmaster,  // FGD, ties broken towards the node left with the least free GPU (see .cc)
};
const char* SharePolicyName(SharePolicy policy);
// The scheduler's --share-placement names: "gpu-packing", "fgd" and "ringmaster" (the policies
// the live scheduler offers); nullopt for anything else.
std::optional<SharePolicy> LiveSharePolicy(const std::string& name);

struct ShareChoice {
  int32_t node = -1;  // -1: no node fits
  std::vector<int32_t> gpus;
};

// What FGD and Ringmaster read of a mix, per GPU type of a cluster: built once by
// PrepareShares, as the types and their GPU counts do not change when tasks are placed.
struct ShareContext {
  struct TypeMix {
    std::vector<const TaskShape*> allowed;  // the shapes that may run on the type
    double excluded_weight = 0;             // the weight of those that may not
    // Ringmaster's: what the tasks restricted to some types ask of this one, per GPU of the
    // types they allow, summed over the restricted shapes that allow it (see the .cc).
    double pressure = 0;
  };
  std::map<std::string, TypeMix> types;
};
// `mix` must outlive the context.
ShareContext PrepareShares(const std::vector<ShareNode>& nodes, const TaskMix& mix);

// Where `policy` puts `task`. `context` is PrepareShares of these nodes' types and the mix;
// `expected` holds ExpectedFragmentation of every node under that mix (kept by the caller as
// nodes change). Both are read by kFgd and kRingmaster only.
ShareChoice ChooseShare(const std::vector<ShareNode>& nodes, const ShareTask& task,
                        SharePolicy policy, const ShareContext& context,
                        const std::vector<double>& expected, std::mt19937_64& rng);

// The mix FGD and Ringmaster expect in the live scheduler: the shapes of the last `capacity`
// GPU ranks asked for (a job of n ranks counts n times; CPU ranks are not counted), the oldest
// forgotten first. FGD learns its mix from the workload's recent tasks the same way.
class RecentDemand {
 public:
  explicit RecentDemand(int64_t capacity = 4096) : capacity_(capacity) {}
  void Add(const ShareTask& task, int64_t ranks);
  // Shapes by (GPUs, share, GPU types), weighted by their ranks; empty before any GPU rank.
  TaskMix Mix() const;
  // Counts calls to Add that changed the window: a caller rebuilds its mix when this moves.
  uint64_t changes() const { return changes_; }

 private:
  int64_t capacity_;
  std::deque<std::pair<ShareTask, int64_t>> window_;  // oldest first, with their ranks
  int64_t ranks_ = 0;
  uint64_t changes_ = 0;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_SHARE_PLACEMENT_H_
