#include "scheduler/core/quota_ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/thousandths.h"
#include "scheduler/core/elastic.h"

namespace ringmaster::scheduler {
namespace {

int64_t AmountOf(const JobSpec& spec) { return int64_t{spec.replicas} * UnitsPerRank(spec); }

std::string Describe(const Demand& d) { return DescribeUnits(d.resource, d.amount); }

}  // namespace

int64_t QuotaScale(std::string_view resource) {
  return resource == kCpuResource ? 1 : kWholeGpuShare;
}

int64_t UnitsPerRank(const JobSpec& spec) {
  if (spec.gpus_per_replica == 0) return 1;
  if (spec.gpu_share > 0) return spec.gpu_share;
  return int64_t{spec.gpus_per_replica} * kWholeGpuShare;
}

std::string DescribeUnits(std::string_view resource, int64_t units) {
  return resource == kCpuResource
             ? absl::StrCat(units, " CPU slots")
             : absl::StrCat(ThousandthsText(units), " x ", std::string(resource));
}

int64_t HeldAmount(const Job& job) {
  return int64_t{RunningReplicas(job)} * UnitsPerRank(job.spec);
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
      const int64_t scale = QuotaScale(resource);
      a.nominal = quota.nominal * scale;
      a.lendable =
          std::min(quota.lending_limit ? *quota.lending_limit * scale : a.nominal, a.nominal);
      if (quota.borrowing_limit) a.borrow_cap = a.nominal + *quota.borrowing_limit * scale;
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
    const int64_t scale = QuotaScale(demand.resource);
    check.reason = absl::StrCat("queue ", queue_name, ": needs ", Describe(demand), ", nominal ",
                                ThousandthsText(a.nominal * 1000 / scale), ", in use ",
                                ThousandthsText(a.used * 1000 / scale), why);
    return check;
  };
  if (a.borrow_cap >= 0 && next > a.borrow_cap) {
    return refuse(explain ? absl::StrCat(", borrowing limit ",
                                         ThousandthsText((a.borrow_cap - a.nominal) * 1000 /
                                                         QuotaScale(demand.resource)))
                          : "");
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
                        : absl::StrCat(", cohort ", q->cohort, " has ",
                                       ThousandthsText(free * 1000 / QuotaScale(demand.resource)),
                                       " to lend"));
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

}  // namespace ringmaster::scheduler
