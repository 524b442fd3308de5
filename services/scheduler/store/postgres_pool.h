// PostgresPool: a fixed number of libpqxx connections shared by the threads of one process.
// Run() borrows a connection (waiting at most acquire_timeout_ms while all are busy), calls the
// function and turns every libpqxx exception into a Status, so none leaves the store. A
// connection found broken is dropped: that call returns UNAVAILABLE and the next use of the
// slot connects again. Every call is bounded in time even when the server hangs (SIGSTOP, a
// dead host): the server enforces statement_timeout, and a watchdog thread shuts the socket of a
// call that passed call_timeout_ms, which a server that answers nothing cannot do. Messages name
// the database as host:port/dbname, never the password. Thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_POSTGRES_POOL_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_POSTGRES_POOL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace ringmaster::scheduler {

// "host:port/dbname" of a libpq URL ("postgresql://user:pw@host:port/db?...") or key=value
// conninfo, for messages; the password is never included.
std::string DescribePostgresUrl(const std::string& url);

struct PostgresPoolOptions {
  int connect_timeout_s = 5;          // unless the URL sets connect_timeout
  int64_t acquire_timeout_ms = 5000;  // wait for a free connection, then UNAVAILABLE
  int64_t statement_timeout_ms = 5000;
  int64_t call_timeout_ms = 10000;    // one Run() call, all its statements and the commit
};

class PostgresPool {
 public:
  // Runs on every new connection before its first use, e.g. to prepare statements. May throw.
  using Setup = std::function<void(pqxx::connection&)>;

  // Opens the first connection now (UNAVAILABLE naming the database when it cannot), the others
  // on first use. `size` >= 1.
  static absl::StatusOr<std::unique_ptr<PostgresPool>> Connect(
      const std::string& url, int size, Setup setup, PostgresPoolOptions options = {});
  ~PostgresPool();
  PostgresPool(const PostgresPool&) = delete;
  PostgresPool& operator=(const PostgresPool&) = delete;

  // Calls `fn` with a connection of its own for the duration of the call.
  absl::Status Run(const std::function<absl::Status(pqxx::connection&)>& fn);
  template <typename T>
  absl::StatusOr<T> Run(const std::function<absl::StatusOr<T>(pqxx::connection&)>& fn) {
    std::optional<T> value;
    absl::Status status = Run([&](pqxx::connection& conn) -> absl::Status {
      absl::StatusOr<T> result = fn(conn);
      if (!result.ok()) return result.status();
      value = std::move(result).value();
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return std::move(*value);
  }

  // "host:port/dbname".
  const std::string& database() const { return database_; }
  int size() const { return static_cast<int>(slots_.size()); }

 private:
  // A connection lent out, as the watchdog sees it.
  struct Lent {
    int socket = -1;
    std::chrono::steady_clock::time_point deadline;
    bool timed_out = false;
  };

  PostgresPool(std::string url, std::string database, int size, Setup setup,
               PostgresPoolOptions options);
  absl::StatusOr<std::unique_ptr<pqxx::connection>> Open();
  void Watchdog();

  const std::string url_;       // with connect_timeout
  const std::string database_;  // for messages
  const Setup setup_;
  const PostgresPoolOptions options_;
  Mutex mu_;
  CondVar free_cv_;
  // A slot's connection is null until first use and after it broke. Not under mu_: a slot
  // belongs to the call that took it from free_ (and the vector's size never changes).
  std::vector<std::unique_ptr<pqxx::connection>> slots_;
  std::vector<int> free_ ABSL_GUARDED_BY(mu_);                  // indices of slots not lent out
  std::vector<std::optional<Lent>> lent_ ABSL_GUARDED_BY(mu_);  // by slot, while a call runs on it
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  CondVar watchdog_cv_;
  std::thread watchdog_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_POSTGRES_POOL_H_
