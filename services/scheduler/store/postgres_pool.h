// PostgresPool: a fixed number of libpqxx connections shared by the threads of one process.
// Run() borrows a connection (waiting while all are busy), calls the function and turns every
// libpqxx exception into a Status, so none leaves the store. A connection found broken is
// dropped: that call returns UNAVAILABLE and the next use of the slot connects again. Messages
// name the database as host:port/dbname, never the password. Thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_POSTGRES_POOL_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_POSTGRES_POOL_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::scheduler {

// "host:port/dbname" of a libpq URL ("postgresql://user:pw@host:port/db?...") or key=value
// conninfo, for messages; the password is never included.
std::string DescribePostgresUrl(const std::string& url);

class PostgresPool {
 public:
  // Runs on every new connection before its first use, e.g. to prepare statements. May throw.
  using Setup = std::function<void(pqxx::connection&)>;

  // Opens the first connection now (UNAVAILABLE naming the database when it cannot), the others
  // on first use. `size` >= 1. Unless the URL sets connect_timeout, connecting gives up after
  // `connect_timeout_s` seconds.
  static absl::StatusOr<std::unique_ptr<PostgresPool>> Connect(const std::string& url, int size,
                                                               Setup setup,
                                                               int connect_timeout_s = 5);
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
  PostgresPool(std::string url, std::string database, int size, Setup setup);
  absl::StatusOr<std::unique_ptr<pqxx::connection>> Open();

  const std::string url_;       // with connect_timeout
  const std::string database_;  // for messages
  const Setup setup_;
  std::mutex mu_;
  std::condition_variable free_cv_;
  // A slot's connection is null until first use and after it broke.
  std::vector<std::unique_ptr<pqxx::connection>> slots_;
  std::vector<int> free_;  // indices of slots not lent out
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_POSTGRES_POOL_H_
