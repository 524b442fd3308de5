#include "scheduler/core/placement.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/thousandths.h"
#include "scheduler/core/health_check.h"

namespace ringmaster::scheduler {

GangRequest RequestOf(const JobSpec& spec) {
  // With the scheduler's --health-check off nobody is put on probation, so `enabled` does not
  // matter here.
  return GangRequest{spec.replicas,  spec.gpus_per_replica,
                     spec.gpu_type,  ChecksJob(spec, /*enabled=*/true),
                     spec.gpu_share, spec.gpu_memory};
}

GangRequest RequestOf(const Job& job) {
  GangRequest request = RequestOf(job.spec);
  if (request.gpu_share > 0) request.team = job.team;
  return request;
}

ShareTask ShareTaskOf(const JobSpec& spec) {
  ShareTask task;
  task.num_gpu = spec.gpus_per_replica;
  task.gpu_milli = spec.gpu_share > 0 ? spec.gpu_share : kWholeGpu;
  if (!spec.gpu_type.empty()) task.models = {spec.gpu_type};
  return task;
}

void ClusterState::SetSharePolicy(SharePolicy policy, std::shared_ptr<const TaskMix> mix) {
  share_policy_ = policy;
  share_mix_ = std::move(mix);
}

int32_t ClusterState::TypeId(const std::string& type) {
  auto [it, added] = type_ids_.emplace(type, static_cast<int32_t>(type_names_.size()));
  if (added) {
    type_names_.push_back(type);
    nodes_by_type_.emplace_back();
    totals_.free_by_type.push_back(0);
    totals_.total_by_type.push_back(0);
    probation_totals_.free_by_type.push_back(0);
    probation_totals_.total_by_type.push_back(0);
    totals_.nodes_by_free.emplace_back();
    probation_totals_.nodes_by_free.emplace_back();
    for (Node& node : nodes_) {
      node.free_by_type.push_back(0);
      node.total_by_type.push_back(0);
    }
  }
  return it->second;
}

void ClusterState::Recount(Node& node) {
  node.free_by_type.assign(type_names_.size(), 0);
  node.total_by_type.assign(type_names_.size(), 0);
  for (size_t i = 0; i < node.worker->gpus.size(); ++i) {
    ++node.total_by_type[node.gpu_type_id[i]];
    if (!node.gpu_used[i] && node.gpu_shared[i] == 0) ++node.free_by_type[node.gpu_type_id[i]];
  }
}

void ClusterState::Contribute(const Node& node, int sign) {
  Totals* totals = node.ready() ? &totals_ : node.on_probation() ? &probation_totals_ : nullptr;
  if (totals == nullptr) return;
  for (size_t t = 0; t < node.free_by_type.size(); ++t) {
    totals->free_by_type[t] += sign * node.free_by_type[t];
    totals->total_by_type[t] += sign * node.total_by_type[t];
    if (node.total_by_type[t] == 0) continue;
    auto& hist = totals->nodes_by_free[t];
    const size_t k = static_cast<size_t>(node.free_by_type[t]);
    if (hist.size() <= k) hist.resize(k + 1, 0);
    hist[k] += sign;
  }
  totals->cpu_free += sign * (node.worker->cpu_slots - node.cpu_used);
  totals->cpu_total += sign * node.worker->cpu_slots;
}

int64_t ClusterState::FreeFor(const GangRequest& request, int32_t type_id) const {
  const bool cpu = request.gpus_per_replica == 0;
  int64_t free = cpu ? totals_.cpu_free : totals_.free_by_type[type_id];
  if (request.checked) {
    free += cpu ? probation_totals_.cpu_free : probation_totals_.free_by_type[type_id];
  }
  return free;
}

int64_t ClusterState::TotalFor(const GangRequest& request, int32_t type_id) const {
  const bool cpu = request.gpus_per_replica == 0;
  int64_t total = cpu ? totals_.cpu_total : totals_.total_by_type[type_id];
  if (request.checked) {
    total += cpu ? probation_totals_.cpu_total : probation_totals_.total_by_type[type_id];
  }
  return total;
}

ClusterState::Index& ClusterState::MutableIndex() {
  // A state used only by its owner: use_count cannot grow without access to this object.
  if (index_.use_count() > 1) index_ = std::make_shared<Index>(*index_);
  return *index_;
}

void ClusterState::UpsertWorker(const Worker& worker) {
  auto it = index().find(worker.id);
  size_t n;
  std::set<int32_t> used;
  struct Held {
    int32_t share = 0, ranks = 0;
    int64_t memory = 0;
  };
  std::map<int32_t, Held> shared;  // by GPU index
  int32_t cpu_used = 0;
  std::string share_team;
  if (it == index().end()) {
    n = nodes_.size();
    MutableIndex()[worker.id] = n;
    nodes_.emplace_back();
  } else {
    n = it->second;
    Node& old = nodes_[n];
    Contribute(old, -1);
    // Keep allocations of GPUs that still exist under the same index.
    for (size_t i = 0; i < old.worker->gpus.size(); ++i) {
      if (old.gpu_used[i]) used.insert(old.worker->gpus[i].index);
      if (old.gpu_shared[i] > 0) {
        shared[old.worker->gpus[i].index] = {old.gpu_shared[i], old.gpu_share_ranks[i],
                                             old.gpu_memory_shared[i]};
      }
    }
    cpu_used = old.cpu_used;
    share_team = old.share_team;
  }
  absl::InlinedVector<int32_t, 8> type_ids;
  for (const Gpu& gpu : worker.gpus) type_ids.push_back(TypeId(gpu.type));
  Node& node = nodes_[n];
  node.worker = std::make_shared<const Worker>(worker);
  node.state = worker.state;
  node.gpu_type_id = std::move(type_ids);
  node.gpu_used.assign(worker.gpus.size(), false);
  node.gpu_shared.assign(worker.gpus.size(), 0);
  node.gpu_share_ranks.assign(worker.gpus.size(), 0);
  node.gpu_memory_shared.assign(worker.gpus.size(), 0);
  for (size_t i = 0; i < worker.gpus.size(); ++i) {
    node.gpu_used[i] = used.count(worker.gpus[i].index) > 0;
    if (auto held = shared.find(worker.gpus[i].index); held != shared.end()) {
      node.gpu_shared[i] = held->second.share;
      node.gpu_share_ranks[i] = held->second.ranks;
      node.gpu_memory_shared[i] = held->second.memory;
    }
    auto& list = nodes_by_type_[node.gpu_type_id[i]];
    if (std::find(list.begin(), list.end(), n) == list.end()) list.push_back(n);
  }
  node.cpu_used = cpu_used;
  node.share_team = shared.empty() ? "" : share_team;
  Recount(node);
  Contribute(node, +1);
}

void ClusterState::SetWorkerState(const std::string& worker_id, WorkerState state) {
  auto it = index().find(worker_id);
  if (it == index().end()) return;
  Node& node = nodes_[it->second];
  Contribute(node, -1);
  node.state = state;
  Contribute(node, +1);
}

void ClusterState::SetWorkerHealthy(const std::string& worker_id, bool healthy) {
  auto it = index().find(worker_id);
  if (it == index().end()) return;
  Node& node = nodes_[it->second];
  Contribute(node, -1);
  node.healthy = healthy;
  Contribute(node, +1);
}

void ClusterState::SetWorkerProbation(const std::string& worker_id, bool probation) {
  auto it = index().find(worker_id);
  if (it == index().end()) return;
  Node& node = nodes_[it->second];
  Contribute(node, -1);
  node.probation = probation;
  Contribute(node, +1);
}

bool ClusterState::OnProbation(const std::string& worker_id) const {
  auto it = index().find(worker_id);
  return it != index().end() && nodes_[it->second].probation;
}

absl::Status ClusterState::Allocate(const std::vector<RankPlacement>& ranks) {
  // Check everything first so a failed call changes nothing. Flat lists, not sets: a pass
  // allocates once per start and per claim, and node-based containers were most of that.
  std::vector<std::pair<size_t, size_t>> gpus;   // (node, slot)
  std::vector<std::pair<size_t, int32_t>> cpus;  // (node, slots)
  struct ShareTaken {
    size_t node, slot;
    int32_t share;
    int64_t memory;
    const std::string* team;
  };
  std::vector<ShareTaken> shares;
  for (const RankPlacement& rank : ranks) {
    auto it = index().find(rank.worker_id);
    if (it == index().end()) {
      return absl::FailedPreconditionError(absl::StrCat("unknown worker ", rank.worker_id));
    }
    const Node& node = nodes_[it->second];
    if (rank.gpu_indices.empty()) {
      auto c = std::find_if(cpus.begin(), cpus.end(),
                            [&](const auto& p) { return p.first == it->second; });
      if (c == cpus.end()) c = cpus.insert(cpus.end(), {it->second, 0});
      if (node.cpu_used + (++c->second) > node.worker->cpu_slots) {
        return absl::FailedPreconditionError(absl::StrCat("no free CPU slot on ", rank.worker_id));
      }
      continue;
    }
    for (int32_t index : rank.gpu_indices) {
      auto pos = std::find_if(node.worker->gpus.begin(), node.worker->gpus.end(),
                              [&](const Gpu& g) { return g.index == index; });
      if (pos == node.worker->gpus.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("worker ", rank.worker_id, " has no GPU ", index));
      }
      size_t slot = pos - node.worker->gpus.begin();
      if (rank.gpu_share > 0) {
        int32_t taken = 0;
        int64_t memory_taken = 0;
        for (const ShareTaken& t : shares) {
          if (t.node == it->second && t.slot == slot) {
            taken += t.share;
            memory_taken += t.memory;
          }
        }
        if (!ShareFits(node, slot, rank.gpu_share, rank.gpu_memory, taken, memory_taken)) {
          return absl::FailedPreconditionError(absl::StrCat("GPU ", index, " of ", rank.worker_id,
                                                            " has no room for a share of ",
                                                            rank.gpu_share, " thousandths"));
        }
        shares.push_back({it->second, slot, rank.gpu_share, rank.gpu_memory, &rank.team});
        continue;
      }
      if (node.gpu_used[slot] || node.gpu_shared[slot] > 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("GPU ", index, " of ", rank.worker_id, " is already allocated"));
      }
      gpus.emplace_back(it->second, slot);
    }
  }
  std::sort(gpus.begin(), gpus.end());
  if (auto dup = std::adjacent_find(gpus.begin(), gpus.end()); dup != gpus.end()) {
    const Node& node = nodes_[dup->first];
    return absl::FailedPreconditionError(absl::StrCat("GPU ", node.worker->gpus[dup->second].index,
                                                      " of ", node.worker->id,
                                                      " is already allocated"));
  }
  std::vector<size_t> touched;
  for (const auto& [node_index, slot] : gpus) touched.push_back(node_index);
  for (const auto& [node_index, n] : cpus) touched.push_back(node_index);
  for (const ShareTaken& t : shares) touched.push_back(t.node);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (size_t node_index : touched) Contribute(nodes_[node_index], -1);
  for (const auto& [node_index, slot] : gpus) {
    Node& node = nodes_[node_index];
    node.gpu_used[slot] = true;
    --node.free_by_type[node.gpu_type_id[slot]];
  }
  for (const ShareTaken& t : shares) {
    Node& node = nodes_[t.node];
    // The first share of a team here; one of another team (held before the worker asked for
    // one team, or from before a restart) is kept, as placement never adds one.
    if (node.worker->shares_one_team && node.share_team.empty()) node.share_team = *t.team;
    if (node.gpu_shared[t.slot] == 0) --node.free_by_type[node.gpu_type_id[t.slot]];
    node.gpu_shared[t.slot] += t.share;
    node.gpu_share_ranks[t.slot] += 1;
    node.gpu_memory_shared[t.slot] += t.memory;
  }
  for (const auto& [node_index, n] : cpus) nodes_[node_index].cpu_used += n;
  for (size_t node_index : touched) Contribute(nodes_[node_index], +1);
  return absl::OkStatus();
}

