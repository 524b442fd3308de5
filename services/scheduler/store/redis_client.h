// A small synchronous Redis client over hiredis: RedisConnection for commands, shared by the
// Redis-backed stores. Every failure comes back
// as a Status naming the server: UNAVAILABLE when Redis cannot be reached or the connection
// broke (the next call reconnects), the error reply's text otherwise. hiredis return codes are
// checked at each call with the RM_REDIS_* macros, which keep the call text, file:line and
// hiredis' own message.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_REDIS_CLIENT_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_REDIS_CLIENT_H_

#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace ringmaster::scheduler {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // SELECTed on every (re)connect. Pub/sub channels are not per database: the key prefix is
  // what keeps two users of one server apart there.
  int db = 0;
  // Put in front of every key and channel name.
  std::string key_prefix = "rm:";
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{1000};

  // "host:port" for messages.
  std::string Address() const;
};

// Fills host and port from "HOST:PORT"; INVALID_ARGUMENT naming `what` when malformed.
absl::Status ParseRedisAddress(const std::string& addr, const std::string& what,
                               RedisOptions* options);

struct RedisReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

namespace redis_internal {
// The Status for a failed hiredis call: UNAVAILABLE with the call text, where it was made and
// the context's error (ctx may be null).
absl::Status CallError(const char* call, const char* file, int line, const redisContext* ctx);
// OK for a reply that is not an error; else a Status from the error text (LOADING, BUSY,
// MASTERDOWN, TRYAGAIN: UNAVAILABLE; OOM: RESOURCE_EXHAUSTED; others: INTERNAL).
absl::Status ReplyStatus(const redisReply& reply);
}  // namespace redis_internal

// `call` returns REDIS_OK or REDIS_ERR (redisAppendCommandArgv, redisGetReply, ...).
#define RM_REDIS_CHECK(ctx, call)                                                                  \
  do {                                                                                             \
    if ((call) != REDIS_OK) {                                                                      \
      return ::ringmaster::scheduler::redis_internal::CallError(#call, __FILE__, __LINE__, (ctx)); \
    }                                                                                              \
  } while (false)

// `call` returns a reply, or NULL with the error in ctx (redisCommandArgv). `var` names the
// variable it declares, so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define RM_REDIS_REPLY_OR_RETURN(var, ctx, call)                                                 \
  ::ringmaster::scheduler::RedisReply var(static_cast<redisReply*>(call));                       \
  if (var == nullptr) {                                                                          \
    return ::ringmaster::scheduler::redis_internal::CallError(#call, __FILE__, __LINE__, (ctx)); \
  }
// NOLINTEND(bugprone-macro-parentheses)

// A command connection. Connects lazily and again after any transport error (the failed call
// returns UNAVAILABLE; nothing is retried behind the caller's back, so a command runs at most
// once). Thread-safe: a mutex serializes commands on the one connection.
class RedisConnection {
 public:
  // Connects now: UNAVAILABLE when Redis cannot be reached, INVALID_ARGUMENT for a bad db.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(RedisOptions options);
  // Connects on first use.
  explicit RedisConnection(RedisOptions options);
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;
  ~RedisConnection();

  const RedisOptions& options() const { return options_; }
  // key_prefix + name.
  std::string Key(const std::string& name) const;

  // One command, arguments binary-safe. An error reply is a non-OK Status.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& argv);
  // Sends every command, then reads every reply, in one round trip. A transport error fails the
  // whole call; error replies are returned as replies (check each, e.g. with ReplyStatus).
  absl::StatusOr<std::vector<RedisReply>> Pipeline(
      const std::vector<std::vector<std::string>>& commands);

 private:
  absl::Status EnsureConnectedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<RedisReply>> PipelineLocked(
      const std::vector<std::vector<std::string>>& commands) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A transport failure: drops the connection (the next call reconnects) and names the server.
  absl::Status TransportFailed(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Names the server in a failure that leaves the connection usable (an error reply).
  absl::Status Annotate(const absl::Status& status) const;

  const RedisOptions options_;
  Mutex mu_;
  redisContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;  // null: connect on next use
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_REDIS_CLIENT_H_
