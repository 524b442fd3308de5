// Making room for a pending job that does not fit: whole-gang preemption and shrinking
// elastic jobs (fair_share_pass.h).
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

std::optional<Pass::TakeScope> Pass::ScopeOf(const Job& job, const Attempt& attempt,
                                             int32_t replicas) {
  auto it = in_.queues->find(job.spec.queue);
  if (it == in_.queues->end()) return std::nullopt;
  const Queue* queue = &it->second;
  // The resource: the one that fit the quota, else the first candidate.
  std::vector<Demand> demands = CandidateDemands(job.spec, cluster_);
  if (demands.empty()) return std::nullopt;
  Demand demand = attempt.quota_ok ? attempt.demand : demands.front();
  demand.amount = int64_t{replicas} * UnitsPerRank(job.spec);
  const bool reclaim = queue->reclaim_within_cohort != ReclaimWithinCohort::kNever &&
                       !queue->cohort.empty() &&
                       result_.ledger.CanAdmit(job.spec.queue, demand, false).within_nominal;
  GangRequest request = RequestOf(job);
  request.replicas = replicas;
  if (request.gpus_per_replica > 0) request.gpu_type = demand.resource;
  return TakeScope{queue, demand, reclaim, queue->within_queue != PreemptWithinQueue::kNever,
                   std::move(request)};
}

