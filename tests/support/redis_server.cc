#include "support/redis_server.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

// One PING (or other command) on a fresh connection; OK when the reply is not an error.
absl::Status RunCommand(const std::string& host, int port, const char* command) {
  timeval timeout{1, 0};
  redisContext* ctx = redisConnectWithTimeout(host.c_str(), port, timeout);
  if (ctx == nullptr) return absl::UnavailableError("redisConnectWithTimeout: out of memory");
  if (ctx->err != 0) {
    std::string message = ctx->errstr;
    redisFree(ctx);
    return absl::UnavailableError(absl::StrCat("connect ", host, ":", port, ": ", message));
  }
  redisSetTimeout(ctx, timeout);
  auto* reply = static_cast<redisReply*>(redisCommand(ctx, command));
  absl::Status status;
  if (reply == nullptr) {
    status =
        absl::UnavailableError(absl::StrCat(command, " on ", host, ":", port, ": ", ctx->errstr));
  } else if (reply->type == REDIS_REPLY_ERROR) {
    status = absl::UnavailableError(
        absl::StrCat(command, " on ", host, ":", port, ": ", std::string(reply->str, reply->len)));
  }
  if (reply != nullptr) freeReplyObject(reply);
  redisFree(ctx);
  return status;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::StartNew() {
  auto server = std::make_unique<RedisServer>();
  if (auto status = server->Start(); !status.ok()) return status;
  return server;
}

RedisServer::~RedisServer() { (void)Stop(); }

bool RedisServer::running() const { return process_ != nullptr && process_->Running(); }

std::string RedisServer::addr() const { return absl::StrCat(host_, ":", port_); }

std::string RedisServer::LogTail() const {
  return process_ != nullptr ? process_->LogTail() : last_log_;
}

absl::Status RedisServer::Start() {
  if (running()) return absl::FailedPreconditionError("redis-server already running");
  if (port_ != 0) return StartOnce();
  // A free port can be taken by someone else before redis binds it: try a few.
  absl::Status status;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto port = PickFreePort(host_);
    if (!port.ok()) return port.status();
    port_ = *port;
    status = StartOnce();
    if (status.ok()) return status;
  }
  port_ = 0;
  return status;
}

absl::Status RedisServer::StartOnce() {
  process_.reset();
  auto process =
      Subprocess::Start({"redis-server", "--port", std::to_string(port_), "--bind", host_, "--save",
                         "", "--appendonly", "no", "--daemonize", "no"});
  if (!process.ok()) return process.status();
  process_ = std::move(*process);
  absl::Status last = absl::UnavailableError("not tried");
  bool up = WaitFor(
      [&] {
        if (!process_->Running()) return true;  // stop waiting; reported below
        last = RunCommand(host_, port_, "PING");
        return last.ok();
      },
      std::chrono::seconds(10), std::chrono::milliseconds(20));
  if (up && process_->Running()) return absl::OkStatus();
  std::string why = process_->Running() ? last.ToString() : "it exited";
  last_log_ = process_->LogTail();
  process_.reset();
  return absl::UnavailableError(absl::StrCat("redis-server on ", addr(), " did not come up (", why,
                                             "); its log:\n", last_log_));
}

absl::Status RedisServer::Stop() {
  if (process_ == nullptr) return absl::OkStatus();
  (void)Resume();  // a stopped process would wait out SIGTERM's grace
  auto code = process_->Stop(std::chrono::seconds(5));
  last_log_ = process_->LogTail();
  process_.reset();
  if (!code.ok()) return code.status();
  return absl::OkStatus();
}

absl::Status RedisServer::Pause() {
  if (!running()) return absl::FailedPreconditionError("redis-server is not running");
  if (kill(process_->pid(), SIGSTOP) != 0) return absl::InternalError("kill(SIGSTOP) failed");
  paused_ = true;
  return absl::OkStatus();
}

absl::Status RedisServer::Resume() {
  if (!paused_) return absl::OkStatus();
  paused_ = false;
  if (process_ == nullptr || kill(process_->pid(), SIGCONT) != 0) {
    return absl::InternalError("kill(SIGCONT) failed");
  }
  return absl::OkStatus();
}

absl::Status RedisServer::Flush() {
  if (!running()) return absl::FailedPreconditionError("redis-server is not running");
  return RunCommand(host_, port_, "FLUSHALL");
}

}  // namespace ringmaster::test
