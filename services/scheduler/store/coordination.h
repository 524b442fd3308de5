// The scheduler's rebuildable state, kept in Redis in production: the pending queue, worker
// liveness and the leader lease. Everything here can be rebuilt from the JobStore, so losing
// it (a Redis flush or restart) loses no job. Implementations: Redis* and InMemory*, both
// passing tests/store/coordination_conformance.h. All are thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_COORDINATION_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_COORDINATION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

struct QueueEntry {
  std::string job_id;
  int32_t priority = 0;  // -1000..1000
  int64_t seq = 0;       // submit order
};

// Pending jobs in policy order: higher priority first, then lower seq.
class PendingQueue {
 public:
  virtual ~PendingQueue() = default;
  // Adds or re-adds a job (idempotent).
  virtual absl::Status Push(const QueueEntry& entry) = 0;
  virtual absl::Status Remove(const std::string& job_id) = 0;
  // Pushes each entry given and removes each id given nullopt, in one round trip where the
  // backing store allows (the default calls Push and Remove). Every entry is checked first:
  // one out of range is INVALID_ARGUMENT and nothing is applied.
  using Changes = std::map<std::string, std::optional<QueueEntry>>;
  virtual absl::Status Apply(const Changes& changes);
  // Every queued job id in policy order.
  virtual absl::StatusOr<std::vector<std::string>> List() = 0;
  // Replaces the whole queue with `entries` and marks the backing store as intact.
  virtual absl::Status Rebuild(const std::vector<QueueEntry>& entries) = 0;
  // False when the backing store lost its contents since the last Rebuild (e.g. Redis was
  // flushed or restarted empty): the caller must Rebuild from the JobStore.
  virtual absl::StatusOr<bool> Intact() = 0;
};

// Worker heartbeats with expiry.
class Liveness {
 public:
  virtual ~Liveness() = default;
  // Records a heartbeat that keeps the worker alive for ttl_ms.
  virtual absl::Status Beat(const std::string& worker_id, int64_t ttl_ms) = 0;
  // The subset of `worker_ids` whose last heartbeat has not expired.
  virtual absl::StatusOr<std::set<std::string>> Alive(
      const std::vector<std::string>& worker_ids) = 0;
};

// The leader lease: one scheduler replica at a time holds it and acts; the others wait.
// Holders are opaque strings unique to each process.
class LeaderLease {
 public:
  virtual ~LeaderLease() = default;
  // Takes the lease for ttl_ms when it is free (never held, expired, released, or lost with a
  // Redis flush), or renews it when `holder` has it. False when another holder has it.
  virtual absl::StatusOr<bool> Hold(const std::string& holder, int64_t ttl_ms) = 0;
  // Gives the lease up if `holder` has it, so a standby takes over at once; else does nothing.
  virtual absl::Status Release(const std::string& holder) = 0;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_COORDINATION_H_
