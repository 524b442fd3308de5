// Placement of ranks that ask for a share of one GPU (JobSpec.gpu_share): several such ranks
// may hold one device, up to its whole (1000 thousandths) and its memory, and never beside a
// rank of whole GPUs. docs/gpu-sharing.md, "Where shares go".
#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/thousandths.h"
#include "scheduler/core/placement.h"

namespace ringmaster::scheduler {

bool ClusterState::ShareFits(const Node& node, size_t slot, int32_t share, int64_t memory,
                             int32_t taken, int64_t memory_taken) {
  if (node.gpu_used[slot]) return false;
  if (node.gpu_shared[slot] + taken + share > kWholeGpuShare) return false;
  if (memory == 0) return true;
  return node.gpu_memory_shared[slot] + memory_taken + memory <=
         node.worker->gpus[slot].memory_bytes;
}

PlacementDecision ClusterState::PlaceShares(const GangRequest& request, int32_t type_id,
                                            bool by_policy) const {
  PlacementDecision decision;
  const std::string& type = type_names_[type_id];
  auto what = [&] {
    std::string out =
        absl::StrCat(request.replicas, " x ", ThousandthsText(request.gpu_share), " of a ", type);
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

  // What this job's ranks chose so far, per device (they count as they go).
  struct Taken {
    size_t node, slot;
    int32_t share;
    int64_t memory;
  };
  std::vector<Taken> taken;
  auto taken_on = [&](size_t n, size_t slot) {
    std::pair<int32_t, int64_t> sum{0, 0};
    for (const Taken& t : taken) {
      if (t.node == n && t.slot == slot) {
        sum.first += t.share;
        sum.second += t.memory;
      }
    }
    return sum;
  };
  auto place = [&](int32_t rank, size_t n, size_t slot) {
    taken.push_back({n, slot, request.gpu_share, request.gpu_memory});
    const Node& node = nodes_[n];
    RankPlacement placement{rank,
                            node.worker->id,
                            node.worker->address,
                            {node.worker->gpus[slot].index},
                            node.worker->port};
    placement.gpu_share = request.gpu_share;
    placement.gpu_memory = request.gpu_memory;
    placement.team = request.team;
    decision.ranks.push_back(std::move(placement));
  };
  // Whether a worker was passed over for holding another team's shares.
  bool other_team = false;
  auto may_use = [&](const Node& node) {
    if (!Usable(node, request)) return false;
    if (TeamMayShare(node, request)) return true;
    other_team = true;
    return false;
  };
  auto no_room = [&](int32_t rank) {
    decision.reason = absl::StrCat("needs ", what(), ", room for ", rank, " now");
    if (other_team) {
      absl::StrAppend(&decision.reason,
                      " (workers that run teams as their own users hold one team's shares at a "
                      "time, and some hold another team's)");
    }
    return decision;
  };

  if (by_policy && Gradient()) {
    // FGD or Ringmaster's: ChooseShare, as the simulator judged it, over this type's devices as
    // share_placement.h sees them. A device without the memory a rank asks is full to it.
    struct Device {
      size_t node, slot;
    };
    std::vector<ShareNode> view;
    std::vector<std::vector<Device>> devices_of;  // parallel to view
    auto free_of = [&](size_t n, size_t slot) -> int32_t {
      const Node& node = nodes_[n];
      if (node.gpu_used[slot]) return 0;
      const auto [share_taken, memory_taken] = taken_on(n, slot);
      if (request.gpu_memory > 0 &&
          node.gpu_memory_shared[slot] + memory_taken + request.gpu_memory >
              node.worker->gpus[slot].memory_bytes) {
        return 0;
      }
      return kWholeGpuShare - node.gpu_shared[slot] - share_taken;
    };
    ShareTask task;
    task.num_gpu = 1;
    task.gpu_milli = request.gpu_share;
    task.models = {type};
    std::mt19937_64 unused_rng(0);  // read by kRandom only
    for (int32_t rank = 0; rank < request.replicas; ++rank) {
      // The candidates: nodes with room for the share, each state once. ChooseShare takes the
      // first of equal scores, and nodes in the same state score the same, so leaving out the
      // later ones (and those without room, which it skips) changes no choice; it saves the
      // measure of every node in a large cluster, where most are full or wholly free.
      view.clear();
      devices_of.clear();
      std::set<std::vector<int32_t>> states;
      for (size_t n : nodes_by_type_[type_id]) {
        const Node& node = nodes_[n];
        if (!may_use(node)) continue;
        ShareNode shown;
        shown.model = type;
        std::vector<Device> devices;
        bool room = false;
        for (size_t slot = 0; slot < node.worker->gpus.size(); ++slot) {
          if (node.gpu_type_id[slot] != type_id) continue;
          shown.gpu_free.push_back(free_of(n, slot));
          room = room || shown.gpu_free.back() >= request.gpu_share;
          devices.push_back({n, slot});
        }
        if (!room || !states.insert(shown.gpu_free).second) continue;
        view.push_back(std::move(shown));
        devices_of.push_back(std::move(devices));
      }
      const ShareContext context = PrepareShares(view, *share_mix_);
      std::vector<double> expected(view.size());
      for (size_t i = 0; i < view.size(); ++i) {
        expected[i] = ExpectedFragmentation(view[i], *share_mix_);
      }
      const ShareChoice choice =
          ChooseShare(view, task, share_policy_, context, expected, unused_rng);
      if (choice.node < 0) return no_room(rank);
      const Device device = devices_of[choice.node][choice.gpus[0]];
      place(rank, device.node, device.slot);
    }
    decision.kind = PlacementDecision::Kind::kPlaced;
    return decision;
  }

  // GPU packing, each rank in turn: the device already shared that it fills the most (packing
  // shares keeps devices free for whole ranks), else a free device on the worker with the
  // fewest free devices of the type (keeps whole workers for gangs).
  for (int32_t rank = 0; rank < request.replicas; ++rank) {
    size_t best_node = 0, best_slot = 0;
    bool found = false;
    int64_t best_score = std::numeric_limits<int64_t>::max();
    for (size_t n : nodes_by_type_[type_id]) {
      const Node& node = nodes_[n];
      if (!may_use(node)) continue;
      for (size_t slot = 0; slot < node.worker->gpus.size(); ++slot) {
        if (node.gpu_type_id[slot] != type_id) continue;
        const auto [share_taken, memory_taken] = taken_on(n, slot);
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
    if (!found) return no_room(rank);
    place(rank, best_node, best_slot);
  }
  decision.kind = PlacementDecision::Kind::kPlaced;
  return decision;
}

std::vector<int32_t> ClusterState::ShareTypeOrder() const {
  std::vector<std::pair<std::string, int32_t>> types;
  for (const auto& [name, id] : type_ids_) types.emplace_back(name, id);
  std::sort(types.begin(), types.end());
  std::vector<int32_t> order;
  for (const auto& [name, id] : types) order.push_back(id);
  if (!Gradient() || share_policy_ != SharePolicy::kRingmaster || order.size() < 2) return order;
  // The pressure of each type: what the demand restricted to some types asks of it.
  std::map<std::string, int32_t> devices;
  for (const Node& node : nodes_) {
    if (!node.ready()) continue;
    for (int32_t id : node.gpu_type_id) ++devices[type_names_[id]];
  }
  std::vector<ShareNode> sizes;  // one node a type: PrepareShares reads only the capacity
  for (const auto& [name, count] : devices) {
    ShareNode one;
    one.model = name;
    one.gpu_free.assign(count, kWholeGpuShare);
    sizes.push_back(std::move(one));
  }
  const ShareContext context = PrepareShares(sizes, *share_mix_);
  auto pressure = [&](int32_t id) {
    auto it = context.types.find(type_names_[id]);
    return it == context.types.end() ? 0.0 : it->second.pressure;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return pressure(a) < pressure(b); });
  return order;
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
