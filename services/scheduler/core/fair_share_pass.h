// The state of one fair-share pass (SchedulePass, fair_share.h), shared by the files that
// implement it by topic: fair_share.cc (the pass's order and starts), fair_share_preempt.cc
// (preemption and shrinking), fair_share_reserve.cc (reservations) and fair_share_grow.cc
// (elastic growth). Internal to the scheduler's core; no I/O. One Pass per call, not shared
// between threads.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_FAIR_SHARE_PASS_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_FAIR_SHARE_PASS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "scheduler/core/fair_share.h"

namespace ringmaster::scheduler::fair_share_internal {

// GPUs (in the ledger's thousandths), or CPU slots, in `ranks`.
inline int64_t Units(const std::vector<RankPlacement>& ranks) {
  int64_t n = 0;
  for (const RankPlacement& r : ranks) {
    n += r.gpu_indices.empty() ? 1
         : r.gpu_share > 0     ? r.gpu_share
                           : int64_t{kWholeGpuShare} * static_cast<int64_t>(r.gpu_indices.size());
  }
  return n;
}

// The size of one rank of a gang for the pass's memos of shapes: its GPUs, or for a share of
// one GPU a negative code of the share (at most 1000, 10 bits) and its memory in bytes (at most
// kMaxGpuMemory, 2^40), so that no two shapes meet.
inline int64_t RankSize(const GangRequest& r) {
  if (r.gpu_share == 0) return r.gpus_per_replica;
  return -((int64_t{r.gpu_share} << 41) | r.gpu_memory);
}

// Up to when a running job's work is safe: its last checkpoint, or the start of its attempt
// when it has none since (a checkpoint older than the start is the one the attempt resumed
// from). Preempting it now loses the work after this.
inline int64_t WorkSavedAtMs(const Job& job, int64_t started_ms) {
  return std::max(started_ms, job.last_checkpoint_time_ms);
}

// The mutable state of one pass: its own copies of the cluster and the ledger, which fill up as
// it decides, and memos of what cannot succeed again within it (allocations only grow in a
// pass).
class Pass {
 public:
  Pass(const PassInput& input, const ClusterState& cluster, const PolicyOptions& options);

  PassResult Run();

 private:
  struct Holding {
    const Job* job;
    const std::vector<RankPlacement>* ranks;
    Demand demand;
    int64_t started_ms;
    bool fresh;  // started by this pass: not a victim
    bool stopping = false;
    bool victim = false;  // preempted or resized by this pass
    // Its queue's use of the resource up to and including this job, oldest first, and the
    // (queue, resource) group that sum is kept in.
    int64_t cum = 0;
    int group = -1;
  };
  struct Group {
    int64_t nominal = 0;
    int64_t removed = 0;  // chosen as victims this pass
  };
  struct Attempt {
    bool placed = false;
    bool backfilled = false;
    bool quota_ok = false;  // some resource fit the quota
    Demand demand;          // the one placed, or the first that fit the quota
    QuotaLedger::Check check;
    std::vector<RankPlacement> ranks;
    std::string reason;
  };

  // Whether `job` starts now at `replicas` (an elastic job's may be below its spec's): its quota,
  // then room outside claims and reservations, or before a reservation (backfill).
  Attempt TryStart(const Job& job, int32_t replicas);
  // What `job` at `replicas` may take GPUs from, for TryPreempt and TryShrink: its queue, the
  // demand, whether it reclaims within its cohort and may preempt within its queue.
  struct TakeScope {
    const Queue* queue;
    Demand demand;
    bool reclaim;
    bool within;
    GangRequest request;  // the job at `replicas`, on the demand's GPU type
  };
  // Whether the job of `scope` fits now, quota and GPUs, on the pass's ledger and `cluster`.
  // Fits, not Place: the searches ask after each victim or rank they take, and choosing GPUs
  // each time was a sixth of a replay at x12 (Fits agrees with Place, placement_test).
  bool FitsNow(const Job& job, const TakeScope& scope, ClusterState& cluster) {
    return result_.ledger.CanAdmit(job.spec.queue, scope.demand, false).fit != Fit::kNo &&
           cluster.Fits(scope.request);
  }
  // fair_share_preempt.cc: the smallest set of victims that makes `job` fit, or of ranks of
  // elastic jobs to shrink.
  std::optional<TakeScope> ScopeOf(const Job& job, const Attempt& attempt, int32_t replicas);
  bool TryPreempt(const Job& job, const Attempt& attempt, int32_t replicas);
  // Elastic jobs (core/elastic.h). TryShrink frees GPUs for `job` by shrinking elastic jobs
  // that it could preempt (down to their min_replicas) or that grew (down to their replicas),
  // and only if that alone makes it fit; Grow gives GPUs idle for the delay to running elastic
  // jobs: back to their replicas, and beyond when no pending job waits for room.
  bool TryShrink(const Job& job, const Attempt& attempt, int32_t replicas);
  void Grow();  // fair_share_grow.cc
  // fair_share_reserve.cc: where and when `job` starts once running jobs end by their runtime
  // limits, if within the window; those GPUs are masked for the rest of the pass.
  void Reserve(const Job& job, const Demand& demand);
  bool NeedsBorrowing(const Job& job) const;
  void Allocate(const std::vector<RankPlacement>& ranks);
  // Takes GPUs away from everyone but their owner: a claim (hard) or a reservation (soft: a
  // job that ends before it may backfill).
  void Mask(const std::vector<RankPlacement>& ranks, bool hard);
  int64_t EarliestReservation() const;
  // A queue's placed jobs, oldest first, fill its nominal quota; the ones that reach above it
  // are its borrowers. A job that started within nominal stays within while it runs, so a job
  // it reclaimed from can never reclaim it back. Victims already chosen are counted as gone
  // from before it (which can only make fewer jobs borrowers).
  bool AboveNominal(const Holding& h) const {
    return h.group >= 0 && h.cum - groups_[h.group].removed > groups_[h.group].nominal;
  }

