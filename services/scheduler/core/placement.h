// Gang placement: every rank of a job gets a worker and concrete GPUs at once, or the job
// waits with a readable reason. Plain data in, plain data out; no I/O.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_PLACEMENT_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_PLACEMENT_H_

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "scheduler/core/share_placement.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

struct GangRequest {
  int32_t replicas = 1;
  int32_t gpus_per_replica = 0;  // 0: one CPU slot per rank
  std::string gpu_type;          // empty: any one type
  // The attempt runs a pre-run check (the spec's health_check), so it may also use workers on
  // probation: unhealthy ones whose next passing check clears them.
  bool checked = false;
  // Each rank takes this much of one GPU (thousandths, gpus_per_replica 1) on a device that
  // only shares hold, and gpu_memory bytes of its memory; 0: whole GPUs (JobSpec.gpu_share).
  int32_t gpu_share = 0;
  int64_t gpu_memory = 0;
  // The job's team, which a share may not meet another team's on a worker whose shares must be
  // one team's (Worker::shares_one_team). Set by RequestOf(Job) for shares only.
  std::string team{};
};

GangRequest RequestOf(const JobSpec& spec);
GangRequest RequestOf(const Job& job);
// A rank of the job as share_placement.h counts demand: its GPUs, its share, its GPU type.
ShareTask ShareTaskOf(const JobSpec& spec);

// A whole GPU in the thousandths of JobSpec.gpu_share.
inline constexpr int32_t kWholeGpuShare = 1000;

struct PlacementDecision {
  enum class Kind {
    kPlaced,
    // Does not fit now; may fit once something finishes.
    kWait,
    // Does not fit even on the empty cluster as it stands (more than its whole capacity).
    kInfeasible,
  };
  Kind kind = Kind::kWait;
  std::vector<RankPlacement> ranks;  // set when kPlaced; rank 0 on the first worker
  std::string reason;                // set otherwise, e.g. "needs 8 x t4, 4 free"
};

// The cluster's capacity and what is allocated, as placement sees it. Not thread-safe: the
// scheduler owns one and guards it.
class ClusterState {
 public:
  // Adds a worker or replaces its inventory; its allocations stay. Lost workers hold no
  // capacity for new placements.
  void UpsertWorker(const Worker& worker);
  void SetWorkerState(const std::string& worker_id, WorkerState state);
  // An unhealthy worker (a failed pre-run check named it) holds its placements but, like a
  // lost one, takes no new ones and counts in no totals. Workers start healthy.
  void SetWorkerHealthy(const std::string& worker_id, bool healthy);
  // An unhealthy worker on probation takes placements of checked requests only (their check
  // judges it again). Its capacity is counted apart and never in GpuTotals or CpuTotals.
  void SetWorkerProbation(const std::string& worker_id, bool probation);
  bool OnProbation(const std::string& worker_id) const;

  // Marks the ranks' GPUs or CPU slots as used. FAILED_PRECONDITION (and nothing changes) when
  // a worker is unknown or a GPU/slot is already taken.
  absl::Status Allocate(const std::vector<RankPlacement>& ranks);
  // Frees what Allocate took; unknown workers and free GPUs are ignored.
  void Release(const std::vector<RankPlacement>& ranks);

  PlacementDecision Place(const GangRequest& request) const;
  // How Place puts ranks with a gpu_share (share_placement.h): GPU packing (the default), or
  // FGD or Ringmaster's by the fragmentation `mix` would see. With no mix, or an empty one,
  // every policy packs. Whole-GPU ranks are placed as before whatever the policy.
  void SetSharePolicy(SharePolicy policy, std::shared_ptr<const TaskMix> mix);
  // Whether Place would place the gang, without choosing GPUs or explaining: for searches that
  // ask many times (a reservation's, over the ends of running jobs).
  bool Fits(const GangRequest& request) const;

  struct TypeTotals {
    int32_t total = 0;
    int32_t allocated = 0;
  };
  // Per GPU type over ready workers; "cpu" is not a key (see CpuTotals).
  std::map<std::string, TypeTotals> GpuTotals() const;
  TypeTotals CpuTotals() const;
  // GPU indices and CPU slots in use on one worker (held whole or by shares).
  std::vector<int32_t> AllocatedGpus(const std::string& worker_id) const;
  // What placements hold of each GPU in use on one worker.
  struct GpuUse {
    int32_t index = 0;
    bool whole = false;
    int32_t share = 0;  // thousandths held by shares
    int32_t share_ranks = 0;
    int64_t memory = 0;  // bytes promised to the shares
  };
  std::vector<GpuUse> GpuUses(const std::string& worker_id) const;
  // Per GPU type over ready workers: the devices that shares hold, and the thousandths held.
  struct ShareTotals {
    int32_t devices = 0;
    int64_t held = 0;
  };
  std::map<std::string, ShareTotals> ShareTotalsByType() const;
  int32_t CpuSlotsUsed(const std::string& worker_id) const;
  // The type of one GPU of a worker; empty when unknown.
  std::string GpuTypeOf(const std::string& worker_id, int32_t gpu_index) const;
  // The part of `ranks` (GPUs and CPU slots) that is free now.
  std::vector<RankPlacement> FreePart(const std::vector<RankPlacement>& ranks) const;