void ClusterState::Release(const std::vector<RankPlacement>& ranks) {
  for (const RankPlacement& rank : ranks) {
    auto it = index().find(rank.worker_id);
    if (it == index().end()) continue;
    Node& node = nodes_[it->second];
    Contribute(node, -1);
    if (rank.gpu_indices.empty()) {
      node.cpu_used = std::max(0, node.cpu_used - 1);
    }
    for (int32_t index : rank.gpu_indices) {
      for (size_t slot = 0; slot < node.worker->gpus.size(); ++slot) {
        if (node.worker->gpus[slot].index != index) continue;
        if (rank.gpu_share > 0) {
          if (node.gpu_shared[slot] == 0) continue;
          node.gpu_shared[slot] = std::max(0, node.gpu_shared[slot] - rank.gpu_share);
          node.gpu_share_ranks[slot] = std::max(0, node.gpu_share_ranks[slot] - 1);
          node.gpu_memory_shared[slot] =
              std::max<int64_t>(0, node.gpu_memory_shared[slot] - rank.gpu_memory);
          if (node.gpu_share_ranks[slot] == 0) {
            node.gpu_shared[slot] = 0;
            node.gpu_memory_shared[slot] = 0;
          }
          if (node.gpu_shared[slot] == 0 && !node.gpu_used[slot]) {
            ++node.free_by_type[node.gpu_type_id[slot]];
          }
          if (std::all_of(node.gpu_share_ranks.begin(), node.gpu_share_ranks.end(),
                          [](int32_t r) { return r == 0; })) {
            node.share_team.clear();
          }
        } else if (node.gpu_used[slot]) {
          node.gpu_used[slot] = false;
          if (node.gpu_shared[slot] == 0) ++node.free_by_type[node.gpu_type_id[slot]];
        }
      }
    }
    Contribute(node, +1);
  }
}

