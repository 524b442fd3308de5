// One fair-share pass: the order of pending jobs and their starts. Preemption, reservations and
// elastic growth are in fair_share_preempt.cc, fair_share_reserve.cc and fair_share_grow.cc; the
// quota accounting in quota_ledger.cc.
#include "scheduler/core/fair_share.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <queue>
#include <set>
#include <string_view>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/core/fair_share_pass.h"
#include "scheduler/core/health_check.h"

namespace ringmaster::scheduler {
namespace fair_share_internal {

Pass::Pass(const PassInput& input, const ClusterState& cluster, const PolicyOptions& options)
    : in_(input), options_(options), cluster_(cluster) {
  result_.ledger = QuotaLedger(*input.queues);
  // Sum per (queue, resource) first: thousands of placed jobs, a handful of sums.
  absl::flat_hash_map<std::pair<std::string_view, std::string_view>, int64_t> sums;
  std::deque<std::string> types;  // resolved types of jobs that named none
  for (const Job* job : input.placed) {
    const int64_t amount = HeldAmount(*job);
    any_elastic_ |= IsElastic(job->spec);
    std::string_view resource =
        job->spec.gpus_per_replica == 0 ? std::string_view(kCpuResource) : job->spec.gpu_type;
    if (resource.empty()) resource = types.emplace_back(HeldDemand(*job, cluster).resource);
    sums[{job->spec.queue, resource}] += amount;
  }
  for (const auto& [key, amount] : sums) {
    result_.ledger.Add(std::string(key.first), {std::string(key.second), amount});
  }
  for (const auto& [id, ranks] : input.claims) Mask(ranks, /*hard=*/true);
}

void Pass::Allocate(const std::vector<RankPlacement>& ranks) {
  (void)cluster_.Allocate(ranks);
  if (claimed_) (void)claimed_->Allocate(claimed_->FreePart(ranks));
  if (masked_) (void)masked_->Allocate(masked_->FreePart(ranks));
}

void Pass::Mask(const std::vector<RankPlacement>& ranks, bool hard) {
  if (hard) {
    if (!claimed_) claimed_ = cluster_;
    (void)claimed_->Allocate(claimed_->FreePart(ranks));
  } else if (!masked_) {
    masked_ = Hard();
  }
  if (masked_) (void)masked_->Allocate(masked_->FreePart(ranks));
}

int64_t Pass::EarliestReservation() const {
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (const Reservation& r : result_.reservations) earliest = std::min(earliest, r.start_ms);
  return earliest;
}

const std::vector<Pass::Holding>& Pass::Holdings() {
  if (holdings_built_) return holdings_;
  holdings_built_ = true;
  for (const Job* job : in_.placed) {
    holdings_.push_back({job, &job->placement, HeldDemand(*job, cluster_),
                         job->started_at_ms > 0 ? job->started_at_ms : in_.now_ms, false});
    holdings_.back().stopping = in_.stopping.count(job->id) > 0;
  }
  // Keyed by views into the jobs and holdings: no string copied per placed job. The groups'
  // order only numbers them.
  absl::flat_hash_map<std::pair<std::string_view, std::string_view>, std::vector<size_t>> groups;
  for (size_t i = 0; i < holdings_.size(); ++i) {
    const Holding& h = holdings_[i];
    groups[{h.job->spec.queue, h.demand.resource}].push_back(i);
    by_queue_[h.job->spec.queue].push_back(i);
  }
  for (auto& [key, list] : groups) {
    auto q = in_.queues->find(std::string(key.first));
    if (q == in_.queues->end() || q->second.unlimited()) continue;
    auto quota = q->second.quotas.find(std::string(key.second));
    groups_.push_back(
        {quota == q->second.quotas.end() ? 0 : quota->second.nominal * QuotaScale(key.second), 0});
    std::sort(list.begin(), list.end(), [this](size_t a, size_t b) {
      const Holding& x = holdings_[a];
      const Holding& y = holdings_[b];
      return x.started_ms != y.started_ms ? x.started_ms < y.started_ms : x.job->seq < y.job->seq;
    });
    int64_t sum = 0;
    for (size_t i : list) {
      sum += holdings_[i].demand.amount;
      holdings_[i].cum = sum;
      holdings_[i].group = static_cast<int>(groups_.size()) - 1;
    }
  }
  holdings_.insert(holdings_.end(), fresh_.begin(), fresh_.end());
  return holdings_;
}

bool Pass::NeedsBorrowing(const Job& job) const {
  // One resource (most jobs name their GPU type): no list of candidates made.
  if (job.spec.gpus_per_replica == 0 || !job.spec.gpu_type.empty()) {
    const Demand d{job.spec.gpus_per_replica == 0 ? kCpuResource : job.spec.gpu_type,
                   int64_t{job.spec.replicas} * UnitsPerRank(job.spec)};
    return result_.ledger.CanAdmit(job.spec.queue, d, false).fit != Fit::kWithinNominal;
  }
  for (const Demand& d : CandidateDemands(job.spec, cluster_)) {
    if (result_.ledger.CanAdmit(job.spec.queue, d, false).fit == Fit::kWithinNominal) {
      return false;
    }
  }
  return true;
}

Pass::Attempt Pass::TryStart(const Job& job, int32_t replicas) {
  Attempt a;
  std::vector<Demand> demands = CandidateDemands(job.spec, cluster_);
  const int64_t amount = int64_t{replicas} * UnitsPerRank(job.spec);
  for (Demand& d : demands) d.amount = amount;
  if (demands.empty()) {
    a.reason = absl::StrCat("unschedulable: needs ", DescribeUnits("GPU", amount),
                            ", the cluster has none");
  }
  const int64_t runtime_ms = job.spec.max_runtime_seconds * 1000;
  const bool may_backfill = runtime_ms > 0 && in_.now_ms + runtime_ms <= EarliestReservation();
  for (const Demand& d : demands) {
    QuotaLedger::Check check = result_.ledger.CanAdmit(job.spec.queue, d);
    if (check.fit == Fit::kNo) {
      if (!a.quota_ok && a.check.reason.empty()) a.check = check;
      if (!a.quota_ok) a.reason = check.reason;
      continue;
    }
    if (!a.quota_ok) {
      a.quota_ok = true;
      a.demand = d;
      a.check = check;
    }
    GangRequest request = RequestOf(job);
    request.replicas = replicas;
    if (request.gpus_per_replica > 0) request.gpu_type = d.resource;
    auto key = std::make_tuple(d.resource, request.replicas, RankSize(request), may_backfill,
                               request.checked, request.team);
    if (auto memo = no_room_.find(key); memo != no_room_.end()) {
      a.reason = memo->second;
      continue;
    }
    PlacementDecision p = Masked().Place(request);
    bool backfilled = false;
    if (p.kind != PlacementDecision::Kind::kPlaced && may_backfill &&
        !result_.reservations.empty()) {
      PlacementDecision q = Hard().Place(request);
      if (q.kind == PlacementDecision::Kind::kPlaced) {
        p = std::move(q);
        backfilled = true;
      }
    }
    if (p.kind == PlacementDecision::Kind::kPlaced) {
      a.placed = true;
      a.backfilled = backfilled;
      a.demand = d;
      a.check = check;
      a.ranks = std::move(p.ranks);
      return a;
    }
    a.reason =
        p.kind == PlacementDecision::Kind::kInfeasible
            ? absl::StrCat("unschedulable: ", p.reason)
            : (result_.reservations.empty() ? p.reason
                                            : absl::StrCat(p.reason, " outside reservations"));
    no_room_[key] = a.reason;
  }
  return a;
}

PassResult Pass::Run() {
  if (options_.explain) result_.waiting.reserve(in_.pending.size());
  // Pending jobs per queue in priority, then submit order. Queues by number, in name order:
  // the loop below takes a job per step, and looking queues up by name each step cost more than
  // deciding about most jobs.
  struct QueueJobs {
    const std::string* name;
    std::vector<const Job*> jobs;
    size_t head = 0;
  };
  std::vector<QueueJobs> by_queue;
  {
    absl::flat_hash_map<std::string_view, size_t> index;
    for (const Job* job : in_.pending) {
      auto [it, added] = index.try_emplace(job->spec.queue, by_queue.size());
      if (added) by_queue.push_back({&job->spec.queue, {}});
      by_queue[it->second].jobs.push_back(job);
    }
    std::sort(by_queue.begin(), by_queue.end(),
              [](const QueueJobs& a, const QueueJobs& b) { return *a.name < *b.name; });
  }
  const bool any_claims = !in_.claims.empty();
  // Jobs with a claim, looked up once each rather than once per comparison.
  absl::flat_hash_set<const Job*> claimed;
  if (any_claims) {
    for (const Job* job : in_.pending) {
      if (in_.claims.count(job->id) > 0) claimed.insert(job);
    }
  }
  const bool by_limit = options_.order == PolicyOptions::Order::kShortestLimit;
  const int64_t starved_before = in_.now_ms - options_.starve_after_ms;
  auto limit = [](const Job* j) {
    return j->spec.max_runtime_seconds > 0 ? j->spec.max_runtime_seconds
                                           : std::numeric_limits<int64_t>::max();
  };
  // Sorted by a key made once per job: a claim first, then the higher priority, then (by
  // limit) the starved, the shortest limit of the others, then submit order. Comparing keys
  // instead of looking claims up in each comparison keeps a deep backlog's sort cheap.
  using OrderKey = std::tuple<bool, int64_t, bool, int64_t, int64_t>;
  std::vector<std::pair<OrderKey, const Job*>> keyed;
  for (QueueJobs& q : by_queue) {
    keyed.clear();
    for (const Job* j : q.jobs) {
      const bool waits_by_limit = by_limit && j->created_at_ms > starved_before;
      keyed.push_back({{!(any_claims && claimed.count(j) > 0), -int64_t{j->spec.priority},
                        waits_by_limit, waits_by_limit ? limit(j) : 0, j->seq},
                       j});
    }
    std::sort(keyed.begin(), keyed.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < keyed.size(); ++i) q.jobs[i] = keyed[i].second;
  }
  // Next queue: heads with a claim first, then heads that fit without borrowing, then the lowest
  // weighted share, then the head's priority and submit order, then the queue's name.
  // Outcomes that only repeat within a pass. A job that could not start, preempt or reserve
  // leaves its key here; a later job of the same queue with the same key meets a cluster and
  // ledger that only filled up since, so it would wait too. Without reasons to write, such
  // jobs are not tried: a deep backlog then costs a pass a heap step per job, not a placement.
  // (With reasons, every job is tried, so each reason says what is true for it.) They still take
  // their turn in the order, so the decisions are exactly those of trying them.
  // (An elastic job's sizes_divide is part of it: a job that may run at fewer sizes waiting
  // says nothing of one that may run at more.)
  using Shape = std::tuple<size_t, int32_t, int64_t, std::string_view, bool, bool, int32_t, int32_t,
                           int32_t, std::string_view>;
  absl::flat_hash_set<Shape> waits;
  const bool skip_waits = !options_.explain && !options_.strict_fifo;
  auto shape_of = [&](size_t q, const Job& job) {
    const int64_t runtime_ms = job.spec.max_runtime_seconds * 1000;
    const bool may_backfill = runtime_ms > 0 && in_.now_ms + runtime_ms <= EarliestReservation();
    return Shape{q, job.spec.replicas, RankSize(RequestOf(job.spec)), job.spec.gpu_type,
                 ChecksJob(job.spec, /*enabled=*/true), may_backfill, job.spec.priority,
                 IsElastic(job.spec) ? job.spec.min_replicas : job.spec.replicas,
                 job.spec.sizes_divide,
                 // A share's room may differ by team (Worker::shares_one_team).
                 job.spec.gpu_share > 0 ? std::string_view(job.team) : std::string_view()};
  };
  using Key = std::tuple<bool, bool, double, int32_t, int64_t, size_t>;
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> heap;
  // A queue's share changes only when one of its jobs starts (searches put the ledger back):
  // computed then, not at each of its jobs' turns.
  std::vector<double> shares(by_queue.size());
  auto update_share = [&](size_t q) { shares[q] = result_.ledger.Share(*by_queue[q].name); };
  for (size_t q = 0; q < by_queue.size(); ++q) update_share(q);
  auto push = [&](size_t q) {
    const QueueJobs& queue = by_queue[q];
    if (queue.head >= queue.jobs.size()) return;
    const Job& job = *queue.jobs[queue.head];
    heap.push({!any_claims || claimed.count(&job) == 0, NeedsBorrowing(job), shares[q],
               -job.spec.priority, job.seq, q});
  };
  for (size_t q = 0; q < by_queue.size(); ++q) push(q);

  while (!heap.empty()) {
    const size_t q = std::get<5>(heap.top());
    heap.pop();
    QueueJobs& queue = by_queue[q];
    const auto& jobs = queue.jobs;
    const Job& job = *jobs[queue.head++];
    if (auto claim = in_.claims.find(job.id); claim != in_.claims.end()) {
      if (Units(cluster_.FreePart(claim->second)) == Units(claim->second)) {
        Allocate(claim->second);
        Job held;
        held.spec = job.spec;
        held.placement = claim->second;
        Demand d = HeldDemand(held, cluster_);
        result_.ledger.Add(job.spec.queue, d);
        update_share(q);
        result_.starts.push_back({job.id, claim->second, false, false});
        started_ranks_.push_back(claim->second);
        fresh_.push_back({&job, &started_ranks_.back(), d, in_.now_ms, true});
        if (holdings_built_) holdings_.push_back(fresh_.back());
      } else {
        if (options_.explain) result_.waiting[&job] = "waiting for preempted jobs to stop";
      }
      push(q);
      continue;
    }
    const Shape shape = skip_waits ? shape_of(q, job) : Shape{};
    if (skip_waits && waits.count(shape) > 0) {
      push(q);
      continue;
    }
    // An elastic job restarted for a reason nobody asked for (a failure, a scheduler restart)
    // starts at the largest size that fits from the one it last ran at down to its replicas
    // (StartSize), so it does not lose a size it had grown to. Tried before its replicas: the
    // attempt at its replicas is the one a wait, a preemption or a reservation is judged by.
    Attempt a;
    for (int32_t n = StartSize(job); n > job.spec.replicas && !a.placed; --n) {
      if (IsElasticSize(job.spec, n)) a = TryStart(job, n);
    }
    if (!a.placed) a = TryStart(job, job.spec.replicas);
    // An elastic job starts at the largest size from its replicas down to min_replicas that
    // fits now (and divides its sizes_divide), rather than waiting for its replicas.
    for (int32_t n = job.spec.replicas - 1;
         !a.placed && IsElastic(job.spec) && n >= job.spec.min_replicas; --n) {
      if (!IsElasticSize(job.spec, n)) continue;
      Attempt smaller = TryStart(job, n);
      if (smaller.placed) a = std::move(smaller);
    }
    if (in_.elastic != nullptr && !a.placed && a.quota_ok &&
        a.reason.rfind("unschedulable", 0) != 0) {
      wants_room_[a.demand.resource] |= a.check.fit == Fit::kWithinNominal;
    }
    if (a.placed) {
      Allocate(a.ranks);
      result_.ledger.Add(job.spec.queue, a.demand);
      update_share(q);
      result_.starts.push_back({job.id, a.ranks, a.check.fit == Fit::kBorrowing, a.backfilled});
      started_ranks_.push_back(std::move(a.ranks));
      fresh_.push_back({&job, &started_ranks_.back(), a.demand, in_.now_ms, true});
      if (holdings_built_) holdings_.push_back(fresh_.back());
      push(q);
      continue;
    }
    if (options_.explain) result_.waiting[&job] = a.reason;
    // Shrinking elastic jobs before preempting anyone whole; for an elastic job, at its
    // replicas, then at its min_replicas.
    auto free_for = [&](int32_t n) {
      return (any_elastic_ && TryShrink(job, a, n)) || TryPreempt(job, a, n);
    };
    const bool preempted =
        options_.preemption &&
        (free_for(job.spec.replicas) || (IsElastic(job.spec) &&
                                         job.spec.min_replicas < job.spec.replicas &&
                                         free_for(job.spec.min_replicas)));
    const size_t reserved = result_.reservations.size();
    if (!preempted && options_.backfill && a.quota_ok &&
        job.spec.replicas * std::max(job.spec.gpus_per_replica, 1) > 1 &&
        static_cast<int32_t>(result_.reservations.size()) < options_.reservations &&
        a.reason.rfind("unschedulable", 0) != 0) {
      Reserve(job, a.demand);
    }
    if (skip_waits && !preempted && result_.reservations.size() == reserved) waits.insert(shape);
    if (options_.strict_fifo) {
      // The queue waits for its head: the rest of it waits too.
      const std::string behind = absl::StrCat("behind ", job.id, " (FIFO)");
      for (size_t i = queue.head; options_.explain && i < jobs.size(); ++i) {
        result_.waiting[jobs[i]] = behind;
      }
      queue.head = jobs.size();
      continue;
    }
    push(q);
  }
  if (in_.elastic != nullptr && any_elastic_) Grow();
  return std::move(result_);
}

}  // namespace fair_share_internal

std::string PassResult::WaitingReason(const std::string& job_id) const {
  for (const auto& [job, reason] : waiting) {
    if (job->id == job_id) return reason;
  }
  return "";
}

PassResult SchedulePass(const PassInput& input, const ClusterState& cluster,
                        const PolicyOptions& options) {
  fair_share_internal::Pass pass(input, cluster, options);
  return pass.Run();
}

std::string PreemptionReason(const PassResult::Preemption& p, const Job* by) {
  std::string why = absl::StrCat("preempted by ", p.by_job_id);
  if (by != nullptr && p.reason == "reclaim") {
    absl::StrAppend(&why, " (queue ", by->spec.queue, " reclaims its nominal quota)");
  } else if (by != nullptr) {
    absl::StrAppend(&why, " (priority ", by->spec.priority, " in queue ", by->spec.queue, ")");
  }
  return why;
}

std::string PlacementReason(const PassResult::Start& start, bool direct) {
  std::set<std::string> names;
  for (const auto& rank : start.ranks) names.insert(rank.worker_id);
  std::string why = absl::StrCat("placed on ", absl::StrJoin(names, ","));
  if (start.borrowing) absl::StrAppend(&why, ", borrowing from the cohort");
  if (start.backfilled) absl::StrAppend(&why, ", backfilled before a reservation");
  if (direct) absl::StrAppend(&why, "; one rank, started without mpirun: no pre-run check");
  return why;
}

}  // namespace ringmaster::scheduler
