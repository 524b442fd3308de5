#include "scheduler/store/postgres_pool.h"

#include <sys/socket.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace ringmaster::scheduler {
namespace {

// SQLSTATE classes that mean the server went away or cannot take us now: retry later.
bool IsUnavailableState(const std::string& sqlstate) {
  return absl::StartsWith(sqlstate, "08") ||   // connection exception
         absl::StartsWith(sqlstate, "57P") ||  // admin/crash shutdown, cannot connect now
         absl::StartsWith(sqlstate, "53");     // insufficient resources (too many connections)
}

// Translates the exception being handled (call only inside a catch block). Sets *broken when
// the connection can no longer be used.
absl::Status StatusFromCurrentException(const std::string& database, bool* broken) {
  auto where = [&](const std::string& what) {
    return absl::StrCat("postgres at ", database, ": ", what);
  };
  try {
    throw;
  } catch (const pqxx::broken_connection& e) {
    *broken = true;
    return absl::UnavailableError(where(absl::StrCat("connection lost: ", e.what())));
  } catch (const pqxx::in_doubt_error& e) {
    *broken = true;
    return absl::UnavailableError(
        where(absl::StrCat("connection lost during commit, outcome unknown: ", e.what())));
  } catch (const pqxx::unique_violation& e) {
    return absl::AlreadyExistsError(where(e.what()));
  } catch (const pqxx::foreign_key_violation& e) {
    return absl::FailedPreconditionError(where(e.what()));
  } catch (const pqxx::check_violation& e) {
    return absl::InvalidArgumentError(where(e.what()));
  } catch (const pqxx::not_null_violation& e) {
    return absl::InvalidArgumentError(where(e.what()));
  } catch (const pqxx::transaction_rollback& e) {
    // Serialization failure, deadlock: the transaction can be retried as a whole.
    return absl::AbortedError(where(e.what()));
  } catch (const pqxx::sql_error& e) {
    if (IsUnavailableState(e.sqlstate())) {
      *broken = true;
      return absl::UnavailableError(where(e.what()));
    }
    return absl::InternalError(
        where(absl::StrCat(e.what(), " (SQLSTATE ", e.sqlstate(), ") in: ", e.query())));
  } catch (const pqxx::conversion_error& e) {
    return absl::DataLossError(where(absl::StrCat("stored value does not convert: ", e.what())));
  } catch (const std::exception& e) {
    return absl::InternalError(where(e.what()));
  } catch (...) {
    return absl::InternalError(where("unknown exception"));
  }
}

std::string WithConnectTimeout(const std::string& url, int seconds) {
  if (absl::StrContains(url, "connect_timeout")) return url;
  std::string param = absl::StrCat("connect_timeout=", seconds);
  if (absl::StrContains(url, "://")) {
    return absl::StrCat(url, absl::StrContains(url, "?") ? "&" : "?", param);
  }
  return absl::StrCat(url, " ", param);
}

}  // namespace

