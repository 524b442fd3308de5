#include "core/placement.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

GangRequest RequestOf(const JobSpec& spec) {
  return GangRequest{spec.replicas, spec.gpus_per_replica, spec.gpu_type};
}

void ClusterState::Recount(Node& node) {
  node.free_by_type.clear();
  for (size_t i = 0; i < node.worker.gpus.size(); ++i) {
    int32_t& free = node.free_by_type[node.worker.gpus[i].type];
    if (!node.gpu_used[i]) ++free;
  }
}

void ClusterState::UpsertWorker(const Worker& worker) {
  auto it = index_.find(worker.id);
  if (it == index_.end()) {
    index_[worker.id] = nodes_.size();
    Node node;
    node.worker = worker;
    node.gpu_used.assign(worker.gpus.size(), false);
    Recount(node);
    nodes_.push_back(std::move(node));
    return;
  }
  Node& node = nodes_[it->second];
  // Keep allocations of GPUs that still exist under the same index.
  std::set<int32_t> used;
  for (size_t i = 0; i < node.worker.gpus.size(); ++i) {
    if (node.gpu_used[i]) used.insert(node.worker.gpus[i].index);
  }
  node.worker = worker;
  node.gpu_used.assign(worker.gpus.size(), false);
  for (size_t i = 0; i < worker.gpus.size(); ++i) node.gpu_used[i] = used.count(worker.gpus[i].index) > 0;
  Recount(node);
}

void ClusterState::SetWorkerState(const std::string& worker_id, WorkerState state) {
  auto it = index_.find(worker_id);
  if (it != index_.end()) nodes_[it->second].worker.state = state;
}

std::vector<std::string> ClusterState::WorkerIds() const {
  std::vector<std::string> ids;
  ids.reserve(nodes_.size());
  for (const Node& node : nodes_) ids.push_back(node.worker.id);
  return ids;
}

absl::Status ClusterState::Allocate(const std::vector<RankPlacement>& ranks) {
  // Check everything first so a failed call changes nothing.
  std::set<std::pair<size_t, size_t>> gpus;
  std::unordered_map<size_t, int32_t> cpus;
  for (const RankPlacement& rank : ranks) {
    auto it = index_.find(rank.worker_id);
    if (it == index_.end()) {
      return absl::FailedPreconditionError(absl::StrCat("unknown worker ", rank.worker_id));
    }
    const Node& node = nodes_[it->second];
    if (rank.gpu_indices.empty()) {
      if (node.cpu_used + (++cpus[it->second]) > node.worker.cpu_slots) {
        return absl::FailedPreconditionError(absl::StrCat("no free CPU slot on ", rank.worker_id));
      }
      continue;
    }
    for (int32_t index : rank.gpu_indices) {
      auto pos = std::find_if(node.worker.gpus.begin(), node.worker.gpus.end(),
                              [&](const Gpu& g) { return g.index == index; });
      if (pos == node.worker.gpus.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("worker ", rank.worker_id, " has no GPU ", index));
      }
      size_t slot = pos - node.worker.gpus.begin();
      if (node.gpu_used[slot] || !gpus.insert({it->second, slot}).second) {
        return absl::FailedPreconditionError(
            absl::StrCat("GPU ", index, " of ", rank.worker_id, " is already allocated"));
      }
    }
  }
  for (auto [node_index, slot] : gpus) {
    Node& node = nodes_[node_index];
    node.gpu_used[slot] = true;
    --node.free_by_type[node.worker.gpus[slot].type];
  }
  for (auto [node_index, n] : cpus) nodes_[node_index].cpu_used += n;
  return absl::OkStatus();
}

void ClusterState::Release(const std::vector<RankPlacement>& ranks) {
  for (const RankPlacement& rank : ranks) {
    auto it = index_.find(rank.worker_id);
    if (it == index_.end()) continue;
    Node& node = nodes_[it->second];
    if (rank.gpu_indices.empty()) {
      node.cpu_used = std::max(0, node.cpu_used - 1);
      continue;
    }
    for (int32_t index : rank.gpu_indices) {
      for (size_t slot = 0; slot < node.worker.gpus.size(); ++slot) {
        if (node.worker.gpus[slot].index == index && node.gpu_used[slot]) {
          node.gpu_used[slot] = false;
          ++node.free_by_type[node.worker.gpus[slot].type];
        }
      }
    }
  }
}

