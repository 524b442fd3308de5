// In-memory PendingQueue, Liveness and LeaderLease: real implementations with the semantics of the
// Redis ones (they pass the same conformance suite), for unit tests and single-process runs.
// All are thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_IN_MEMORY_COORDINATION_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_IN_MEMORY_COORDINATION_H_

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/mutex.h"
#include "scheduler/core/clock.h"
#include "scheduler/store/coordination.h"

namespace ringmaster::scheduler {

// The queue as an ordered set. Intact() stays true unless Lose() simulates the loss of the
// backing store (as a Redis flush would), until the next Rebuild().
class InMemoryPendingQueue : public PendingQueue {
 public:
  InMemoryPendingQueue() = default;

  absl::Status Push(const QueueEntry& entry) override;
  absl::Status Remove(const std::string& job_id) override;
  absl::StatusOr<std::vector<std::string>> List() override;
  absl::Status Rebuild(const std::vector<QueueEntry>& entries) override;
  absl::StatusOr<bool> Intact() override;

  // Empties the queue and marks it not intact: what a Redis FLUSHALL does to RedisPendingQueue.
  void Lose();
  // How many times it was rebuilt: a test waits for a scheduler's first rebuild, which renews
  // the liveness of the workers connected then.
  int rebuilds();

 private:
  // Sorts in policy order: higher priority first, then lower seq (then id, for a total order).
  using Key = std::tuple<int32_t, int64_t, std::string>;  // (-priority, seq, job id)

  Mutex mu_;
  std::set<Key> order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Key> keys_ ABSL_GUARDED_BY(mu_);  // job id -> its key in order_
  bool intact_ ABSL_GUARDED_BY(mu_) = true;
  int rebuilds_ ABSL_GUARDED_BY(mu_) = 0;
};

// Heartbeat expiry by a Clock (FakeClock in tests). `clock` must outlive the object.
class InMemoryLiveness : public Liveness {
 public:
  explicit InMemoryLiveness(const Clock* clock);

  absl::Status Beat(const std::string& worker_id, int64_t ttl_ms) override;
  absl::StatusOr<std::set<std::string>> Alive(const std::vector<std::string>& worker_ids) override;

 private:
  const Clock* clock_;
  Mutex mu_;
  std::map<std::string, int64_t> expires_at_ms_ ABSL_GUARDED_BY(mu_);
};

// Lease expiry by a Clock (FakeClock in tests). `clock` must outlive the object.
class InMemoryLeaderLease : public LeaderLease {
 public:
  explicit InMemoryLeaderLease(const Clock* clock);

  absl::StatusOr<bool> Hold(const std::string& holder, int64_t ttl_ms) override;
  absl::Status Release(const std::string& holder) override;

 private:
  const Clock* clock_;
  Mutex mu_;
  std::string holder_ ABSL_GUARDED_BY(mu_);
  int64_t expires_at_ms_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_IN_MEMORY_COORDINATION_H_