bool Pass::TryPreempt(const Job& job, const Attempt& attempt, int32_t replicas) {
  std::optional<TakeScope> scope_of = ScopeOf(job, attempt, replicas);
  if (!scope_of) return false;
  const Queue* queue = scope_of->queue;
  const Demand demand = scope_of->demand;
  const bool reclaim = scope_of->reclaim;
  const bool within = scope_of->within;
  if (!reclaim && !within) return false;

  const bool memo = job.spec.gpu_share == 0;
  if (auto failed = no_victims_.find({job.spec.queue, demand.resource});
      memo && failed != no_victims_.end() && demand.amount >= failed->second) {
    return false;  // later jobs of a queue have no more candidates than earlier ones
  }
  struct Candidate {
    Holding* holding;
    bool borrowing;
    const char* why;
  };
  Holdings();
  std::vector<std::string> scope;  // queues whose jobs may be victims
  if (within) scope.push_back(job.spec.queue);
  if (reclaim) {
    for (const auto& [name, q] : *in_.queues) {
      if (q.cohort == queue->cohort && name != job.spec.queue) scope.push_back(name);
    }
  }
  std::vector<Candidate> candidates;
  for (const std::string& name : scope) {
    auto indices = by_queue_.find(name);
    if (indices == by_queue_.end()) continue;
    auto vq = in_.queues->find(name);
    if (vq == in_.queues->end()) continue;
    for (size_t i : indices->second) {
      Holding& h = holdings_[i];
      const Job& v = *h.job;
      if (h.fresh || h.victim || h.stopping || h.demand.resource != demand.resource) continue;
      if (in_.now_ms - h.started_ms < vq->second.min_runtime_seconds * 1000) continue;
      const bool above = AboveNominal(h);
      const char* why = nullptr;
      if (name == job.spec.queue) {
        const bool lower = v.spec.priority < job.spec.priority;
        const bool newer_equal = v.spec.priority == job.spec.priority && v.seq > job.seq;
        if (lower || (newer_equal &&
                      queue->within_queue == PreemptWithinQueue::kLowerOrNewerEqualPriority)) {
          why = "priority";
        }
      } else if (above && (queue->reclaim_within_cohort == ReclaimWithinCohort::kAny ||
                           v.spec.priority < job.spec.priority)) {
        why = "reclaim";
      }
      if (why != nullptr) candidates.push_back({&h, above, why});
    }
  }
  auto give_up = [&] {
    if (!memo) return false;
    auto [it, added] =
        no_victims_.emplace(std::make_pair(job.spec.queue, demand.resource), demand.amount);
    if (!added) it->second = std::min(it->second, demand.amount);
    return false;
  };
  if (candidates.empty()) return give_up();
  // Borrowers first, then the lowest priority, then the one that loses the least work: the
  // least time since its last checkpoint, or since it started when it has none this attempt
  // (so among jobs without checkpoints, the most recently started).
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.borrowing != b.borrowing) return a.borrowing;
    if (a.holding->job->spec.priority != b.holding->job->spec.priority) {
      return a.holding->job->spec.priority < b.holding->job->spec.priority;
    }
    const int64_t a_saved = WorkSavedAtMs(*a.holding->job, a.holding->started_ms);
    const int64_t b_saved = WorkSavedAtMs(*b.holding->job, b.holding->started_ms);
    if (a_saved != b_saved) return a_saved > b_saved;
    return a.holding->job->seq > b.holding->job->seq;
  });

  // Tried in place on the pass's own ledger and cluster (copies cost more than the search);
  // everything is put back before returning: victims keep their GPUs until they stop.
  QuotaLedger& ledger = result_.ledger;
  ClusterState& cluster = claimed_ ? *claimed_ : cluster_;
  auto fits = [&]() { return FitsNow(job, *scope_of, cluster); };
  auto take = [&](const Holding& h) {
    ledger.Remove(h.job->spec.queue, h.demand);
    cluster.Release(*h.ranks);
  };
  auto give_back = [&](const Holding& h) {
    ledger.Add(h.job->spec.queue, h.demand);
    (void)cluster.Allocate(*h.ranks);
  };
  std::vector<const Candidate*> chosen;
  bool ok = false;
  for (const Candidate& c : candidates) {
    take(*c.holding);
    chosen.push_back(&c);
    if (fits()) {
      ok = true;
      break;
    }
  }
  if (!ok) {
    for (const Candidate* c : chosen) give_back(*c->holding);
    return give_up();
  }
  // The smallest set: give back victims, last chosen first, while the job still fits.
  std::vector<const Candidate*> kept{chosen.back()};  // the one that made it fit is needed
  for (auto it = chosen.rbegin() + 1; it != chosen.rend(); ++it) {
    give_back(*(*it)->holding);
    if (fits()) continue;
    take(*(*it)->holding);
    kept.push_back(*it);
  }
  std::vector<RankPlacement> planned = cluster.Place(scope_of->request).ranks;
  for (const Candidate* c : kept) {
    give_back(*c->holding);
    c->holding->victim = true;
    if (c->holding->group >= 0) groups_[c->holding->group].removed += c->holding->demand.amount;
    result_.preemptions.push_back({c->holding->job->id, job.id, c->why});
  }
  Mask(planned, /*hard=*/true);
  result_.claims[job.id] = std::move(planned);
  std::vector<std::string> names;
  for (const Candidate* c : kept) names.push_back(c->holding->job->id);
  if (options_.explain) {
    result_.waiting[&job] = absl::StrCat("preempting ", absl::StrJoin(names, ","));
  }
  return true;
}