int32_t ClusterState::Capacity(const Node& node, const GangRequest& request,
                               const std::string& type) {
  if (!node.ready()) return 0;
  if (request.gpus_per_replica == 0) return node.worker.cpu_slots - node.cpu_used;
  auto it = node.free_by_type.find(type);
  return it == node.free_by_type.end() ? 0 : it->second / request.gpus_per_replica;
}

// Packs the gang onto the fewest workers: the largest capacities first, then the smallest
// worker that still holds the remainder (best fit keeps big holes for big jobs).
PlacementDecision ClusterState::PlaceType(const GangRequest& request,
                                          const std::string& type) const {
  const bool cpu = request.gpus_per_replica == 0;
  const int32_t units = cpu ? 1 : request.gpus_per_replica;
  int64_t free_units = 0;
  int64_t total_units = 0;
  int64_t fitting_ranks = 0;
  std::vector<std::pair<int32_t, size_t>> candidates;  // (capacity, node)
  size_t best_single = nodes_.size();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    if (!node.ready()) continue;
    if (cpu) {
      total_units += node.worker.cpu_slots;
      free_units += node.worker.cpu_slots - node.cpu_used;
    } else {
      for (const Gpu& gpu : node.worker.gpus) total_units += gpu.type == type;
      auto it = node.free_by_type.find(type);
      free_units += it == node.free_by_type.end() ? 0 : it->second;
    }
    int32_t cap = Capacity(node, request, type);
    if (cap <= 0) continue;
    fitting_ranks += cap;
    candidates.emplace_back(cap, i);
    if (cap >= request.replicas &&
        (best_single == nodes_.size() || cap < Capacity(nodes_[best_single], request, type))) {
      best_single = i;
    }
  }

  const int64_t needed = static_cast<int64_t>(request.replicas) * units;
  const std::string what = cpu ? "CPU slots" : absl::StrCat("x ", type);
  PlacementDecision decision;
  if (fitting_ranks < request.replicas) {
    if (needed > total_units) {
      decision.kind = PlacementDecision::Kind::kInfeasible;
      decision.reason = absl::StrCat("needs ", needed, " ", what, ", the cluster has ", total_units);
    } else if (needed > free_units) {
      decision.reason = absl::StrCat("needs ", needed, " ", what, ", ", free_units, " free");
    } else {
      decision.reason = absl::StrCat("needs ", request.replicas, " ranks of ", units, " ", what,
                                     " on one worker each, ", fitting_ranks, " fit");
    }
    return decision;
  }

  std::vector<std::pair<size_t, int32_t>> chosen;  // (node, ranks)
  if (best_single != nodes_.size()) {
    chosen.emplace_back(best_single, request.replicas);
  } else {
    std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    int32_t remaining = request.replicas;
    size_t k = 0;
    while (remaining > candidates[k].first) {
      chosen.emplace_back(candidates[k].second, candidates[k].first);
      remaining -= candidates[k].first;
      ++k;
    }
    // Best fit for the last share among the rest (sorted by capacity, descending).
    size_t last = k;
    while (last + 1 < candidates.size() && candidates[last + 1].first >= remaining) ++last;
    chosen.emplace_back(candidates[last].second, remaining);
  }

  decision.kind = PlacementDecision::Kind::kPlaced;
  int32_t rank = 0;
  for (auto [node_index, count] : chosen) {
    const Node& node = nodes_[node_index];
    std::vector<bool> used = node.gpu_used;  // each worker appears once in `chosen`
    size_t slot = 0;
    for (int32_t r = 0; r < count; ++r) {
      RankPlacement placement{rank++, node.worker.id, node.worker.address, {}};
      for (int32_t g = 0; !cpu && g < units; ++g) {
        while (used[slot] || node.worker.gpus[slot].type != type) ++slot;
        used[slot] = true;
        placement.gpu_indices.push_back(node.worker.gpus[slot].index);
      }
      decision.ranks.push_back(std::move(placement));
    }
  }
  return decision;
}

