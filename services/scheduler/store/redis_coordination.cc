#include "scheduler/store/redis_coordination.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "scheduler/store/store_checks.h"

namespace ringmaster::scheduler {
namespace {

using store_internal::CheckBeat;
using store_internal::CheckLease;
using store_internal::CheckQueueEntry;

// Rebuild sends ZADD in pieces of this many members to bound one command's size.
constexpr size_t kZaddChunk = 1000;

int64_t IntegerScore(const QueueEntry& entry) {
  return int64_t{store_internal::kMaxPriority - entry.priority} * store_internal::kSeqLimit +
         entry.seq;
}

// Error replies inside an EXEC result fail the transaction's caller too.
absl::Status ExecStatus(const redisReply& exec) {
  if (exec.type == REDIS_REPLY_NIL) return absl::AbortedError("EXEC: transaction discarded");
  RM_RETURN_IF_ERROR(redis_internal::ReplyStatus(exec));
  for (size_t i = 0; i < exec.elements; ++i) {
    RM_RETURN_IF_ERROR(redis_internal::ReplyStatus(*exec.element[i]));
  }
  return absl::OkStatus();
}

}  // namespace

RedisPendingQueue::RedisPendingQueue(std::shared_ptr<RedisConnection> redis)
    : redis_(std::move(redis)),
      queue_key_(redis_->Key("pending")),
      marker_key_(redis_->Key("pending:intact")) {}

double RedisPendingQueue::Score(const QueueEntry& entry) {
  return static_cast<double>(IntegerScore(entry));
}

absl::Status RedisPendingQueue::Push(const QueueEntry& entry) {
  RM_RETURN_IF_ERROR(CheckQueueEntry(entry));
  return redis_->Command({"ZADD", queue_key_, std::to_string(IntegerScore(entry)), entry.job_id})
      .status();
}

absl::Status RedisPendingQueue::Remove(const std::string& job_id) {
  return redis_->Command({"ZREM", queue_key_, job_id}).status();
}

absl::Status RedisPendingQueue::Apply(const Changes& changes) {
  std::vector<std::vector<std::string>> commands;
  std::vector<std::string> zadd = {"ZADD", queue_key_};
  std::vector<std::string> zrem = {"ZREM", queue_key_};
  for (const auto& [id, entry] : changes) {
    if (!entry) {
      zrem.push_back(id);
    } else {
      RM_RETURN_IF_ERROR(CheckQueueEntry(*entry));
      zadd.push_back(std::to_string(IntegerScore(*entry)));
      zadd.push_back(entry->job_id);
    }
    // Bounds one command's size, as Rebuild does.
    if (zadd.size() >= 2 + 2 * kZaddChunk) {
      commands.push_back(std::exchange(zadd, {"ZADD", queue_key_}));
    }
    if (zrem.size() >= 2 + kZaddChunk) {
      commands.push_back(std::exchange(zrem, {"ZREM", queue_key_}));
    }
  }
  if (zadd.size() > 2) commands.push_back(std::move(zadd));
  if (zrem.size() > 2) commands.push_back(std::move(zrem));
  if (commands.empty()) return absl::OkStatus();
  RM_ASSIGN_OR_RETURN(auto replies, redis_->Pipeline(commands));
  for (const auto& reply : replies) {
    if (auto status = redis_internal::ReplyStatus(*reply); !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("redis at ", redis_->options().Address(),
                                                      ": updating the queue: ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> RedisPendingQueue::List() {
  RM_ASSIGN_OR_RETURN(RedisReply reply, redis_->Command({"ZRANGE", queue_key_, "0", "-1"}));
  if (reply->type != REDIS_REPLY_ARRAY) return absl::InternalError("ZRANGE: not an array");
  std::vector<std::string> ids;
  ids.reserve(reply->elements);
  for (size_t i = 0; i < reply->elements; ++i) {
    ids.emplace_back(reply->element[i]->str, reply->element[i]->len);
  }
  return ids;
}

absl::Status RedisPendingQueue::Rebuild(const std::vector<QueueEntry>& entries) {
  for (const auto& entry : entries) RM_RETURN_IF_ERROR(CheckQueueEntry(entry));
  std::vector<std::vector<std::string>> commands;
  commands.push_back({"MULTI"});
  commands.push_back({"DEL", queue_key_});
  for (size_t begin = 0; begin < entries.size(); begin += kZaddChunk) {
    std::vector<std::string> zadd = {"ZADD", queue_key_};
    for (size_t i = begin; i < entries.size() && i < begin + kZaddChunk; ++i) {
      zadd.push_back(std::to_string(IntegerScore(entries[i])));
      zadd.push_back(entries[i].job_id);
    }
    commands.push_back(std::move(zadd));
  }
  commands.push_back({"SET", marker_key_, "1"});
  commands.push_back({"EXEC"});
  RM_ASSIGN_OR_RETURN(auto replies, redis_->Pipeline(commands));
  // Queued commands answer QUEUED or an error (then EXEC fails with EXECABORT).
  for (size_t i = 0; i + 1 < replies.size(); ++i) {
    if (auto status = redis_internal::ReplyStatus(*replies[i]); !status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("redis at ", redis_->options().Address(),
                                       ": rebuilding the queue: ", status.message()));
    }
  }
  if (auto status = ExecStatus(*replies.back()); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("redis at ", redis_->options().Address(),
                                                    ": rebuilding the queue: ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> RedisPendingQueue::Intact() {
  RM_ASSIGN_OR_RETURN(RedisReply reply, redis_->Command({"EXISTS", marker_key_}));
  if (reply->type != REDIS_REPLY_INTEGER) return absl::InternalError("EXISTS: not an integer");
  return reply->integer == 1;
}

RedisLiveness::RedisLiveness(std::shared_ptr<RedisConnection> redis) : redis_(std::move(redis)) {}

absl::Status RedisLiveness::Beat(const std::string& worker_id, int64_t ttl_ms) {
  RM_RETURN_IF_ERROR(CheckBeat(worker_id, ttl_ms));
  return redis_
      ->Command({"SET", redis_->Key(absl::StrCat("alive:", worker_id)), "1", "PX",
                 std::to_string(ttl_ms)})
      .status();
}

absl::StatusOr<std::set<std::string>> RedisLiveness::Alive(
    const std::vector<std::string>& worker_ids) {
  std::set<std::string> alive;
  if (worker_ids.empty()) return alive;
  std::vector<std::string> argv = {"MGET"};
  for (const auto& id : worker_ids) argv.push_back(redis_->Key(absl::StrCat("alive:", id)));
  RM_ASSIGN_OR_RETURN(RedisReply reply, redis_->Command(argv));
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != worker_ids.size()) {
    return absl::InternalError("MGET: unexpected reply");
  }
  for (size_t i = 0; i < worker_ids.size(); ++i) {
    if (reply->element[i]->type != REDIS_REPLY_NIL) alive.insert(worker_ids[i]);
  }
  return alive;
}

RedisLeaderLease::RedisLeaderLease(std::shared_ptr<RedisConnection> redis)
    : redis_(std::move(redis)), key_(redis_->Key("leader")) {}

absl::StatusOr<bool> RedisLeaderLease::Hold(const std::string& holder, int64_t ttl_ms) {
  RM_RETURN_IF_ERROR(CheckLease(holder, ttl_ms));
  constexpr const char* kHold =
      "local v = redis.call('GET', KEYS[1])\n"
      "if v and v ~= ARGV[1] then return 0 end\n"
      "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
      "return 1\n";
  RM_ASSIGN_OR_RETURN(RedisReply reply,
                      redis_->Command({"EVAL", kHold, "1", key_, holder, std::to_string(ttl_ms)}));
  if (reply->type != REDIS_REPLY_INTEGER) return absl::InternalError("lease EVAL: unexpected reply");
  return reply->integer == 1;
}

absl::Status RedisLeaderLease::Release(const std::string& holder) {
  constexpr const char* kRelease =
      "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end\n"
      "return 0\n";
  return redis_->Command({"EVAL", kRelease, "1", key_, holder}).status();
}

}  // namespace ringmaster::scheduler
