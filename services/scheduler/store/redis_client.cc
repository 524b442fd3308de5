#include "scheduler/store/redis_client.h"

#include <poll.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"

namespace ringmaster::scheduler {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

std::vector<const char*> ArgvPointers(const std::vector<std::string>& argv,
                                      std::vector<size_t>* lengths) {
  std::vector<const char*> pointers;
  pointers.reserve(argv.size());
  lengths->clear();
  for (const auto& arg : argv) {
    pointers.push_back(arg.data());
    lengths->push_back(arg.size());
  }
  return pointers;
}

// Frees a context on every path out of a connect.
struct ContextCloser {
  void operator()(redisContext* ctx) const { redisFree(ctx); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextCloser>;

// Connects with the connect timeout, then applies the command timeout and TCP keep-alive.
absl::StatusOr<ContextPtr> OpenContext(const RedisOptions& options) {
  ContextPtr ctx(redisConnectWithTimeout(options.host.c_str(), options.port,
                                         ToTimeval(options.connect_timeout)));
  if (ctx == nullptr || ctx->err != 0) {
    return redis_internal::CallError("redisConnectWithTimeout(host, port, connect_timeout)",
                                     __FILE__, __LINE__, ctx.get());
  }
  RM_REDIS_CHECK(ctx.get(), redisSetTimeout(ctx.get(), ToTimeval(options.command_timeout)));
  RM_REDIS_CHECK(ctx.get(), redisEnableKeepAlive(ctx.get()));
  return ctx;
}

}  // namespace

std::string RedisOptions::Address() const { return absl::StrCat(host, ":", port); }

absl::Status ParseRedisAddress(const std::string& addr, const std::string& what,
                               RedisOptions* options) {
  return SplitHostPort(addr, what, &options->host, &options->port);
}

namespace redis_internal {

absl::Status CallError(const char* call, const char* file, int line, const redisContext* ctx) {
  std::string why;
  if (ctx == nullptr) {
    why = "cannot allocate a context";
  } else if (ctx->err != 0) {
    why = ctx->errstr;
  } else if (ctx->reader != nullptr && ctx->reader->err != 0) {
    why = ctx->reader->errstr;
  } else {
    why = "unknown error";
  }
  return absl::UnavailableError(absl::StrCat(call, " failed at ", file, ":", line, ": ", why));
}

absl::Status ReplyStatus(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ERROR) return absl::OkStatus();
  std::string text(reply.str, reply.len);
  for (const char* busy : {"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN"}) {
    if (absl::StartsWith(text, busy)) return absl::UnavailableError(text);
  }
  if (absl::StartsWith(text, "OOM")) return absl::ResourceExhaustedError(text);
  return absl::InternalError(text);
}

}  // namespace redis_internal

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(RedisOptions options) {
  auto connection = std::make_unique<RedisConnection>(std::move(options));
  MutexLock lock(&connection->mu_);
  if (auto status = connection->EnsureConnectedLocked(); !status.ok()) return status;
  return connection;
}

RedisConnection::RedisConnection(RedisOptions options) : options_(std::move(options)) {}

RedisConnection::~RedisConnection() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

std::string RedisConnection::Key(const std::string& name) const {
  return absl::StrCat(options_.key_prefix, name);
}

absl::Status RedisConnection::Annotate(const absl::Status& status) const {
  return absl::Status(status.code(), absl::StrCat("redis at ", options_.Address(), " (db ",
                                                  options_.db, "): ", status.message()));
}

absl::Status RedisConnection::TransportFailed(const absl::Status& status) {
  if (ctx_ != nullptr) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  return Annotate(status);
}

absl::Status RedisConnection::EnsureConnectedLocked() {
  if (ctx_ != nullptr) return absl::OkStatus();
  auto ctx = OpenContext(options_);
  if (!ctx.ok()) return Annotate(ctx.status());
  if (options_.db != 0) {
    std::string db = std::to_string(options_.db);
    std::array<const char*, 2> argv = {"SELECT", db.c_str()};
    std::array<size_t, 2> lengths = {6, db.size()};
    redisContext* raw = ctx->get();
    auto select = [&]() -> absl::Status {
      RM_REDIS_REPLY_OR_RETURN(reply, raw, redisCommandArgv(raw, 2, argv.data(), lengths.data()));
      if (auto status = redis_internal::ReplyStatus(*reply); !status.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("SELECT ", options_.db, ": ", status.message()));
      }
      return absl::OkStatus();
    };
    if (auto status = select(); !status.ok()) return Annotate(status);
  }
  ctx_ = ctx->release();
  return absl::OkStatus();
}

absl::StatusOr<RedisReply> RedisConnection::Command(const std::vector<std::string>& argv) {
  MutexLock lock(&mu_);
  auto replies = PipelineLocked({argv});
  if (!replies.ok()) return replies.status();
  RedisReply reply = std::move(replies->front());
  if (auto status = redis_internal::ReplyStatus(*reply); !status.ok()) {
    return Annotate(absl::Status(
        status.code(), absl::StrCat(argv.empty() ? "" : argv[0], ": ", status.message())));
  }
  return reply;
}

absl::StatusOr<std::vector<RedisReply>> RedisConnection::Pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  MutexLock lock(&mu_);
  return PipelineLocked(commands);
}

absl::StatusOr<std::vector<RedisReply>> RedisConnection::PipelineLocked(
    const std::vector<std::vector<std::string>>& commands) {
  if (auto status = EnsureConnectedLocked(); !status.ok()) return status;
  auto run = [&](std::vector<RedisReply>* replies)
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    std::vector<size_t> lengths;
    for (const auto& command : commands) {
      auto argv = ArgvPointers(command, &lengths);
      RM_REDIS_CHECK(ctx_, redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(),
                                                  lengths.data()));
    }
    for (size_t i = 0; i < commands.size(); ++i) {
      void* raw = nullptr;
      RM_REDIS_CHECK(ctx_, redisGetReply(ctx_, &raw));
      replies->emplace_back(static_cast<redisReply*>(raw));
    }
    return absl::OkStatus();
  };
  std::vector<RedisReply> replies;
  if (auto status = run(&replies); !status.ok()) return TransportFailed(status);
  return replies;
}

}  // namespace ringmaster::scheduler