PlacementDecision ClusterState::Place(const GangRequest& request) const {
  if (request.gpus_per_replica == 0 || !request.gpu_type.empty()) {
    return PlaceType(request, request.gpu_type);
  }
  // Any type: every rank still gets the same type. Prefer the type that needs the fewest
  // workers, then the one with the least free capacity, to keep large pools whole.
  std::set<std::string> types;
  for (const Node& node : nodes_) {
    if (!node.ready()) continue;
    for (const Gpu& gpu : node.worker.gpus) types.insert(gpu.type);
  }
  PlacementDecision best;
  best.kind = PlacementDecision::Kind::kInfeasible;
  int64_t best_workers = 0;
  int64_t best_free = 0;
  int64_t max_free = 0;
  int64_t max_total = 0;
  for (const std::string& type : types) {
    int64_t free = 0;
    int64_t total = 0;
    for (const Node& node : nodes_) {
      if (!node.ready()) continue;
      for (size_t i = 0; i < node.worker.gpus.size(); ++i) {
        if (node.worker.gpus[i].type != type) continue;
        ++total;
        free += !node.gpu_used[i];
      }
    }
    max_free = std::max(max_free, free);
    max_total = std::max(max_total, total);
    PlacementDecision d = PlaceType(request, type);
    if (d.kind != PlacementDecision::Kind::kPlaced) {
      if (d.kind == PlacementDecision::Kind::kWait) best.kind = PlacementDecision::Kind::kWait;
      continue;
    }
    std::set<std::string> workers;
    for (const auto& r : d.ranks) workers.insert(r.worker_id);
    int64_t n = static_cast<int64_t>(workers.size());
    if (best.kind != PlacementDecision::Kind::kPlaced || n < best_workers ||
        (n == best_workers && free < best_free)) {
      best = std::move(d);
      best_workers = n;
      best_free = free;
    }
  }
  if (best.kind == PlacementDecision::Kind::kPlaced) return best;
  const int64_t needed = static_cast<int64_t>(request.replicas) * request.gpus_per_replica;
  if (best.kind == PlacementDecision::Kind::kInfeasible) {
    best.reason = absl::StrCat("needs ", needed, " x GPU of one type, the cluster has at most ",
                               max_total, " of one type");
  } else {
    best.reason = absl::StrCat("needs ", needed, " x GPU of one type, at most ", max_free,
                               " free of one type");
  }
  return best;
}

std::map<std::string, ClusterState::TypeTotals> ClusterState::GpuTotals() const {
  std::map<std::string, TypeTotals> totals;
  for (const Node& node : nodes_) {
    if (!node.ready()) continue;
    for (size_t i = 0; i < node.worker.gpus.size(); ++i) {
      TypeTotals& t = totals[node.worker.gpus[i].type];
      ++t.total;
      t.allocated += node.gpu_used[i];
    }
  }
  return totals;
}

ClusterState::TypeTotals ClusterState::CpuTotals() const {
  TypeTotals t;
  for (const Node& node : nodes_) {
    if (!node.ready()) continue;
    t.total += node.worker.cpu_slots;
    t.allocated += node.cpu_used;
  }
  return t;
}

std::vector<int32_t> ClusterState::AllocatedGpus(const std::string& worker_id) const {
  std::vector<int32_t> out;
  auto it = index_.find(worker_id);
  if (it == index_.end()) return out;
  const Node& node = nodes_[it->second];
  for (size_t i = 0; i < node.worker.gpus.size(); ++i) {
    if (node.gpu_used[i]) out.push_back(node.worker.gpus[i].index);
  }
  return out;
}

int32_t ClusterState::CpuSlotsUsed(const std::string& worker_id) const {
  auto it = index_.find(worker_id);
  return it == index_.end() ? 0 : nodes_[it->second].cpu_used;
}

}  // namespace ringmaster::scheduler
