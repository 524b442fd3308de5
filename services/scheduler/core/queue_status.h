// What a queue holds and waits for right now: derived by the scheduling policy from the live
// jobs, served with the queue (GetQueue, ListQueues, `ringctl queue list`), never stored.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_QUEUE_STATUS_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_QUEUE_STATUS_H_

#include <cstdint>
#include <map>
#include <string>

namespace ringmaster::scheduler {

// One resource of a queue (a GPU type, or "cpu" for CPU slots). Counts are GPUs (or slots).
struct ResourceUsage {
  // In the ledger's units (QuotaScale: thousandths of a GPU, whole CPU slots).
  int64_t in_use = 0;    // held by the queue's placed jobs
  int64_t borrowed = 0;  // of in_use, above the queue's nominal
  int64_t lent = 0;      // of the queue's nominal, used by other queues of its cohort
  // Accounting (core/usage.h): resource-seconds the queue's jobs used, running ones so far.
  double used_seconds = 0;
  bool operator==(const ResourceUsage&) const = default;
};

struct QueueStatus {
  std::map<std::string, ResourceUsage> resources;  // by resource name
  int64_t pending_jobs = 0;
  // Usage above nominal over what the cohort can lend, divided by weight (dominant resource).
  double weighted_share = 0;
  bool operator==(const QueueStatus&) const = default;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_QUEUE_STATUS_H_
