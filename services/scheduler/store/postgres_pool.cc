#include "store/postgres_pool.h"

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
                                                                    int connect_timeout_s) {
  if (size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("postgres pool size must be at least 1, got ", size));
  }
  std::unique_ptr<PostgresPool> pool(new PostgresPool(WithConnectTimeout(url, connect_timeout_s),
                                                      DescribePostgresUrl(url), size,
                                                      std::move(setup)));
  RM_ASSIGN_OR_RETURN(pool->slots_[0], pool->Open());
  return pool;
}

PostgresPool::PostgresPool(std::string url, std::string database, int size, Setup setup)
    : url_(std::move(url)), database_(std::move(database)), setup_(std::move(setup)), slots_(size) {
  for (int i = size - 1; i >= 0; --i) free_.push_back(i);
}

absl::StatusOr<std::unique_ptr<pqxx::connection>> PostgresPool::Open() {
  try {
    auto conn = std::make_unique<pqxx::connection>(url_);
    {
      // NOTICEs such as "relation already exists, skipping" are noise in our logs.
      pqxx::nontransaction tx(*conn);
      tx.exec("SET client_min_messages TO warning");
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
    std::unique_lock<std::mutex> lock(mu_);
    free_cv_.wait(lock, [this] { return !free_.empty(); });
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
    bool broken = false;
    try {
      status = fn(*conn);
    } catch (...) {
      status = StatusFromCurrentException(database_, &broken);
    }
    if (broken) conn.reset();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(slot);
  }
  free_cv_.notify_one();
  return status;
}

}  // namespace ringmaster::scheduler