  const PassInput& in_;
  const PolicyOptions& options_;
  ClusterState cluster_;  // what is allocated
  // The same with claimed GPUs taken too, and then reserved ones; made when first needed.
  std::optional<ClusterState> claimed_;
  std::optional<ClusterState> masked_;
  const ClusterState& Hard() const { return claimed_ ? *claimed_ : cluster_; }
  const ClusterState& Masked() const { return masked_ ? *masked_ : Hard(); }
  std::vector<Holding> holdings_;
  bool holdings_built_ = false;
  // Placed jobs with what they hold; built when preemption or a reservation first needs it.
  const std::vector<Holding>& Holdings();
  std::deque<std::vector<RankPlacement>> started_ranks_;  // stable addresses for holdings_
  std::vector<Holding> fresh_;                            // started by this pass
  std::vector<Group> groups_;
  absl::flat_hash_map<std::string_view, std::vector<size_t>> by_queue_;  // holdings of each queue
  // Gang shapes that did not fit this pass; allocations only grow within a pass.
  // (resource, replicas, units per rank, may backfill, checked, a share's team) -> why it did
  // not fit.
  std::map<std::tuple<std::string, int32_t, int64_t, bool, bool, std::string>, std::string>
      no_room_;
  // (queue, resource) -> the smallest demand for which no victims were found. Whole-GPU jobs
  // only: a share's room depends on more than its amount (the device's memory, its mix).
  std::map<std::pair<std::string, std::string>, int64_t> no_victims_;
  // Gang shapes that found no reservation this pass: what is free once every running job in the
  // window has ended only shrinks within a pass (starts, claims and reservations take from it).
  // (resource, replicas, units per rank, checked, a share's team).
  std::set<std::tuple<std::string, int32_t, int64_t, bool, std::string>> no_reservation_;
  // Placed jobs, then jobs started by this pass, that must end within the reservation window;
  // the first ends_scanned_ of them are counted in. Read from the input, not from holdings_, so
  // that a pass that only reserves builds no holdings. Sorted lazily: the first ends_sorted_
  // are the earliest, in order (sorting a thousand running jobs each pass was a tenth of the
  // replay). Jobs that end at the same time are freed together, so ties need no order of
  // their own beyond being deterministic.
  struct End {
    int64_t end_ms;
    size_t order;  // in placed-then-started order
    const std::vector<RankPlacement>* ranks;
    bool operator<(const End& o) const {
      return end_ms != o.end_ms ? end_ms < o.end_ms : order < o.order;
    }
  };
  std::vector<End> ends_;
  size_t ends_scanned_ = 0;
  size_t ends_sorted_ = 0;
  // Makes ends_[0, n) the n earliest ends, in order.
  void SortEnds(size_t n);
  bool any_elastic_ = false;  // some placed job is elastic
  // (queue, resource) -> the smallest demand that shrinking could not make room for, as
  // no_victims_ for preemption.
  std::map<std::pair<std::string, std::string>, int64_t> no_shrink_;
  // Indices in holdings_ of the elastic jobs placed before the pass (the only ones that shrink);
  // built when TryShrink first needs them.
  std::vector<size_t> elastic_holdings_;
  bool elastic_holdings_built_ = false;
  // Resources that a pending job fit the quota for but found no room on: jobs grow on them only
  // back to their replicas; not at all when the job is within its queue's nominal (true).
  std::map<std::string, bool> wants_room_;
  PassResult result_;
};

}  // namespace ringmaster::scheduler::fair_share_internal

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_FAIR_SHARE_PASS_H_
