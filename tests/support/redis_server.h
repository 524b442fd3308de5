// RedisServer: a throw-away redis-server for one test, on a free 127.0.0.1 port, with no
// persistence (a restart comes back empty, as a crashed cache would). It can be stopped and
// started again on the same port, to test clients that must survive a Redis outage. Not
// thread-safe: drive it from the test's main thread.
#ifndef RINGMASTER_TESTS_SUPPORT_REDIS_SERVER_H_
#define RINGMASTER_TESTS_SUPPORT_REDIS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "support/subprocess.h"

namespace ringmaster::test {

class RedisServer {
 public:
  // A RedisServer that has been started, or why it could not be.
  static absl::StatusOr<std::unique_ptr<RedisServer>> StartNew();

  RedisServer() = default;
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer();

  // Starts redis-server and waits (up to 10 s) until it answers PING. The first start picks a
  // free port; later ones reuse it. FAILED_PRECONDITION when already running.
  absl::Status Start();
  // Stops the server (SIGTERM, then SIGKILL). OK when it is not running.
  absl::Status Stop();
  // FLUSHALL: every database emptied, the server keeps running.
  absl::Status Flush();
  // SIGSTOP: the server accepts TCP but answers nothing, as a hung host would. Resume() sends
  // SIGCONT. Stop() and the destructor resume a paused server first.
  absl::Status Pause();
  absl::Status Resume();

  bool running() const;
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // "127.0.0.1:PORT".
  std::string addr() const;
  // The server's log (of its current or last run), for failure messages.
  std::string LogTail() const;

 private:
  absl::Status StartOnce();

  std::string host_ = "127.0.0.1";
  int port_ = 0;
  std::unique_ptr<Subprocess> process_;
  std::string last_log_;
  bool paused_ = false;
};

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_REDIS_SERVER_H_
