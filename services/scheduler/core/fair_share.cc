#include "scheduler/core/fair_share.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <queue>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "scheduler/core/health_check.h"

namespace ringmaster::scheduler {
namespace {

int64_t AmountOf(const JobSpec& spec) {
  return static_cast<int64_t>(spec.replicas) * std::max(spec.gpus_per_replica, 1);
}

// What a placed job holds: an elastic job's size now may differ from its spec's replicas.
int64_t HeldAmount(const Job& job) {
  return static_cast<int64_t>(RunningReplicas(job)) * std::max(job.spec.gpus_per_replica, 1);
}

// GPUs, or CPU slots, in `ranks`.
int64_t Units(const std::vector<RankPlacement>& ranks) {
  int64_t n = 0;
  for (const RankPlacement& r : ranks) n += r.gpu_indices.empty() ? 1 : r.gpu_indices.size();
  return n;
}

std::string Describe(const Demand& d) {
  return d.resource == kCpuResource ? absl::StrCat(d.amount, " CPU slots")
                                    : absl::StrCat(d.amount, " x ", d.resource);
}

}  // namespace

// Up to when a running job's work is safe: its last checkpoint, or the start of its attempt
// when it has none since (a checkpoint older than the start is the one the attempt resumed
// from). Preempting it now loses the work after this.
int64_t WorkSavedAtMs(const Job& job, int64_t started_ms) {
  return std::max(started_ms, job.last_checkpoint_time_ms);
}

std::vector<Demand> CandidateDemands(const JobSpec& spec, const ClusterState& cluster) {
  const int64_t amount = AmountOf(spec);
  if (spec.gpus_per_replica == 0) return {{kCpuResource, amount}};
  if (!spec.gpu_type.empty()) return {{spec.gpu_type, amount}};
  std::vector<Demand> out;
  for (const auto& [type, totals] : cluster.GpuTotals()) out.push_back({type, amount});
  return out;
}

Demand HeldDemand(const Job& job, const ClusterState& cluster) {
  const int64_t amount = HeldAmount(job);
  if (job.spec.gpus_per_replica == 0) return {kCpuResource, amount};
  if (!job.spec.gpu_type.empty()) return {job.spec.gpu_type, amount};
  for (const RankPlacement& rank : job.placement) {
    if (!rank.gpu_indices.empty()) {
      return {cluster.GpuTypeOf(rank.worker_id, rank.gpu_indices.front()), amount};
    }
  }
  return {"", amount};
}

QuotaLedger::QuotaLedger(const std::map<std::string, Queue>& queues) {
  queues_.reserve(queues.size());
  for (const auto& [name, queue] : queues) {
    names_.push_back(name);
    QueueAccounts& q = queues_[name];
    q.known = true;
    q.unlimited = queue.unlimited();
    q.cohort = queue.cohort;
    q.weight = queue.weight;
    for (const auto& [resource, quota] : queue.quotas) {
      Account a;
      a.resource = resource;
      a.nominal = quota.nominal;
      a.lendable = std::min(quota.lending_limit.value_or(a.nominal), a.nominal);
      if (quota.borrowing_limit) a.borrow_cap = a.nominal + *quota.borrowing_limit;
      if (queue.cohort.empty()) a.lendable = a.nominal;  // a pool of its own
      a.guaranteed = a.nominal - a.lendable;
      if (!q.unlimited && !queue.cohort.empty()) {
        a.pool = PoolOf(queue.cohort, resource, true);
        pools_[a.pool].total += a.lendable;
      }
      q.accounts.push_back(std::move(a));
    }
  }
}

int QuotaLedger::PoolOf(const std::string& cohort, const std::string& resource, bool create) {
  auto it = pool_index_.find({cohort, resource});
  if (it != pool_index_.end()) return it->second;
  if (!create) return -1;
  pools_.emplace_back();
  pool_index_[{cohort, resource}] = static_cast<int>(pools_.size()) - 1;
  return static_cast<int>(pools_.size()) - 1;
}

int QuotaLedger::FindPool(const std::string& cohort, const std::string& resource) const {
  auto it = pool_index_.find({cohort, resource});
  return it == pool_index_.end() ? -1 : it->second;
}

const QuotaLedger::QueueAccounts* QuotaLedger::Find(const std::string& queue) const {
  auto it = queues_.find(queue);
  return it == queues_.end() ? nullptr : &it->second;
}

const QuotaLedger::Account* QuotaLedger::FindAccount(const QueueAccounts& q,
                                                     std::string_view resource) {
  for (const Account& a : q.accounts) {
    if (a.resource == resource) return &a;
  }
  return nullptr;
}

QuotaLedger::Account QuotaLedger::Unquoted(const QueueAccounts& q,
                                           const std::string& resource) const {
  Account a;
  a.resource = resource;
  if (!q.unlimited && !q.cohort.empty()) a.pool = FindPool(q.cohort, resource);
  return a;
}

void QuotaLedger::Change(const std::string& queue_name, const Demand& demand, int sign) {
  QueueAccounts& q = queues_[queue_name];
  Account* a = const_cast<Account*>(FindAccount(q, demand.resource));
  if (a == nullptr) {
    q.accounts.push_back(Unquoted(q, demand.resource));
    a = &q.accounts.back();
    if (q.known && !q.unlimited && !q.cohort.empty() && a->pool < 0) {
      a->pool = PoolOf(q.cohort, demand.resource, true);
    }
  }
  if (q.known && !q.unlimited && a->pool >= 0) {
    const int64_t before = std::max<int64_t>(0, a->used - a->guaranteed);
    const int64_t after = std::max<int64_t>(0, a->used + sign * demand.amount - a->guaranteed);
    pools_[a->pool].used += after - before;
  }
  a->used += sign * demand.amount;
}

void QuotaLedger::Add(const std::string& queue, const Demand& demand) { Change(queue, demand, 1); }

void QuotaLedger::Remove(const std::string& queue, const Demand& demand) {
  Change(queue, demand, -1);
}

QuotaLedger::Check QuotaLedger::CanAdmit(const std::string& queue_name, const Demand& demand,
                                         bool explain) const {
  Check check;
  const QueueAccounts* q = Find(queue_name);
  if (q == nullptr || !q->known || q->unlimited) {
    check.fit = Fit::kWithinNominal;
    check.within_nominal = true;
    return check;
  }
  const Account* found = FindAccount(*q, demand.resource);
  const Account a = found != nullptr ? *found : Unquoted(*q, demand.resource);
  const int64_t next = a.used + demand.amount;
  check.within_nominal = next <= a.nominal;
  auto refuse = [&](const std::string& why) {
    check.fit = Fit::kNo;
    if (!explain) return check;
    check.reason = absl::StrCat("queue ", queue_name, ": needs ", Describe(demand), ", nominal ",
                                a.nominal, ", in use ", a.used, why);
    return check;
  };
  if (a.borrow_cap >= 0 && next > a.borrow_cap) {
    return refuse(explain ? absl::StrCat(", borrowing limit ", a.borrow_cap - a.nominal) : "");
  }
  if (q->cohort.empty()) {
    if (next > a.nominal) return refuse(", no cohort to borrow from");
  } else {
    const Pool pool = a.pool < 0 ? Pool{} : pools_[a.pool];
    const int64_t draw =
        std::max<int64_t>(0, next - a.guaranteed) - std::max<int64_t>(0, a.used - a.guaranteed);
    if (pool.used + draw > pool.total) {
      // What the cohort could still give this queue beyond its guaranteed part.
      const int64_t free = std::max<int64_t>(0, pool.total - pool.used);
      if (!explain) return refuse("");
      return refuse(check.within_nominal
                        ? absl::StrCat(", lent to borrowers in cohort ", q->cohort)
                        : absl::StrCat(", cohort ", q->cohort, " has ", free, " to lend"));
    }
  }
  check.fit = check.within_nominal ? Fit::kWithinNominal : Fit::kBorrowing;
  return check;
}

bool QuotaLedger::Borrowing(const std::string& queue_name, const std::string& resource) const {
  const QueueAccounts* q = Find(queue_name);
  if (q == nullptr || !q->known || q->unlimited) return false;
  const Account* a = FindAccount(*q, resource);
  return a != nullptr && a->used > a->nominal;
}

int64_t QuotaLedger::Used(const std::string& queue, const std::string& resource) const {
  const QueueAccounts* q = Find(queue);
  const Account* a = q == nullptr ? nullptr : FindAccount(*q, resource);
  return a == nullptr ? 0 : a->used;
}

double QuotaLedger::Share(const std::string& queue_name) const {
  const QueueAccounts* q = Find(queue_name);
  if (q == nullptr || !q->known || q->unlimited || q->cohort.empty()) return 0;
  double share = 0;
  for (const Account& a : q->accounts) {
    if (a.used <= a.nominal) continue;
    const int64_t total = a.pool < 0 ? 0 : pools_[a.pool].total;
    share = std::max(share, total > 0 ? static_cast<double>(a.used - a.nominal) / total : 1.0);
  }
  return share / std::max(q->weight, 1);
}

std::map<std::string, QuotaLedger::Usage> QuotaLedger::UsageOf(
    const std::string& queue_name) const {
  std::map<std::string, Usage> out;
  const QueueAccounts* q = Find(queue_name);
  if (q == nullptr) return out;
  for (const Account& a : q->accounts) {
    Usage& u = out[a.resource];
    u.used = a.used;
    if (!q->known || q->unlimited) continue;
    u.nominal = a.nominal;
    u.borrowed = std::max<int64_t>(0, a.used - a.nominal);
    if (q->cohort.empty()) continue;
    // The cohort's borrowing, charged to lenders in name order.
    int64_t borrowed = 0;
    for (const std::string& name : names_) {
      const QueueAccounts& other = *Find(name);
      if (other.cohort != q->cohort || other.unlimited) continue;
      const Account* b = FindAccount(other, a.resource);
      if (b != nullptr) borrowed += std::max<int64_t>(0, b->used - b->nominal);
    }
    for (const std::string& name : names_) {
      const QueueAccounts& other = *Find(name);
      if (other.cohort != q->cohort || other.unlimited) continue;
      const Account* b = FindAccount(other, a.resource);
      const int64_t idle =
          b == nullptr ? 0 : std::max<int64_t>(0, std::min(b->lendable, b->nominal - b->used));
      const int64_t lent = std::min(idle, borrowed);
      borrowed -= lent;
      if (name == queue_name) u.lent = lent;
    }
  }
  return out;
}

namespace {

// The mutable state of one pass.
class Pass {
 public:
  Pass(const PassInput& input, const ClusterState& cluster, const PolicyOptions& options)
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

