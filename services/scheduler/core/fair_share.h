// Fair share between teams: queues with nominal quotas, borrowing within a cohort, weighted
// dominant-share order, backfill around reservations for large gangs, and whole-gang
// preemption. Pure functions over a snapshot: the scheduler, the tests and ringmaster-sim run
// the same code. docs/scheduler.md, "Queues", explains the rules; quota_ledger.h, the quota
// model.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_FAIR_SHARE_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_FAIR_SHARE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "scheduler/core/elastic.h"
#include "scheduler/core/placement.h"
#include "scheduler/core/quota_ledger.h"
#include "scheduler/core/types.h"
#include "scheduler/core/validation.h"

namespace ringmaster::scheduler {

struct PolicyOptions {
  // Helios' FIFO: a queue's first job that does not fit blocks the jobs behind it.
  bool strict_fifo = false;
  bool preemption = true;
  bool backfill = true;
  // Pending gangs that get a reservation (the first that fit their quota but not the
  // cluster), and how far ahead a reservation may lie.
  int32_t reservations = 4;
  int64_t reservation_window_ms = 7LL * 24 * 3600 * 1000;
  // The order of a queue's pending jobs of equal priority: submit order, or the shortest
  // max_runtime_seconds first (no limit: last), an estimate of job length that needs nothing but
  // the limits users set. A job pending for `starve_after_ms` since its submit goes ahead of
  // those, oldest first, so long and large jobs are not passed over for ever.
  enum class Order { kSubmit, kShortestLimit };
  // false: PassResult::waiting stays empty. For the simulator, which reads no reasons and
  // would spend most of a deep backlog's pass writing them.
  bool explain = true;
  Order order = Order::kSubmit;
  int64_t starve_after_ms = 6LL * 3600 * 1000;
  // Elastic jobs (core/elastic.h): when they grow, how often they may be resized.
  ElasticOptions elastic;
};

struct PassInput {
  const std::map<std::string, Queue>* queues = nullptr;
  std::vector<const Job*> pending;
  // Jobs holding a placement: starting, running, and preempted ones still stopping.
  std::vector<const Job*> placed;
  // Preempted jobs whose ranks are still stopping: they hold GPUs, are not victims again.
  std::set<std::string> stopping;
  // GPUs promised to pending jobs that preempted: the job starts on exactly these once its
  // victims are gone, nobody else gets them meanwhile, and it preempts nothing more. The caller
  // keeps a claim from the pass that made it until the job starts (or its victims are gone
  // and one pass could not start it).
  std::map<std::string, std::vector<RankPlacement>> claims;
  int64_t now_ms = 0;
  // Throughput curves, past resizes and idle GPUs for elastic jobs; null: none known (elastic
  // jobs still start smaller and shrink, and never grow).
  const ElasticInput* elastic = nullptr;
};

struct Reservation {
  std::string job_id;
  int64_t start_ms = 0;
  std::vector<RankPlacement> ranks;
};

struct PassResult {
  struct Start {
    std::string job_id;
    std::vector<RankPlacement> ranks;
    bool borrowing = false;
    bool backfilled = false;  // uses reserved GPUs, ending before the reservation
  };
  struct Preemption {
    std::string job_id;
    std::string by_job_id;
    std::string reason;  // "reclaim" or "priority"
  };
  // An elastic job to restart at another size: stopped like a preempted job (SIGTERM, the
  // grace), then started from its last checkpoint on `ranks`, which are GPUs it holds (a shrink:
  // the first `to` of its ranks) or it holds and idle ones (a growth). Until then nobody else
  // may take them, as with a claim. A shrink gives the rest to `by_job_id`'s claim.
  struct Resize {
    std::string job_id;
    int32_t from = 0;
    int32_t to = 0;
    std::vector<RankPlacement> ranks;
    std::string by_job_id;  // a shrink's: the pending job the GPUs go to
    std::string reason;     // "grown from 2 to 4 replicas: ...", "shrunk from 4 to 2: ..."
  };
  std::vector<Start> starts;
  std::vector<Preemption> preemptions;
  std::vector<Resize> resizes;
  std::vector<Reservation> reservations;
  // New claims: where each job that preempted will start.
  std::map<std::string, std::vector<RankPlacement>> claims;
  // Every pending job that did not start: why it waits. Keyed by the input's pending jobs (no
  // copy of thousands of ids each pass); WaitingReason finds one by id.
  absl::flat_hash_map<const Job*, std::string> waiting;
  QuotaLedger ledger;  // after the starts

  // Why the job of this id waits; "" when it is not among `waiting`. A scan: for tests and tools.
  std::string WaitingReason(const std::string& job_id) const;
};

// One scheduling pass. `cluster` holds the allocations of `placed`; the pass works on copies.
PassResult SchedulePass(const PassInput& input, const ClusterState& cluster,
                        const PolicyOptions& options);

// The event texts of a pass's decisions: "preempted by j-2 (queue b reclaims its nominal
// quota)" (`by`: the preemptor, null when no longer live), and "placed on w1,w2, borrowing from
// the cohort" (`direct`: a one-rank job started without mpirun).
std::string PreemptionReason(const PassResult::Preemption& p, const Job* by);
std::string PlacementReason(const PassResult::Start& start, bool direct);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_FAIR_SHARE_H_
