// Placement of ranks that ask for a share of one GPU (JobSpec.gpu_share): several such ranks
// may hold one device, up to its whole (1000 thousandths) and its memory, and never beside a
// rank of whole GPUs. docs/gpu-sharing.md, "Where shares go".
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/thousandths.h"
#include "scheduler/core/placement.h"

namespace ringmaster::scheduler {

std::string GpuFraction(int64_t thousandths) { return ThousandthsText(thousandths); }

bool ClusterState::ShareFits(const Node& node, size_t slot, int32_t share, int64_t memory,
                             int32_t taken, int64_t memory_taken) {
  if (node.gpu_used[slot]) return false;
  if (node.gpu_shared[slot] + taken + share > kWholeGpuShare) return false;
  if (memory == 0) return true;
  return node.gpu_memory_shared[slot] + memory_taken + memory <=
         node.worker->gpus[slot].memory_bytes;
}

PlacementDecision ClusterState::PlaceShares(const GangRequest& request, int32_t type_id) const {
  PlacementDecision decision;
  const std::string& type = type_names_[type_id];
  auto what = [&] {
    std::string out =
        absl::StrCat(request.replicas, " x ", GpuFraction(request.gpu_share), " of a ", type);
    if (request.gpu_memory > 0) absl::StrAppend(&out, " with ", request.gpu_memory, " bytes");
    return out;
  };
  // Whether any device of the type could ever hold one rank: its memory.
  int64_t largest = 0;
  int64_t devices = 0;
  for (size_t n : nodes_by_type_[type_id]) {
    const Node& node = nodes_[n];
    if (!Usable(node, request)) continue;
    for (size_t slot = 0; slot < node.worker->gpus.size(); ++slot) {
      if (node.gpu_type_id[slot] != type_id) continue;
      ++devices;
      largest = std::max(largest, node.worker->gpus[slot].memory_bytes);
    }
  }
  if (devices == 0 || request.gpu_memory > largest) {
    decision.kind = PlacementDecision::Kind::kInfeasible;
    decision.reason = devices == 0 ? absl::StrCat("needs ", what(), ", the cluster has no ", type)
                                   : absl::StrCat("needs ", what(), ", the largest ", type, " has ",
                                                  largest, " bytes of memory");
    return decision;
  }
  if (int64_t{request.replicas} * request.gpu_share > devices * kWholeGpuShare) {
    decision.kind = PlacementDecision::Kind::kInfeasible;
    decision.reason = absl::StrCat("needs ", what(), ", the cluster has ", devices, " x ", type);
    return decision;
  }

  // Each rank in turn: the device already shared that it fills the most (packing shares keeps
  // devices free for whole ranks), else a free device on the worker with the fewest free
  // devices of the type (keeps whole workers for gangs). Ranks of this job count as they go.
  struct Taken {
    size_t node, slot;
    int32_t share;
    int64_t memory;
  };
  std::vector<Taken> taken;
  for (int32_t rank = 0; rank < request.replicas; ++rank) {
    size_t best_node = 0, best_slot = 0;
    bool found = false;
    int64_t best_score = std::numeric_limits<int64_t>::max();
    for (size_t n : nodes_by_type_[type_id]) {
      const Node& node = nodes_[n];
      if (!Usable(node, request)) continue;
      for (size_t slot = 0; slot < node.worker->gpus.size(); ++slot) {
        if (node.gpu_type_id[slot] != type_id) continue;
        int32_t share_taken = 0;
        int64_t memory_taken = 0;
        for (const Taken& t : taken) {
          if (t.node == n && t.slot == slot) {
            share_taken += t.share;
            memory_taken += t.memory;
          }
        }
        if (!ShareFits(node, slot, request.gpu_share, request.gpu_memory, share_taken,
                       memory_taken)) {
          continue;
        }
        const int32_t held = node.gpu_shared[slot] + share_taken;
        // Shared devices first, fullest first; then free devices, by their worker's free count.
        const int64_t score =
            held > 0 ? kWholeGpuShare - held : kWholeGpuShare + node.free_by_type[type_id];
        if (score < best_score) {
          best_score = score;
          best_node = n;
          best_slot = slot;
          found = true;
        }
      }
    }
    if (!found) {
      decision.reason = absl::StrCat("needs ", what(), ", room for ", rank, " now");
      return decision;
    }
    taken.push_back({best_node, best_slot, request.gpu_share, request.gpu_memory});
    const Node& node = nodes_[best_node];
    RankPlacement placement{rank,
                            node.worker->id,
                            node.worker->address,
                            {node.worker->gpus[best_slot].index},
                            node.worker->port};
    placement.gpu_share = request.gpu_share;
    placement.gpu_memory = request.gpu_memory;
    decision.ranks.push_back(std::move(placement));
  }
  decision.kind = PlacementDecision::Kind::kPlaced;
  return decision;
}

std::map<std::string, ClusterState::ShareTotals> ClusterState::ShareTotalsByType() const {
  std::map<std::string, ShareTotals> out;
  for (const Node& node : nodes_) {
    if (!node.ready()) continue;
    for (size_t slot = 0; slot < node.worker->gpus.size(); ++slot) {
      if (node.gpu_shared[slot] == 0) continue;
      ShareTotals& t = out[type_names_[node.gpu_type_id[slot]]];
      ++t.devices;
      t.held += node.gpu_shared[slot];
    }
  }
  return out;
}

}  // namespace ringmaster::scheduler
