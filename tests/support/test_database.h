// TestDatabase: a fresh, uniquely named PostgreSQL database for one test, created on the server
// named by $RINGMASTER_TEST_PG_URL (an admin URL; scripts/test starts a throw-away PostgreSQL and
// sets it) and dropped again, with its connections, by the destructor. Integration tests FAIL
// rather than skip when the variable is unset. Not thread-safe; the URL can be shared freely.
#ifndef RINGMASTER_TESTS_SUPPORT_TEST_DATABASE_H_
#define RINGMASTER_TESTS_SUPPORT_TEST_DATABASE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::test {

class TestDatabase {
 public:
  static constexpr const char* kAdminUrlEnv = "RINGMASTER_TEST_PG_URL";

  // The admin URL from the environment; FAILED_PRECONDITION saying how to set it when unset.
  static absl::StatusOr<std::string> AdminUrl();
  // CREATE DATABASE rm_test_<pid>_<counter>_<random>. FAILED_PRECONDITION when the variable is
  // unset, UNAVAILABLE when the server cannot be reached.
  static absl::StatusOr<std::unique_ptr<TestDatabase>> Create();
  // The same on the server of `admin_url` (e.g. a PostgresServer of the test's own).
  static absl::StatusOr<std::unique_ptr<TestDatabase>> CreateOn(const std::string& admin_url);

  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;
  // DROP DATABASE ... WITH (FORCE); a failure is logged, not fatal.
  ~TestDatabase();

  const std::string& name() const { return name_; }
  // A URL (or key=value conninfo, matching the admin URL's form) for the new database.
  const std::string& url() const { return url_; }
  const std::string& admin_url() const { return admin_url_; }

  // `admin_url` with its database replaced by `database` (exposed for tests of the harness).
  static std::string UrlForDatabase(const std::string& admin_url, const std::string& database);

 private:
  TestDatabase(std::string admin_url, std::string name);

  std::string admin_url_;
  std::string name_;
  std::string url_;
};

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_TEST_DATABASE_H_
