// Redis-backed PendingQueue, Liveness and LeaderLease: the scheduler's rebuildable state, shared by
// every scheduler replica. They share one RedisConnection (commands are serialized on it);
// every key starts with the connection's key prefix. Redis down is UNAVAILABLE on
// every call, never a crash; the connection reconnects on the next call. All are thread-safe.
//
// Keys, with the default prefix "rm:":
//   rm:pending         ZSET of queued job ids, scored in policy order (see RedisPendingQueue)
//   rm:pending:intact  marker set by Rebuild; its absence means Redis lost the queue
//   rm:alive:<worker>  "1" with a TTL: the worker's last heartbeat
//   rm:leader          the leader lease: the holder, with a TTL
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_REDIS_COORDINATION_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_REDIS_COORDINATION_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "scheduler/store/coordination.h"
#include "scheduler/store/redis_client.h"

namespace ringmaster::scheduler {

// The queue is one sorted set whose score puts ZRANGE in policy order:
//
//   score = (1000 - priority) * 2^40 + seq
//
// priority is -1000..1000, so (1000 - priority) is 0..2000 (< 2^11) and higher priorities get
// lower scores; seq is 0..2^40-1, so it orders jobs within one priority without reaching the
// next. The largest score is below 2^51: every score is an integer a double holds exactly.
// Entries outside those ranges are INVALID_ARGUMENT.
class RedisPendingQueue : public PendingQueue {
 public:
  explicit RedisPendingQueue(std::shared_ptr<RedisConnection> redis);

  absl::Status Push(const QueueEntry& entry) override;
  absl::Status Remove(const std::string& job_id) override;
  // One pipeline: a ZADD of every entry and a ZREM of every id taken out.
  absl::Status Apply(const Changes& changes) override;
  absl::StatusOr<std::vector<std::string>> List() override;
  // One MULTI/EXEC: the queue is replaced and the marker set atomically.
  absl::Status Rebuild(const std::vector<QueueEntry>& entries) override;
  // Whether the marker key exists: false after a FLUSHALL or a restart with no persistence,
  // and before the first Rebuild.
  absl::StatusOr<bool> Intact() override;

  // The score of an entry (exposed for tests of the encoding).
  static double Score(const QueueEntry& entry);

 private:
  std::shared_ptr<RedisConnection> redis_;
  const std::string queue_key_;
  const std::string marker_key_;
};

// A heartbeat is a key with a TTL (SET PX); Alive reads all asked keys with one MGET.
class RedisLiveness : public Liveness {
 public:
  explicit RedisLiveness(std::shared_ptr<RedisConnection> redis);

  absl::Status Beat(const std::string& worker_id, int64_t ttl_ms) override;
  absl::StatusOr<std::set<std::string>> Alive(const std::vector<std::string>& worker_ids) override;

 private:
  std::shared_ptr<RedisConnection> redis_;
};

// The lease is one key holding the holder's name, with a TTL. Hold and Release are Lua scripts
// (EVAL), so reading the holder and changing the key are one atomic step in Redis.
class RedisLeaderLease : public LeaderLease {
 public:
  explicit RedisLeaderLease(std::shared_ptr<RedisConnection> redis);

  absl::StatusOr<bool> Hold(const std::string& holder, int64_t ttl_ms) override;
  absl::Status Release(const std::string& holder) override;

 private:
  std::shared_ptr<RedisConnection> redis_;
  std::string key_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_REDIS_COORDINATION_H_
