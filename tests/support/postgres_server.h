// PostgresServer: a PostgreSQL cluster of a test's own, on a free loopback port, for tests that
// restart or freeze the database (the shared one of scripts/test serves other tests at the same
// time). Started with scripts/lib/pg.sh, as the postgres user when root.
#ifndef RINGMASTER_TESTS_SUPPORT_POSTGRES_SERVER_H_
#define RINGMASTER_TESTS_SUPPORT_POSTGRES_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::test {

class PostgresServer {
 public:
  // initdb in a fresh directory and start; UNAVAILABLE with the server's log when it fails.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // postgresql://postgres@127.0.0.1:PORT/postgres
  std::string admin_url() const;
  // A fast shutdown and a start on the same port and data: every connection breaks.
  absl::Status Restart();
  // SIGSTOP to the postmaster and every backend: the server accepts TCP but answers nothing,
  // as a hung host would. Resume() sends SIGCONT to the same processes.
  absl::Status Pause();
  absl::Status Resume();

 private:
  PostgresServer() = default;
  absl::Status Run(const std::string& what);

  std::string dir_;
  int port_ = 0;
  std::vector<pid_t> paused_;
};

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_POSTGRES_SERVER_H_