 private:
  struct Node {
    // Shared, so that copying the state (a scheduling pass works on a copy) is cheap.
    std::shared_ptr<const Worker> worker;
    WorkerState state = WorkerState::kReady;
    bool healthy = true;
    bool probation = false;
    // Inline: a pass copies every node, and heap vectors made that copy most of a pass.
    absl::InlinedVector<bool, 8> gpu_used;  // parallel to worker.gpus: held whole
    // Parallel to worker.gpus: what ranks with a gpu_share hold of it. A GPU is free (counted
    // in free_by_type) when neither a whole rank nor a share holds it.
    absl::InlinedVector<int32_t, 8> gpu_shared;  // thousandths
    absl::InlinedVector<int32_t, 8> gpu_share_ranks;
    absl::InlinedVector<int64_t, 8> gpu_memory_shared;  // bytes
    absl::InlinedVector<int32_t, 8> gpu_type_id;    // parallel to worker.gpus
    absl::InlinedVector<int32_t, 2> free_by_type;   // by type id
    absl::InlinedVector<int32_t, 2> total_by_type;  // by type id
    int32_t cpu_used = 0;
    // On a worker whose shares must be one team's: the team of the shares it holds (empty when
    // it holds none).
    std::string share_team;
    bool ready() const { return state == WorkerState::kReady && healthy; }
    bool on_probation() const { return state == WorkerState::kReady && !healthy && probation; }
  };
  // Aggregates over ready workers (and apart, over workers on probation), kept in step so
  // that most decisions need no scan.
  struct Totals {
    std::vector<int64_t> free_by_type;
    std::vector<int64_t> total_by_type;
    // Per type: how many nodes have k free GPUs of it, at [k]. Whether a gang fits is then a
    // sum over k, not a scan of the nodes (a reservation asks once per ending job).
    std::vector<absl::InlinedVector<int32_t, 9>> nodes_by_free;
    int64_t cpu_free = 0;
    int64_t cpu_total = 0;
  };

  int32_t TypeId(const std::string& type);  // interns
  void Recount(Node& node);
  // Adds (sign = +1) or removes (-1) a ready node's share of the totals (a node on probation:
  // of probation_totals_).
  void Contribute(const Node& node, int sign);
  // Free and total units of `type_id` (CPU slots for CPU requests) that `request` may use.
  int64_t FreeFor(const GangRequest& request, int32_t type_id) const;
  int64_t TotalFor(const GangRequest& request, int32_t type_id) const;
  int32_t Capacity(const Node& node, const GangRequest& request, int32_t type_id) const;
  PlacementDecision PlaceType(const GangRequest& request, int32_t type_id) const;
  bool FitsType(const GangRequest& request, int32_t type_id) const;
  // Ranks with a gpu_share: each on one device of the type with room for its share and memory
  // (placement_shares.cc). `by_policy` false: GPU packing, for Fits, whose answer does not
  // depend on the policy.
  PlacementDecision PlaceShares(const GangRequest& request, int32_t type_id,
                                bool by_policy = true) const;
  // The types an any-type share request tries, in order: by name, or under Ringmaster's policy
  // the least pressured first (the types that restricted demand needs least).
  std::vector<int32_t> ShareTypeOrder() const;
  bool Gradient() const {
    return share_mix_ && !share_mix_->empty() &&
           (share_policy_ == SharePolicy::kFgd || share_policy_ == SharePolicy::kRingmaster);
  }
  // Whether `slot` of `node` takes one more rank of `share` and `memory` (beyond `taken` and
  // `memory_taken` already chosen for it in this placement).
  static bool ShareFits(const Node& node, size_t slot, int32_t share, int64_t memory,
                        int32_t taken = 0, int64_t memory_taken = 0);
  bool Usable(const Node& node, const GangRequest& request) const;
  // Whether a share of `request` may go on `node` as far as teams go (Worker::shares_one_team).
  static bool TeamMayShare(const Node& node, const GangRequest& request) {
    return !node.worker->shares_one_team || node.share_team.empty() ||
           node.share_team == request.team;
  }

  // The node of a worker id. Shared between copies and copied before it changes (a new
  // worker): passes copy the state thousands of times, workers join rarely.
  using Index = std::unordered_map<std::string, size_t>;
  const Index& index() const { return *index_; }
  Index& MutableIndex();

  std::vector<Node> nodes_;
  std::shared_ptr<Index> index_ = std::make_shared<Index>();
  std::vector<std::string> type_names_;
  std::unordered_map<std::string, int32_t> type_ids_;
  std::vector<std::vector<size_t>> nodes_by_type_;  // nodes that have (had) a GPU of the type
  Totals totals_;
  Totals probation_totals_;
  SharePolicy share_policy_ = SharePolicy::kGpuPacking;
  std::shared_ptr<const TaskMix> share_mix_;  // shared: passes copy the state
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_PLACEMENT_H_