bool ClusterState::Usable(const Node& node, const GangRequest& request) const {
  return node.ready() || (request.checked && node.on_probation());
}

int32_t ClusterState::Capacity(const Node& node, const GangRequest& request,
                               int32_t type_id) const {
  if (!Usable(node, request)) return 0;
  if (request.gpus_per_replica == 0) return node.worker->cpu_slots - node.cpu_used;
  return node.free_by_type[type_id] / request.gpus_per_replica;
}

// Packs the gang onto the fewest workers: the largest capacities first, then the smallest
// worker that still holds the remainder (best fit keeps big holes for big jobs).
PlacementDecision ClusterState::PlaceType(const GangRequest& request, int32_t type_id) const {
  if (request.gpu_share > 0) return PlaceShares(request, type_id);
  const bool cpu = request.gpus_per_replica == 0;
  const int32_t units = cpu ? 1 : request.gpus_per_replica;
  const int64_t needed = static_cast<int64_t>(request.replicas) * units;
  // Built only for a reason: most calls in a busy pass fail, and fast.
  auto what = [&] {
    return cpu ? std::string("CPU slots") : absl::StrCat("x ", type_names_[type_id]);
  };
  const int64_t total = TotalFor(request, type_id);
  const int64_t free = FreeFor(request, type_id);
  PlacementDecision decision;
  if (needed > total) {
    decision.kind = PlacementDecision::Kind::kInfeasible;
    decision.reason = absl::StrCat("needs ", needed, " ", what(), ", the cluster has ", total);
    return decision;
  }
  if (needed > free) {
    decision.reason = absl::StrCat("needs ", needed, " ", what(), ", ", free, " free");
    return decision;
  }

  std::vector<std::pair<int32_t, size_t>> candidates;  // (capacity, node)
  int64_t fitting_ranks = 0;
  size_t best_single = nodes_.size();
  int32_t best_single_cap = 0;
  auto consider = [&](size_t i) {
    int32_t cap = Capacity(nodes_[i], request, type_id);
    if (cap <= 0) return;
    fitting_ranks += cap;
    candidates.emplace_back(cap, i);
    if (cap >= request.replicas && (best_single == nodes_.size() || cap < best_single_cap)) {
      best_single = i;
      best_single_cap = cap;
    }
  };
  if (cpu) {
    for (size_t i = 0; i < nodes_.size(); ++i) consider(i);
  } else {
    for (size_t i : nodes_by_type_[type_id]) consider(i);
  }
  if (fitting_ranks < request.replicas) {
    decision.reason = absl::StrCat("needs ", request.replicas, " ranks of ", units, " ", what(),
                                   " on one worker each, ", fitting_ranks, " fit");
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
  for (const auto& [node_index, count] : chosen) {
    const Node& node = nodes_[node_index];
    size_t slot = 0;  // each worker appears once in `chosen`: a forward scan finds free GPUs
    for (int32_t r = 0; r < count; ++r) {
      RankPlacement placement{rank++, node.worker->id, node.worker->address, {}, node.worker->port};
      for (int32_t g = 0; !cpu && g < units; ++g) {
        while (node.gpu_used[slot] || node.gpu_shared[slot] > 0 ||
               node.gpu_type_id[slot] != type_id) {
          ++slot;
        }
        placement.gpu_indices.push_back(node.worker->gpus[slot++].index);
      }
      decision.ranks.push_back(std::move(placement));
    }
  }
  return decision;
}

bool ClusterState::FitsType(const GangRequest& request, int32_t type_id) const {
  if (request.gpu_share > 0)
    return PlaceShares(request, type_id, /*by_policy=*/false).kind ==
           PlacementDecision::Kind::kPlaced;
  const bool cpu = request.gpus_per_replica == 0;
  const int64_t needed =
      static_cast<int64_t>(request.replicas) * (cpu ? 1 : request.gpus_per_replica);
  if (needed > FreeFor(request, type_id)) return false;
  int64_t fitting_ranks = 0;
  if (!cpu) {
    auto count = [&](const Totals& totals) {
      const auto& hist = totals.nodes_by_free[type_id];
      for (size_t k = request.gpus_per_replica; k < hist.size(); ++k) {
        fitting_ranks += int64_t{hist[k]} * (static_cast<int64_t>(k) / request.gpus_per_replica);
      }
    };
    count(totals_);
    if (request.checked) count(probation_totals_);
    return fitting_ranks >= request.replicas;
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    fitting_ranks += std::max(0, Capacity(nodes_[i], request, type_id));
    if (fitting_ranks >= request.replicas) return true;
  }
  return false;
}

bool ClusterState::Fits(const GangRequest& request) const {
  if (request.gpus_per_replica == 0) return FitsType(request, 0);
  if (!request.gpu_type.empty()) {
    auto it = type_ids_.find(request.gpu_type);
    return it != type_ids_.end() && FitsType(request, it->second);
  }
  for (int32_t t = 0; t < static_cast<int32_t>(type_names_.size()); ++t) {
    if (FitsType(request, t)) return true;
  }
  return false;
}

PlacementDecision ClusterState::Place(const GangRequest& request) const {
  if (request.gpus_per_replica == 0) return PlaceType(request, 0);
  if (!request.gpu_type.empty()) {
    auto it = type_ids_.find(request.gpu_type);
    if (it != type_ids_.end()) return PlaceType(request, it->second);
    if (request.gpu_share > 0) {
      PlacementDecision none;
      none.kind = PlacementDecision::Kind::kInfeasible;
      none.reason =
          absl::StrCat("needs ", request.replicas, " x ", ThousandthsText(request.gpu_share),
                       " of a ", request.gpu_type, ", the cluster has no ", request.gpu_type);
      return none;
    }
    PlacementDecision none;
    none.kind = PlacementDecision::Kind::kInfeasible;
    none.reason = absl::StrCat("needs ", int64_t{request.replicas} * request.gpus_per_replica,
                               " x ", request.gpu_type, ", the cluster has 0");
    return none;
  }
  if (request.gpu_share > 0) {
    // Any type: the first type whose devices take the shares now.
    PlacementDecision first;
    first.kind = PlacementDecision::Kind::kInfeasible;
    first.reason =
        absl::StrCat("needs ", request.replicas, " x ", ThousandthsText(request.gpu_share),
                     " of a GPU, the cluster has none");
    for (int32_t id : ShareTypeOrder()) {
      PlacementDecision d = PlaceShares(request, id);
      if (d.kind == PlacementDecision::Kind::kPlaced) return d;
      if (d.kind == PlacementDecision::Kind::kWait ||
          first.kind != PlacementDecision::Kind::kWait) {
        first = std::move(d);
      }
    }
    return first;
  }
  // Any type: every rank still gets the same type. Prefer the type that needs the fewest
  // workers, then the one with the least free capacity, to keep large pools whole.
  const int64_t needed = static_cast<int64_t>(request.replicas) * request.gpus_per_replica;
  PlacementDecision best;
  best.kind = PlacementDecision::Kind::kInfeasible;
  size_t best_workers = 0;
  int64_t best_free = 0;
  int64_t max_free = 0;
  int64_t max_total = 0;
  for (int32_t t = 0; t < static_cast<int32_t>(type_names_.size()); ++t) {
    const int64_t free = FreeFor(request, t);
    max_free = std::max(max_free, free);
    max_total = std::max(max_total, TotalFor(request, t));
    if (free < needed) continue;
    PlacementDecision d = PlaceType(request, t);
    if (d.kind != PlacementDecision::Kind::kPlaced) continue;
    size_t workers = 1;
    for (size_t i = 1; i < d.ranks.size(); ++i) {
      workers += d.ranks[i].worker_id != d.ranks[i - 1].worker_id;
    }
    if (best.kind != PlacementDecision::Kind::kPlaced || workers < best_workers ||
        (workers == best_workers && free < best_free)) {
      best = std::move(d);
      best_workers = workers;
      best_free = free;
    }
  }
  if (best.kind == PlacementDecision::Kind::kPlaced) return best;
  if (needed > max_total) {
    best.reason = absl::StrCat("needs ", needed, " x GPU of one type, the cluster has at most ",
                               max_total, " of one type");
  } else {
    best.kind = PlacementDecision::Kind::kWait;
    best.reason = absl::StrCat("needs ", needed, " x GPU of one type, at most ", max_free,
                               " free of one type");
  }
  return best;
}

std::map<std::string, ClusterState::TypeTotals> ClusterState::GpuTotals() const {
  std::map<std::string, TypeTotals> out;
  for (size_t t = 0; t < type_names_.size(); ++t) {
    if (totals_.total_by_type[t] == 0) continue;
    out[type_names_[t]] = {
        static_cast<int32_t>(totals_.total_by_type[t]),
        static_cast<int32_t>(totals_.total_by_type[t] - totals_.free_by_type[t])};
  }
  return out;
}

ClusterState::TypeTotals ClusterState::CpuTotals() const {
  return {static_cast<int32_t>(totals_.cpu_total),
          static_cast<int32_t>(totals_.cpu_total - totals_.cpu_free)};
}

std::vector<int32_t> ClusterState::AllocatedGpus(const std::string& worker_id) const {
  std::vector<int32_t> out;
  auto it = index().find(worker_id);
  if (it == index().end()) return out;
  const Node& node = nodes_[it->second];
  for (size_t i = 0; i < node.worker->gpus.size(); ++i) {
    if (node.gpu_used[i] || node.gpu_shared[i] > 0) out.push_back(node.worker->gpus[i].index);
  }
  return out;
}

std::vector<ClusterState::GpuUse> ClusterState::GpuUses(const std::string& worker_id) const {
  std::vector<GpuUse> out;
  auto it = index().find(worker_id);
  if (it == index().end()) return out;
  const Node& node = nodes_[it->second];
  for (size_t i = 0; i < node.worker->gpus.size(); ++i) {
    if (!node.gpu_used[i] && node.gpu_shared[i] == 0) continue;
    out.push_back({node.worker->gpus[i].index, node.gpu_used[i], node.gpu_shared[i],
                   node.gpu_share_ranks[i], node.gpu_memory_shared[i]});
  }
  return out;
}

int32_t ClusterState::CpuSlotsUsed(const std::string& worker_id) const {
  auto it = index().find(worker_id);
  return it == index().end() ? 0 : nodes_[it->second].cpu_used;
}

std::string ClusterState::GpuTypeOf(const std::string& worker_id, int32_t gpu_index) const {
  auto it = index().find(worker_id);
  if (it == index().end()) return "";
  for (const Gpu& gpu : nodes_[it->second].worker->gpus) {
    if (gpu.index == gpu_index) return gpu.type;
  }
  return "";
}

std::vector<RankPlacement> ClusterState::FreePart(const std::vector<RankPlacement>& ranks) const {
  std::vector<RankPlacement> out;
  std::unordered_map<size_t, int32_t> cpus_taken;
  for (const RankPlacement& rank : ranks) {
    auto it = index().find(rank.worker_id);
    if (it == index().end()) continue;
    const Node& node = nodes_[it->second];
    RankPlacement part = rank;
    part.gpu_indices.clear();
    if (rank.gpu_indices.empty()) {
      if (node.cpu_used + cpus_taken[it->second] < node.worker->cpu_slots) {
        ++cpus_taken[it->second];
        out.push_back(std::move(part));
      }
      continue;
    }
    for (int32_t index : rank.gpu_indices) {
      for (size_t slot = 0; slot < node.worker->gpus.size(); ++slot) {
        if (node.worker->gpus[slot].index != index) continue;
        const bool free = rank.gpu_share > 0
                              ? ShareFits(node, slot, rank.gpu_share, rank.gpu_memory)
                              : !node.gpu_used[slot] && node.gpu_shared[slot] == 0;
        if (free) part.gpu_indices.push_back(index);
      }
    }
    if (!part.gpu_indices.empty()) out.push_back(std::move(part));
  }
  return out;
}

}  // namespace ringmaster::scheduler
