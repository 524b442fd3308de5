// Reservations for large gangs that fit their quota but not the cluster: where and when each
// would start as running jobs end (fair_share_pass.h).
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "scheduler/core/fair_share_pass.h"

namespace ringmaster::scheduler::fair_share_internal {

void Pass::SortEnds(size_t n) {
  if (n <= ends_sorted_ || ends_sorted_ == ends_.size()) return;
  // Grow the sorted part geometrically: partial sorts of the rest, a full sort once it is most.
  const size_t to = std::min(ends_.size(), std::max(n, 2 * ends_sorted_ + 16));
  if (2 * to >= ends_.size()) {
    std::sort(ends_.begin() + ends_sorted_, ends_.end());
    ends_sorted_ = ends_.size();
    return;
  }
  std::partial_sort(ends_.begin() + ends_sorted_, ends_.begin() + to, ends_.end());
  ends_sorted_ = to;
}

void Pass::Reserve(const Job& job, const Demand& demand) {
  // Free GPUs in the order running jobs must end (by max_runtime_seconds) until the gang fits.
  // Which jobs end within the window is found once a pass, not once per pending gang: a full
  // cluster with thousands of them spent most of each pass here. Jobs only start in a pass.
  GangRequest request = RequestOf(job);
  if (request.gpus_per_replica > 0) request.gpu_type = demand.resource;
  const auto shape = std::make_tuple(demand.resource, request.replicas, RankSize(request),
                                     request.checked, request.team);
  if (no_reservation_.count(shape) > 0) return;
  for (const size_t placed = in_.placed.size(); ends_scanned_ < placed + fresh_.size();
       ++ends_scanned_) {
    const bool fresh = ends_scanned_ >= placed;
    const Job& running = fresh ? *fresh_[ends_scanned_ - placed].job : *in_.placed[ends_scanned_];
    if (running.spec.max_runtime_seconds <= 0) continue;
    int64_t started = running.started_at_ms > 0 ? running.started_at_ms : in_.now_ms;
    if (fresh) started = fresh_[ends_scanned_ - placed].started_ms;
    const int64_t end = started + running.spec.max_runtime_seconds * 1000;
    if (end - in_.now_ms > options_.reservation_window_ms) continue;
    // A job started since the ends were sorted: into the sorted part if it ends before its
    // last, so that part stays the earliest ends.
    const End e{end, ends_scanned_,
                fresh ? fresh_[ends_scanned_ - placed].ranks : &running.placement};
    if (ends_sorted_ > 0 && e < ends_[ends_sorted_ - 1]) {
      ends_.insert(std::upper_bound(ends_.begin(), ends_.begin() + ends_sorted_, e), e);
      ++ends_sorted_;
    } else {
      ends_.push_back(e);
    }
  }
  // Nothing ends within the window: no reservation, and no copy of the cluster (a full
  // cluster with thousands of pending gangs would copy it once per gang per pass).
  if (ends_.empty()) return;
  const auto& ends = ends_;
  ClusterState future = Hard();
  std::vector<RankPlacement> reserved;
  for (const Reservation& r : result_.reservations) {
    reserved.insert(reserved.end(), r.ranks.begin(), r.ranks.end());
  }
  absl::flat_hash_set<std::string_view> reserved_workers;
  for (const RankPlacement& r : reserved) reserved_workers.insert(r.worker_id);
  (void)future.Allocate(future.FreePart(reserved));
  for (size_t i = 0; i < ends.size();) {
    SortEnds(i + 1);
    const int64_t t = std::max(ends[i].end_ms, in_.now_ms);
    bool frees_reserved = false;
    for (; i < ends.size() && std::max(ends[i].end_ms, in_.now_ms) == t; SortEnds(++i + 1)) {
      const std::vector<RankPlacement>& ranks = *ends[i].ranks;
      future.Release(ranks);
      for (size_t r = 0; !reserved_workers.empty() && !frees_reserved && r < ranks.size(); ++r) {
        frees_reserved = reserved_workers.contains(ranks[r].worker_id);
      }
    }
    // Ended jobs may free reserved GPUs: take them again (only a job on a reserved worker can;
    // the others leave the reserved GPUs taken). Fits first: Place builds a placement or a
    // reason, and most steps of the search fail.
    if (frees_reserved) (void)future.Allocate(future.FreePart(reserved));
    if (!future.Fits(request)) continue;
    PlacementDecision p = future.Place(request);
    if (p.kind != PlacementDecision::Kind::kPlaced) continue;
    if (options_.explain) {
      std::set<std::string> workers;
      for (const RankPlacement& r : p.ranks) workers.insert(r.worker_id);
      result_.waiting[&job] = absl::StrCat(
          "reserved: starts by ",
          absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(t), absl::UTCTimeZone()),
          " on ", absl::StrJoin(workers, ","));
    }
    Mask(p.ranks, /*hard=*/false);
    result_.reservations.push_back({job.id, t, std::move(p.ranks)});
    return;
  }
  no_reservation_.insert(shape);
}

}  // namespace ringmaster::scheduler::fair_share_internal
