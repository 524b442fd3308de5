// Elastic growth: GPUs idle for the delay go to running elastic jobs (fair_share_pass.h). The
// delay is each job's queue's (IdleDelayMs): a job grows into the GPUs idle for its own delay,
// less those granted to other jobs in this pass.
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
#include "scheduler/core/fair_share_pass.h"

namespace ringmaster::scheduler::fair_share_internal {

void Pass::Grow() {
  const ElasticInput& elastic = *in_.elastic;
  const ElasticOptions& o = options_.elastic;
  absl::flat_hash_set<std::string_view> touched;  // preempted or resized by this pass
  for (const auto& p : result_.preemptions) touched.insert(p.job_id);
  for (const auto& r : result_.resizes) touched.insert(r.job_id);
  for (const auto& [resource, default_settled] : elastic.settled_idle) {
    int64_t settled_most = default_settled;
    if (auto d = elastic.settled_idle_by_delay.find(resource);
        d != elastic.settled_idle_by_delay.end()) {
      for (const auto& [delay, n] : d->second) settled_most = std::max(settled_most, n);
    }
    if (settled_most <= 0) continue;
    // GPUs idle for the delay are ones no pending job could start on (each was tried this
    // pass; reserved ones are not counted). While one waits for more room, jobs only grow back
    // to the replicas they asked for; beyond that (borrowing for speed) only when nobody waits.
    // A job within its queue's nominal that waits for room (a gang waiting for whole workers)
    // stops all growth: the GPUs that free up are kept for it.
    auto wanted = wants_room_.find(resource);
    if (wanted != wants_room_.end() && wanted->second) continue;
    const bool waited_for = wanted != wants_room_.end();
    const auto totals = Masked().GpuTotals();
    auto t = totals.find(resource);
    if (t == totals.end()) continue;
    const int64_t free = t->second.total - t->second.allocated;
    if (std::min(settled_most, free) <= 0) continue;
    int64_t granted = 0;  // GPUs of this resource given to jobs in this pass
    struct Growable {
      const Job* job;
      int32_t from;
      int32_t cap;  // the most it may grow to now
      int32_t now;
      const std::vector<double>* curve;
      int64_t saved_ms;  // its work is safe up to here
      const Queue* queue;
      int64_t delay_ms;  // its queue's idle delay
      int64_t settled;   // GPUs idle for that delay
      int64_t budget;    // those, at most the free ones
      bool done = false;
      std::vector<RankPlacement> added;
    };
    std::vector<Growable> candidates;
    for (const Job* job : in_.placed) {
      const JobSpec& spec = job->spec;
      // Cheap tests first: this runs over every placed job in each pass with idle GPUs.
      // Jobs of GPU shares do not grow: the budget counts whole idle GPUs.
      if (!IsElastic(spec) || spec.gpus_per_replica <= 0 || spec.gpu_share > 0 ||
          job->state != JobState::kRunning) {
        continue;
      }
      const int32_t n = RunningReplicas(*job);
      const int32_t cap = waited_for ? spec.replicas : spec.max_replicas;
      // The next size it may run at (n + 1, or with sizes_divide the next divisor).
      const int32_t next = NextElasticSize(spec, n, cap);
      if (next == 0) continue;
      if (spec.gpu_type.empty() ? HeldDemand(*job, cluster_).resource != resource
                                : spec.gpu_type != resource) {
        continue;
      }
      const std::vector<double>* curve = nullptr;
      if (auto c = elastic.throughput.find(job->id); c != elastic.throughput.end()) {
        curve = &c->second;
      }
      // Worth a restart: the time one more rank saves over what is left of the job (its runtime
      // limit, else as long again as it has run) is at least twice what the restart costs.
      const int64_t started = job->started_at_ms > 0 ? job->started_at_ms : in_.now_ms;
      const int64_t left = spec.max_runtime_seconds > 0
                               ? started + spec.max_runtime_seconds * 1000 - in_.now_ms
                               : in_.now_ms - started;
      const int64_t saved = WorkSavedAtMs(*job, started);
      const double cost =
          static_cast<double>(o.restart_cost_ms + (o.saves_on_stop ? 0 : in_.now_ms - saved));
      const double before = Throughput(curve, n), after = Throughput(curve, next);
      if (!(after > before) || left * (1 - before / after) < 2 * cost) continue;
      if (in_.stopping.count(job->id) > 0 || touched.count(job->id) > 0 ||
          !MayResize(in_.elastic, job->id, in_.now_ms, o.max_resizes_per_hour)) {
        continue;
      }
      const Queue* q = nullptr;
      if (auto it = in_.queues->find(spec.queue); it != in_.queues->end()) q = &it->second;
      const int64_t delay = IdleDelayMs(q, o);
      const int64_t settled = SettledIdle(elastic, resource, delay, o.idle_delay_ms);
      if (std::min(free, settled) <= 0) continue;
      candidates.push_back(
          {job, n, cap, n, curve, saved, q, delay, settled, std::min(free, settled), false, {}});
    }
    // Rank by rank, to the job whose next rank adds the most (then the one with the least work
    // since its checkpoint, which a restart loses). A job with sizes_divide grows a step at a
    // time, to its next size that divides it, judged by the mean gain of the step's ranks.
    while (true) {
      Growable* best = nullptr;
      int32_t best_step = 0;
      double most = 0;
      for (Growable& c : candidates) {
        if (c.done || c.now >= c.cap) continue;
        const int32_t step = NextElasticSize(c.job->spec, c.now, c.cap) - c.now;
        if (step <= 0 || granted + int64_t{step} * c.job->spec.gpus_per_replica > c.budget) {
          continue;
        }
        const double gain = StepGain(c.curve, c.now, c.now + step);
        if (gain <= 0) continue;
        if (best == nullptr || gain > most ||
            (gain == most && (c.saved_ms > best->saved_ms ||
                              (c.saved_ms == best->saved_ms && c.job->seq < best->job->seq)))) {
          best = &c;
          best_step = step;
          most = gain;
        }
      }
      if (best == nullptr) break;
      const JobSpec& spec = best->job->spec;
      const Demand rank_demand{resource, UnitsPerRank(spec) * best_step};
      GangRequest request = RequestOf(*best->job);
      request.replicas = best_step;
      request.gpu_type = resource;
      // Fits first: Place builds a reason when the rank does not fit, and most jobs' ranks
      // stop fitting before the budget runs out.
      PlacementDecision p;
      if (result_.ledger.CanAdmit(spec.queue, rank_demand, false).fit != Fit::kNo &&
          Masked().Fits(request)) {
        p = Masked().Place(request);
      }
      if (p.kind != PlacementDecision::Kind::kPlaced) {
        best->done = true;
        continue;
      }
      Allocate(p.ranks);
      result_.ledger.Add(spec.queue, rank_demand);
      for (RankPlacement& rank : p.ranks) {
        rank.rank = best->now++;
        best->added.push_back(std::move(rank));
      }
      granted += int64_t{best_step} * spec.gpus_per_replica;
    }
    for (Growable& c : candidates) {
      if (c.added.empty()) continue;
      PassResult::Resize resize;
      resize.job_id = c.job->id;
      resize.from = c.from;
      resize.to = c.now;
      resize.ranks = c.job->placement;
      resize.ranks.insert(resize.ranks.end(), c.added.begin(), c.added.end());
      resize.reason = GrowReason(c.from, c.now, c.settled, resource, c.queue ? c.queue->cohort : "",
                                 c.delay_ms);
      result_.resizes.push_back(std::move(resize));
    }
  }
}

}  // namespace ringmaster::scheduler::fair_share_internal