  // Placed jobs with what they hold; built when preemption or a reservation first needs it.
  // `replicas`: the size tried (an elastic job's may be below its spec's).
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
  bool FitsNow(const Job& job, const TakeScope& scope, ClusterState& cluster) {
    return result_.ledger.CanAdmit(job.spec.queue, scope.demand, false).fit != Fit::kNo &&
           cluster.Place(scope.request).kind == PlacementDecision::Kind::kPlaced;
  }
  std::optional<TakeScope> ScopeOf(const Job& job, const Attempt& attempt, int32_t replicas);
  bool TryPreempt(const Job& job, const Attempt& attempt, int32_t replicas);
  // Elastic jobs (core/elastic.h). TryShrink frees GPUs for `job` by shrinking elastic jobs
  // that it could preempt (down to their min_replicas) or that grew (down to their replicas),
  // and only if that alone makes it fit; Grow gives GPUs idle for the delay to running elastic
  // jobs: back to their replicas, and beyond when no pending job waits for room.
  bool TryShrink(const Job& job, const Attempt& attempt, int32_t replicas);
  void Grow();
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
  // (resource, replicas, units per rank, may backfill, checked) -> why it did not fit.
  std::map<std::tuple<std::string, int32_t, int32_t, bool, bool>, std::string> no_room_;
  // (queue, resource) -> the smallest demand for which no victims were found.
  std::map<std::pair<std::string, std::string>, int64_t> no_victims_;
  // Gang shapes that found no reservation this pass: what is free once every running job in the
  // window has ended only shrinks within a pass (starts, claims and reservations take from it).
  // (resource, replicas, units per rank, checked).
  std::set<std::tuple<std::string, int32_t, int32_t, bool>> no_reservation_;
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
    groups_.push_back({quota == q->second.quotas.end() ? 0 : quota->second.nominal, 0});
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
  const int64_t amount = int64_t{replicas} * std::max(job.spec.gpus_per_replica, 1);
  for (Demand& d : demands) d.amount = amount;
  if (demands.empty()) {
    a.reason = absl::StrCat("unschedulable: needs ", amount, " x GPU, the cluster has none");
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
    GangRequest request = RequestOf(job.spec);
    request.replicas = replicas;
    if (request.gpus_per_replica > 0) request.gpu_type = d.resource;
    auto key = std::make_tuple(d.resource, request.replicas, request.gpus_per_replica, may_backfill,
                               request.checked);
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

std::optional<Pass::TakeScope> Pass::ScopeOf(const Job& job, const Attempt& attempt,
                                             int32_t replicas) {
  auto it = in_.queues->find(job.spec.queue);
  if (it == in_.queues->end()) return std::nullopt;
  const Queue* queue = &it->second;
  // The resource: the one that fit the quota, else the first candidate.
  std::vector<Demand> demands = CandidateDemands(job.spec, cluster_);
  if (demands.empty()) return std::nullopt;
  Demand demand = attempt.quota_ok ? attempt.demand : demands.front();
  demand.amount = int64_t{replicas} * std::max(job.spec.gpus_per_replica, 1);
  const bool reclaim = queue->reclaim_within_cohort != ReclaimWithinCohort::kNever &&
                       !queue->cohort.empty() &&
                       result_.ledger.CanAdmit(job.spec.queue, demand, false).within_nominal;
  GangRequest request = RequestOf(job.spec);
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

  if (auto failed = no_victims_.find({job.spec.queue, demand.resource});
      failed != no_victims_.end() && demand.amount >= failed->second) {
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

void Pass::Reserve(const Job& job, const Demand& demand) {
  // Free GPUs in the order running jobs must end (by max_runtime_seconds) until the gang fits.
  // Which jobs end within the window is found once a pass, not once per pending gang: a full
  // cluster with thousands of them spent most of each pass here. Jobs only start in a pass.
  GangRequest request = RequestOf(job.spec);
  if (request.gpus_per_replica > 0) request.gpu_type = demand.resource;
  const auto shape =
      std::make_tuple(demand.resource, request.replicas, request.gpus_per_replica, request.checked);
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

bool Pass::TryShrink(const Job& job, const Attempt& attempt, int32_t replicas) {
  std::optional<TakeScope> scope_of = ScopeOf(job, attempt, replicas);
  if (!scope_of) return false;
  const Queue* queue = scope_of->queue;
  const Demand demand = scope_of->demand;
  const bool reclaim = scope_of->reclaim;
  const bool within = scope_of->within;
  if (auto failed = no_shrink_.find({job.spec.queue, demand.resource});
      failed != no_shrink_.end() && demand.amount >= failed->second) {
    return false;
  }
  auto give_up = [&] {
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
    if (!MayResize(in_.elastic, v.id, in_.now_ms, options_.elastic.max_resizes_per_hour)) continue;
    const int32_t from = static_cast<int32_t>(h.ranks->size());
    int32_t floor = from;
    std::string why;
    const bool lower = v.spec.priority < job.spec.priority;
    const bool newer_equal = v.spec.priority == job.spec.priority && v.seq > job.seq;
    if (!same && reclaim && AboveNominal(h) &&
        (queue->reclaim_within_cohort == ReclaimWithinCohort::kAny || lower)) {
      floor = v.spec.min_replicas;
      why = absl::StrCat("queue ", job.spec.queue, " reclaims its nominal quota");
    } else if (same && within &&
               (lower || (newer_equal &&
                          queue->within_queue == PreemptWithinQueue::kLowerOrNewerEqualPriority))) {
      floor = v.spec.min_replicas;
      why = absl::StrCat("priority ", job.spec.priority, " in queue ", job.spec.queue);
    } else if (from > v.spec.replicas) {
      floor = v.spec.replicas;
      why = absl::StrCat(job.id, " of queue ", job.spec.queue, " waits for GPUs it grew into");
    }
    if (floor >= from) continue;
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
  // in place, as TryPreempt does, and put back before returning.
  QuotaLedger& ledger = result_.ledger;
  ClusterState& cluster = claimed_ ? *claimed_ : cluster_;
  auto fits = [&]() { return FitsNow(job, *scope_of, cluster); };
  struct Taken {
    Shrinkable* from;
    const RankPlacement* rank;
  };
  auto take = [&](const Taken& t) {
    ledger.Remove(t.from->holding->job->spec.queue, {demand.resource, Units({*t.rank})});
    cluster.Release({*t.rank});
  };
  auto give_back = [&](const Taken& t) {
    ledger.Add(t.from->holding->job->spec.queue, {demand.resource, Units({*t.rank})});
    (void)cluster.Allocate({*t.rank});
  };
  std::vector<Taken> taken;
  bool ok = false;
  while (!ok) {
    Shrinkable* best = nullptr;
    double least = 0;
    for (Shrinkable& c : candidates) {
      if (c.now <= c.floor) continue;
      const double loss = RankGain(c.curve, c.now - 1);
      if (best == nullptr || loss < least ||
          (loss == least && c.holding->job->seq > best->holding->job->seq)) {
        best = &c;
        least = loss;
      }
    }
    if (best == nullptr) break;
    --best->now;
    taken.push_back({best, &(*best->holding->ranks)[best->now]});
    take(taken.back());
    ok = fits();
  }
  if (!ok) {
    for (const Taken& t : taken) give_back(t);
    return give_up();
  }
  // The fewest: give back ranks, last taken first, while the job still fits.
  std::vector<bool> needed(taken.size(), true);
  for (size_t i = taken.size() - 1; i-- > 0;) {
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
      freed[taken[i].from].insert(taken[i].rank);
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

void Pass::Grow() {
  const ElasticInput& elastic = *in_.elastic;
  const ElasticOptions& o = options_.elastic;
  absl::flat_hash_set<std::string_view> touched;  // preempted or resized by this pass
  for (const auto& p : result_.preemptions) touched.insert(p.job_id);
  for (const auto& r : result_.resizes) touched.insert(r.job_id);
  for (const auto& [resource, settled] : elastic.settled_idle) {
    if (settled <= 0) continue;
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
    int64_t budget = std::min<int64_t>(settled, t->second.total - t->second.allocated);
    if (budget <= 0) continue;
    struct Growable {
      const Job* job;
      int32_t from;
      int32_t cap;  // the most it may grow to now
      int32_t now;
      const std::vector<double>* curve;
      int64_t saved_ms;  // its work is safe up to here
      bool done = false;
      std::vector<RankPlacement> added;
    };
    std::vector<Growable> candidates;
    for (const Job* job : in_.placed) {
      const JobSpec& spec = job->spec;
      // Cheap tests first: this runs over every placed job in each pass with idle GPUs.
      if (!IsElastic(spec) || spec.gpus_per_replica <= 0 || job->state != JobState::kRunning) {
        continue;
      }
      const int32_t n = RunningReplicas(*job);
      const int32_t cap = waited_for ? spec.replicas : spec.max_replicas;
      if (n >= cap) continue;
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
      const double cost = static_cast<double>(o.restart_cost_ms + in_.now_ms - saved);
      const double before = Throughput(curve, n), after = Throughput(curve, n + 1);
      if (!(after > before) || left * (1 - before / after) < 2 * cost) continue;
      if (in_.stopping.count(job->id) > 0 || touched.count(job->id) > 0 ||
          !MayResize(in_.elastic, job->id, in_.now_ms, o.max_resizes_per_hour)) {
        continue;
      }
      candidates.push_back({job, n, cap, n, curve, saved, false, {}});
    }
    // Rank by rank, to the job whose next rank adds the most (then the one with the least work
    // since its checkpoint, which a restart loses).
    while (budget > 0) {
      Growable* best = nullptr;
      double most = 0;
      for (Growable& c : candidates) {
        if (c.done || c.now >= c.cap || c.job->spec.gpus_per_replica > budget) {
          continue;
        }
        const double gain = RankGain(c.curve, c.now);
        if (gain <= 0) continue;
        if (best == nullptr || gain > most ||
            (gain == most && (c.saved_ms > best->saved_ms ||
                              (c.saved_ms == best->saved_ms && c.job->seq < best->job->seq)))) {
          best = &c;
          most = gain;
        }
      }
      if (best == nullptr) break;
      const JobSpec& spec = best->job->spec;
      const Demand rank_demand{resource, spec.gpus_per_replica};
      GangRequest request = RequestOf(spec);
      request.replicas = 1;
      request.gpu_type = resource;
      PlacementDecision p;
      if (result_.ledger.CanAdmit(spec.queue, rank_demand, false).fit != Fit::kNo) {
        p = Masked().Place(request);
      }
      if (p.kind != PlacementDecision::Kind::kPlaced) {
        best->done = true;
        continue;
      }
      p.ranks.front().rank = best->now++;
      Allocate(p.ranks);
      result_.ledger.Add(spec.queue, rank_demand);
      best->added.push_back(p.ranks.front());
      budget -= spec.gpus_per_replica;
    }
    for (Growable& c : candidates) {
      if (c.added.empty()) continue;
      PassResult::Resize resize;
      resize.job_id = c.job->id;
      resize.from = c.from;
      resize.to = c.now;
      resize.ranks = c.job->placement;
      resize.ranks.insert(resize.ranks.end(), c.added.begin(), c.added.end());
      const Queue* q = nullptr;
      if (auto it = in_.queues->find(c.job->spec.queue); it != in_.queues->end()) q = &it->second;
      resize.reason =
          GrowReason(c.from, c.now, settled, resource, q ? q->cohort : "", o.idle_delay_ms);
      result_.resizes.push_back(std::move(resize));
    }
  }
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
    std::map<std::string_view, std::vector<const Job*>> grouped;
    for (const Job* job : in_.pending) grouped[job->spec.queue].push_back(job);
    for (auto& [name, jobs] : grouped) {
      by_queue.push_back({&jobs.front()->spec.queue, std::move(jobs)});
    }
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
  for (QueueJobs& q : by_queue) {
    std::sort(q.jobs.begin(), q.jobs.end(), [&](const Job* a, const Job* b) {
      if (any_claims) {
        const bool na = claimed.count(a) > 0, nb = claimed.count(b) > 0;
        if (na != nb) return na;
      }
      if (a->spec.priority != b->spec.priority) return a->spec.priority > b->spec.priority;
      if (by_limit) {
        const bool sa = a->created_at_ms <= starved_before, sb = b->created_at_ms <= starved_before;
        if (sa != sb) return sa;
        if (!sa && limit(a) != limit(b)) return limit(a) < limit(b);
      }
      return a->seq < b->seq;
    });
  }
  // Next queue: heads with a claim first, then heads that fit without borrowing, then the lowest
  // weighted share, then the head's priority and submit order, then the queue's name.
  // Outcomes that only repeat within a pass. A job that could not start, preempt or reserve
  // leaves its key here; a later job of the same queue with the same key meets a cluster and
  // ledger that only filled up since, so it would wait too. Without reasons to write, such
  // jobs are not tried: a deep backlog then costs a pass a heap step per job, not a placement.
  // (With reasons, every job is tried, so each reason says what is true for it.) They still take
  // their turn in the order, so the decisions are exactly those of trying them.
  using Shape =
      std::tuple<size_t, int32_t, int32_t, std::string_view, bool, bool, int32_t, int32_t>;
  absl::flat_hash_set<Shape> waits;
  const bool skip_waits = !options_.explain && !options_.strict_fifo;
  auto shape_of = [&](size_t q, const Job& job) {
    const int64_t runtime_ms = job.spec.max_runtime_seconds * 1000;
    const bool may_backfill = runtime_ms > 0 && in_.now_ms + runtime_ms <= EarliestReservation();
    return Shape{q,
                 job.spec.replicas,
                 job.spec.gpus_per_replica,
                 job.spec.gpu_type,
                 ChecksJob(job.spec, /*enabled=*/true),
                 may_backfill,
                 job.spec.priority,
                 IsElastic(job.spec) ? job.spec.min_replicas : job.spec.replicas};
  };
  using Key = std::tuple<bool, bool, double, int32_t, int64_t, size_t>;
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> heap;
  auto push = [&](size_t q) {
    const QueueJobs& queue = by_queue[q];
    if (queue.head >= queue.jobs.size()) return;
    const Job& job = *queue.jobs[queue.head];
    heap.push({!any_claims || claimed.count(&job) == 0, NeedsBorrowing(job),
               result_.ledger.Share(*queue.name), -job.spec.priority, job.seq, q});
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
    Attempt a = TryStart(job, job.spec.replicas);
    // An elastic job starts at the largest size from its replicas down to min_replicas that
    // fits now, rather than waiting for its replicas.
    for (int32_t n = job.spec.replicas - 1;
         !a.placed && IsElastic(job.spec) && n >= job.spec.min_replicas; --n) {
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

}  // namespace

std::string PassResult::WaitingReason(const std::string& job_id) const {
  for (const auto& [job, reason] : waiting) {
    if (job->id == job_id) return reason;
  }
  return "";
}

PassResult SchedulePass(const PassInput& input, const ClusterState& cluster,
                        const PolicyOptions& options) {
  Pass pass(input, cluster, options);
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