bool Pass::TryShrink(const Job& job, const Attempt& attempt, int32_t replicas) {
  std::optional<TakeScope> scope_of = ScopeOf(job, attempt, replicas);
  if (!scope_of) return false;
  const Queue* queue = scope_of->queue;
  const Demand demand = scope_of->demand;
  const bool reclaim = scope_of->reclaim;
  const bool within = scope_of->within;
  const bool memo = job.spec.gpu_share == 0;
  if (auto failed = no_shrink_.find({job.spec.queue, demand.resource});
      memo && failed != no_shrink_.end() && demand.amount >= failed->second) {
    return false;
  }
  auto give_up = [&] {
    if (!memo) return false;
    auto [it, added] =
        no_shrink_.emplace(std::make_pair(job.spec.queue, demand.resource), demand.amount);
    if (!added) it->second = std::min(it->second, demand.amount);
    return false;
  };
  // Elastic jobs this one may take ranks from, and down to how many: what it could preempt,
  // to min_replicas; a job of its cohort that grew, to its replicas (GPUs it grew into were
  // idle and nobody waited for them; now somebody does).
  struct Shrinkable {
    Holding* holding;
    int32_t from;
    int32_t floor;
    int32_t now;  // ranks kept while searching
    const std::vector<double>* curve;
    std::string why;
  };
  std::vector<Shrinkable> candidates;
  Holdings();
  if (!elastic_holdings_built_) {
    elastic_holdings_built_ = true;
    for (size_t i = 0; i < holdings_.size(); ++i) {
      if (!holdings_[i].fresh && IsElastic(holdings_[i].job->spec)) elastic_holdings_.push_back(i);
    }
  }
  for (size_t i : elastic_holdings_) {
    Holding& h = holdings_[i];
    const Job& v = *h.job;
    // Cheap tests first: a pass asks for every pending job that cannot start.
    if (v.state != JobState::kRunning || h.victim || h.stopping ||
        static_cast<int32_t>(h.ranks->size()) <= v.spec.min_replicas ||
        h.demand.resource != demand.resource) {
      continue;
    }
    auto vq = in_.queues->find(v.spec.queue);
    if (vq == in_.queues->end()) continue;
    if (in_.now_ms - h.started_ms < vq->second.min_runtime_seconds * 1000) continue;
    const bool same = v.spec.queue == job.spec.queue;
    if (!same && (queue->cohort.empty() || vq->second.cohort != queue->cohort)) continue;
    const int32_t from = static_cast<int32_t>(h.ranks->size());
    int32_t floor = from;
    enum class Why { kReclaim, kPriority, kGrew } why_kind = Why::kGrew;
    const bool lower = v.spec.priority < job.spec.priority;
    const bool newer_equal = v.spec.priority == job.spec.priority && v.seq > job.seq;
    if (!same && reclaim && AboveNominal(h) &&
        (queue->reclaim_within_cohort == ReclaimWithinCohort::kAny || lower)) {
      floor = v.spec.min_replicas;
      why_kind = Why::kReclaim;
    } else if (same && within &&
               (lower || (newer_equal &&
                          queue->within_queue == PreemptWithinQueue::kLowerOrNewerEqualPriority))) {
      floor = v.spec.min_replicas;
      why_kind = Why::kPriority;
    } else if (from > v.spec.replicas) {
      floor = v.spec.replicas;
    }
    // The resize history last: most jobs are ruled out above, and it is a lookup by id.
    if (floor >= from ||
        !MayResize(in_.elastic, v.id, in_.now_ms, options_.elastic.max_resizes_per_hour)) {
      continue;
    }
    std::string why =
        why_kind == Why::kReclaim
            ? absl::StrCat("queue ", job.spec.queue, " reclaims its nominal quota")
        : why_kind == Why::kPriority
            ? absl::StrCat("priority ", job.spec.priority, " in queue ", job.spec.queue)
            : absl::StrCat(job.id, " of queue ", job.spec.queue, " waits for GPUs it grew into");
    const std::vector<double>* curve = nullptr;
    if (in_.elastic != nullptr) {
      if (auto c = in_.elastic->throughput.find(v.id); c != in_.elastic->throughput.end()) {
        curve = &c->second;
      }
    }
    candidates.push_back({&h, from, floor, from, curve, std::move(why)});
  }
  if (candidates.empty()) return give_up();

  // Rank by rank, the one that adds the least to its job goes first, until the job fits. Tried
  // in place, as TryPreempt does, and put back before returning. A job with sizes_divide gives
  // a step at a time, down to its next smaller size that divides it (judged by the mean gain of
  // the step's ranks), so that every size it is left at is one it may run at.
  QuotaLedger& ledger = result_.ledger;
  ClusterState& cluster = claimed_ ? *claimed_ : cluster_;
  auto fits = [&]() { return FitsNow(job, *scope_of, cluster); };
  struct Taken {
    Shrinkable* from;
    std::vector<const RankPlacement*> ranks;  // one, or a step's
  };
  auto take = [&](const Taken& t) {
    for (const RankPlacement* rank : t.ranks) {
      ledger.Remove(t.from->holding->job->spec.queue, {demand.resource, Units({*rank})});
      cluster.Release({*rank});
    }
  };
  auto give_back = [&](const Taken& t) {
    for (const RankPlacement* rank : t.ranks) {
      ledger.Add(t.from->holding->job->spec.queue, {demand.resource, Units({*rank})});
      (void)cluster.Allocate({*rank});
    }
  };
  std::vector<Taken> taken;
  bool ok = false;
  while (!ok) {
    Shrinkable* best = nullptr;
    int32_t best_to = 0;
    double least = 0;
    for (Shrinkable& c : candidates) {
      if (c.now <= c.floor) continue;
      const int32_t to = PreviousElasticSize(c.holding->job->spec, c.now, c.floor);
      if (to == 0) continue;
      const double loss = StepGain(c.curve, to, c.now);
      if (best == nullptr || loss < least ||
          (loss == least && c.holding->job->seq > best->holding->job->seq)) {
        best = &c;
        best_to = to;
        least = loss;
      }
    }
    if (best == nullptr) break;
    Taken t{best, {}};
    while (best->now > best_to) t.ranks.push_back(&(*best->holding->ranks)[--best->now]);
    taken.push_back(std::move(t));
    take(taken.back());
    ok = fits();
  }
  if (!ok) {
    for (const Taken& t : taken) give_back(t);
    return give_up();
  }
  // The fewest: give back ranks, last taken first, while the job still fits. A step of a job
  // with sizes_divide goes back only after every later step of that job did: it is then left at
  // one of the sizes it stepped through.
  std::vector<bool> needed(taken.size(), true);
  for (size_t i = taken.size() - 1; i-- > 0;) {
    if (taken[i].from->holding->job->spec.sizes_divide > 0) {
      bool later_kept = false;
      for (size_t j = i + 1; j < taken.size(); ++j) {
        later_kept |= needed[j] && taken[j].from == taken[i].from;
      }
      if (later_kept) continue;
    }
    give_back(taken[i]);
    if (fits()) {
      needed[i] = false;
      continue;
    }
    take(taken[i]);
  }
  std::vector<RankPlacement> planned = cluster.Place(scope_of->request).ranks;
  std::map<Shrinkable*, std::set<const RankPlacement*>> freed;
  for (size_t i = 0; i < taken.size(); ++i) {
    if (needed[i]) {
      give_back(taken[i]);
      freed[taken[i].from].insert(taken[i].ranks.begin(), taken[i].ranks.end());
    }
  }
  std::vector<std::string> names;
  for (const auto& [c, ranks] : freed) {
    Holding& h = *c->holding;
    PassResult::Resize resize;
    resize.job_id = h.job->id;
    resize.from = c->from;
    for (const RankPlacement& r : *h.ranks) {
      if (ranks.count(&r) > 0) continue;
      resize.ranks.push_back(r);
      resize.ranks.back().rank = static_cast<int32_t>(resize.ranks.size()) - 1;
    }
    resize.to = static_cast<int32_t>(resize.ranks.size());
    resize.by_job_id = job.id;
    resize.reason = ShrinkReason(resize.from, resize.to, c->why);
    h.victim = true;
    if (h.group >= 0) {
      groups_[h.group].removed += h.demand.amount * (resize.from - resize.to) / resize.from;
    }
    names.push_back(h.job->id);
    result_.resizes.push_back(std::move(resize));
  }
  Mask(planned, /*hard=*/true);
  result_.claims[job.id] = std::move(planned);
  if (options_.explain) {
    result_.waiting[&job] = absl::StrCat("shrinking ", absl::StrJoin(names, ","));
  }
  return true;
}

}  // namespace ringmaster::scheduler::fair_share_internal
