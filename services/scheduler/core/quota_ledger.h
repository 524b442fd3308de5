// Quota accounting for fair share (fair_share.h): what each queue uses of each resource, and
// what the cohorts' pools have left to lend. Plain data; no I/O. docs/scheduler.md, "Queues".
//
// Quota model (per cohort and resource, as in Kueue): a queue's nominal quota splits into a
// guaranteed part that nobody else may use (nominal - lendable) and a lendable part that goes
// into the cohort's pool. A queue's use above its guaranteed part draws on the pool. A queue
// admits a job when its use stays within nominal + borrowing limit and the pool has room; it
// is "borrowing" while its use is above nominal.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_QUOTA_LEDGER_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_QUOTA_LEDGER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "scheduler/core/placement.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// The ledger's units per unit of a resource: a GPU is 1000 (JobSpec.gpu_share is in
// thousandths of one), a CPU slot 1. Queue quotas, in whole GPUs and slots, are scaled by it.
int64_t QuotaScale(std::string_view resource);
// What one rank of `spec` takes, in the ledger's units.
int64_t UnitsPerRank(const JobSpec& spec);
// `units` of `resource` as people read them: "8 x t4", "0.25 x t4", "3 CPU slots".
std::string DescribeUnits(std::string_view resource, int64_t units);

// What a job takes from its queue: `amount` of one GPU type (in thousandths, QuotaScale), or
// CPU slots ("cpu").
struct Demand {
  std::string resource;
  int64_t amount = 0;
};

// The resources a pending job may use: its gpu_type, every GPU type of the cluster when it
// names none, or "cpu".
std::vector<Demand> CandidateDemands(const JobSpec& spec, const ClusterState& cluster);
// What a placed job holds.
Demand HeldDemand(const Job& job, const ClusterState& cluster);
// HeldDemand's amount alone, without finding the type: an elastic job's size now may differ
// from its spec's replicas.
int64_t HeldAmount(const Job& job);

enum class Fit { kWithinNominal, kBorrowing, kNo };

// Quota use per queue and resource, and the cohorts' pools. Cheap to copy.
class QuotaLedger {
 public:
  QuotaLedger() = default;
  explicit QuotaLedger(const std::map<std::string, Queue>& queues);

  void Add(const std::string& queue, const Demand& demand);
  void Remove(const std::string& queue, const Demand& demand);

  struct Check {
    Fit fit = Fit::kNo;
    // The job's queue would stay within its nominal quota (when kNo: what it asks is its own,
    // lent out to borrowers, so it may reclaim).
    bool within_nominal = false;
    std::string reason;  // when kNo: "queue vision: needs 8 x t4, nominal 16, in use 12, ..."
  };
  // explain = false leaves Check::reason empty: for callers that only need the verdict (a
  // busy pass asks thousands of times, and the reasons were most of the cost).
  Check CanAdmit(const std::string& queue, const Demand& demand, bool explain = true) const;

  // The queue's weighted dominant share: max over resources of (use above nominal) / (what
  // its cohort can lend), divided by weight. 0 for a queue within nominal or unknown.
  double Share(const std::string& queue) const;
  bool Borrowing(const std::string& queue, const std::string& resource) const;
  int64_t Used(const std::string& queue, const std::string& resource) const;

  struct Usage {
    int64_t nominal = 0;
    int64_t used = 0;
    int64_t borrowed = 0;
    // Unused lendable nominal of this queue that borrowers in the cohort are using now (the
    // cohort's borrowing is charged to the lenders in name order).
    int64_t lent = 0;
  };
  // Per resource the queue has a quota for or uses.
  std::map<std::string, Usage> UsageOf(const std::string& queue) const;

 private:
  // A queue's account of one resource. Accounts and pools are looked up by name once per call
  // (a hash of the queue's name, then a short scan of its resources): a busy pass asks
  // thousands of times, and ordered maps of string pairs were a fifth of it.
  struct Account {
    std::string resource;
    int64_t nominal = 0;
    int64_t guaranteed = 0;
    int64_t lendable = 0;
    int64_t borrow_cap = -1;  // -1: no limit
    int64_t used = 0;
    int pool = -1;  // index in pools_; -1: the queue has no cohort, or no limits
  };
  struct Pool {
    int64_t total = 0;
    int64_t used = 0;
  };
  struct QueueAccounts {
    bool known = false;      // a queue of the snapshot (else: no limits, use only counted)
    bool unlimited = false;  // no quotas at all
    std::string cohort;
    int32_t weight = 1;
    std::vector<Account> accounts;  // by resource, in the order first seen
  };
  const QueueAccounts* Find(const std::string& queue) const;
  static const Account* FindAccount(const QueueAccounts& q, std::string_view resource);
  // The account with nominal 0 that a known queue has for a resource it has no quota for.
  Account Unquoted(const QueueAccounts& q, const std::string& resource) const;
  int PoolOf(const std::string& cohort, const std::string& resource, bool create);
  int FindPool(const std::string& cohort, const std::string& resource) const;
  void Change(const std::string& queue, const Demand& demand, int sign);

  absl::flat_hash_map<std::string, QueueAccounts> queues_;
  std::vector<std::string> names_;  // queues_' keys in name order (for UsageOf's lenders)
  std::vector<Pool> pools_;
  std::map<std::pair<std::string, std::string>, int> pool_index_;  // (cohort, resource)
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_QUOTA_LEDGER_H_