std::string DescribePostgresUrl(const std::string& url) {
  std::string host = "localhost";
  std::string port = "5432";
  std::string dbname;
  auto scheme = url.find("://");
  if (scheme != std::string::npos) {
    std::string rest = url.substr(scheme + 3);
    std::string query;
    if (auto q = rest.find('?'); q != std::string::npos) {
      query = rest.substr(q + 1);
      rest.resize(q);
    }
    if (auto slash = rest.find('/'); slash != std::string::npos) {
      dbname = rest.substr(slash + 1);
      rest.resize(slash);
    }
    if (auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
    if (!rest.empty()) {
      auto colon = rest.rfind(':');
      bool bracketed_v6 = !rest.empty() && rest.back() == ']';
      if (colon != std::string::npos && !bracketed_v6) {
        port = rest.substr(colon + 1);
        rest.resize(colon);
      }
      if (!rest.empty()) host = rest;
    }
    for (absl::string_view kv : absl::StrSplit(query, '&', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      if (p.first == "host") host = p.second;
      if (p.first == "port") port = p.second;
      if (p.first == "dbname") dbname = p.second;
    }
  } else {
    for (absl::string_view kv : absl::StrSplit(url, ' ', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      if (p.first == "host" || p.first == "hostaddr") host = p.second;
      if (p.first == "port") port = p.second;
      if (p.first == "dbname") dbname = p.second;
    }
  }
  return absl::StrCat(host, ":", port, "/", dbname);
}

absl::StatusOr<std::unique_ptr<PostgresPool>> PostgresPool::Connect(const std::string& url,
                                                                    int size, Setup setup,
                                                                    PostgresPoolOptions options) {
  if (size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("postgres pool size must be at least 1, got ", size));
  }
  if (options.acquire_timeout_ms < 1 || options.statement_timeout_ms < 1 ||
      options.call_timeout_ms < 1 || options.connect_timeout_s < 1) {
    return absl::InvalidArgumentError("postgres pool timeouts must be positive");
  }
  std::unique_ptr<PostgresPool> pool(
      new PostgresPool(WithConnectTimeout(url, options.connect_timeout_s),
                       DescribePostgresUrl(url), size, std::move(setup), options));
  RM_ASSIGN_OR_RETURN(pool->slots_[0], pool->Open());
  return pool;
}

PostgresPool::PostgresPool(std::string url, std::string database, int size, Setup setup,
                           PostgresPoolOptions options)
    : url_(std::move(url)),
      database_(std::move(database)),
      setup_(std::move(setup)),
      options_(options),
      slots_(size),
      lent_(size) {
  for (int i = size - 1; i >= 0; --i) free_.push_back(i);
  watchdog_ = std::thread([this] { Watchdog(); });
}

PostgresPool::~PostgresPool() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  watchdog_cv_.NotifyAll();
  watchdog_.join();
}

// A server that hangs (SIGSTOP, a host gone without a reset) never answers, and libpq waits
// for it without limit. Shutting the socket down makes that wait end with a broken connection,
// which the caller's Run() turns into UNAVAILABLE and drops. The socket is only touched while
// its call is registered in lent_, so a closed and reused descriptor is never shut.
void PostgresPool::Watchdog() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    watchdog_cv_.WaitFor(&mu_, std::chrono::milliseconds(100));
    const auto now = std::chrono::steady_clock::now();
    for (auto& lent : lent_) {
      if (!lent || lent->timed_out || lent->socket < 0 || now < lent->deadline) continue;
      lent->timed_out = true;
      ::shutdown(lent->socket, SHUT_RDWR);
    }
  }
}

absl::StatusOr<std::unique_ptr<pqxx::connection>> PostgresPool::Open() {
  try {
    auto conn = std::make_unique<pqxx::connection>(url_);
    {
      // NOTICEs such as "relation already exists, skipping" are noise in our logs. The server
      // ends a statement (or a wait for a row lock) that runs too long.
      pqxx::nontransaction tx(*conn);
      tx.exec("SET client_min_messages TO warning");
      tx.exec(absl::StrCat("SET statement_timeout = ", options_.statement_timeout_ms));
      tx.exec(absl::StrCat("SET lock_timeout = ", options_.statement_timeout_ms));
    }
    if (setup_) setup_(*conn);
    return conn;
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to postgres at ", database_, ": ", e.what()));
  } catch (...) {
    bool broken = false;
    return StatusFromCurrentException(database_, &broken);
  }
}

absl::Status PostgresPool::Run(const std::function<absl::Status(pqxx::connection&)>& fn) {
  int slot;
  {
    MutexLock lock(&mu_);
    if (!free_cv_.WaitFor(&mu_, std::chrono::milliseconds(options_.acquire_timeout_ms),
                          [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !free_.empty(); })) {
      return absl::UnavailableError(
          absl::StrCat("postgres at ", database_, ": all ", slots_.size(),
                       " connections busy for ", options_.acquire_timeout_ms, " ms"));
    }
    slot = free_.back();
    free_.pop_back();
  }
  // While lent out, slots_[slot] is touched by this thread only.
  std::unique_ptr<pqxx::connection>& conn = slots_[slot];
  absl::Status status;
  if (conn != nullptr && !conn->is_open()) conn.reset();
  if (conn == nullptr) {
    auto opened = Open();
    if (opened.ok()) {
      conn = std::move(*opened);
    } else {
      status = opened.status();
    }
  }
  if (conn != nullptr) {
    {
      MutexLock lock(&mu_);
      lent_[slot] = Lent{conn->sock(), std::chrono::steady_clock::now() +
                                           std::chrono::milliseconds(options_.call_timeout_ms),
                         false};
    }
    bool broken = false;
    try {
      status = fn(*conn);
    } catch (...) {
      status = StatusFromCurrentException(database_, &broken);
    }
    bool timed_out;
    {
      MutexLock lock(&mu_);
      timed_out = lent_[slot]->timed_out;
      lent_[slot].reset();
    }
    if (timed_out) {
      broken = true;
      status = absl::UnavailableError(absl::StrCat("postgres at ", database_, ": no answer within ",
                                                   options_.call_timeout_ms,
                                                   " ms; connection dropped"));
    }
    if (broken) conn.reset();
  }
  {
    MutexLock lock(&mu_);
    free_.push_back(slot);
  }
  free_cv_.NotifyOne();
  return status;
}

}  // namespace ringmaster::scheduler
