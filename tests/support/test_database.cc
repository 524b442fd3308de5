#include "support/test_database.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <pqxx/pqxx>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ringmaster::test {
namespace {

// Runs one statement outside a transaction block (CREATE/DROP DATABASE need that).
absl::Status ExecAdmin(const std::string& admin_url, const std::string& sql) {
  try {
    pqxx::connection conn(admin_url);
    pqxx::nontransaction tx(conn);
    tx.exec(sql);
    return absl::OkStatus();
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(absl::StrCat("cannot reach the test PostgreSQL (",
                                               TestDatabase::kAdminUrlEnv, "=", admin_url,
                                               "): ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(sql, ": ", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::string> TestDatabase::AdminUrl() {
  const char* url = std::getenv(kAdminUrlEnv);
  if (url == nullptr || *url == '\0') {
    return absl::FailedPreconditionError(absl::StrCat(
        kAdminUrlEnv,
        " is not set: integration tests need a PostgreSQL. Run them through scripts/test (which "
        "starts a throw-away PostgreSQL), or set ",
        kAdminUrlEnv, " to an admin URL such as postgresql://postgres@127.0.0.1:5432/postgres"));
  }
  return std::string(url);
}

std::string TestDatabase::UrlForDatabase(const std::string& admin_url,
                                         const std::string& database) {
  auto scheme = admin_url.find("://");
  if (scheme == std::string::npos) {
    // key=value conninfo: a later keyword wins.
    return absl::StrCat(admin_url, " dbname=", database);
  }
  auto query = admin_url.find('?', scheme + 3);
  std::string base = admin_url.substr(0, query);
  std::string rest = query == std::string::npos ? "" : admin_url.substr(query);
  auto slash = base.find('/', scheme + 3);
  if (slash != std::string::npos) base.resize(slash);
  return absl::StrCat(base, "/", database, rest);
}

absl::StatusOr<std::unique_ptr<TestDatabase>> TestDatabase::Create() {
  auto admin = AdminUrl();
  if (!admin.ok()) return admin.status();
  return CreateOn(*admin);
}

absl::StatusOr<std::unique_ptr<TestDatabase>> TestDatabase::CreateOn(const std::string& admin_url) {
  const std::string* admin = &admin_url;
  static std::atomic<int> counter{0};
  std::random_device random;
  std::string name = absl::StrCat("rm_test_", getpid(), "_", counter.fetch_add(1), "_",
                                  absl::Hex(random() & 0xffffff, absl::kZeroPad6));
  if (auto status = ExecAdmin(*admin, absl::StrCat("CREATE DATABASE ", name)); !status.ok()) {
    return status;
  }
  return std::unique_ptr<TestDatabase>(new TestDatabase(*admin, std::move(name)));
}

TestDatabase::TestDatabase(std::string admin_url, std::string name)
    : admin_url_(std::move(admin_url)),
      name_(std::move(name)),
      url_(UrlForDatabase(admin_url_, name_)) {}

TestDatabase::~TestDatabase() {
  auto status =
      ExecAdmin(admin_url_, absl::StrCat("DROP DATABASE IF EXISTS ", name_, " WITH (FORCE)"));
  if (!status.ok()) {
    RM_LOG(kWarning) << "dropping test database " << name_ << ": " << status;
  }
}

}  // namespace ringmaster::test
