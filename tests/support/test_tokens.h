// The admin bearer token of a test process: one per process, made on first use, written (mode
// 0600) to a file that every scheduler the harness starts gets as --admin-token-file (so it is
// registered as an admin token in each test database), and exported as RINGMASTER_TOKEN so
// ringctl and the Python client started by a test use it too. Thread-safe.
#ifndef RINGMASTER_TESTS_SUPPORT_TEST_TOKENS_H_
#define RINGMASTER_TESTS_SUPPORT_TEST_TOKENS_H_

#include <string>

namespace ringmaster::test {

struct TestAdminToken {
  std::string token;  // rmt_<id>_<secret>
  std::string id;
  std::string file;
};

const TestAdminToken& AdminToken();

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_TEST_TOKENS_H_
