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

// The secrets key file of a test process (64 random hex digits, mode 0600, made on first use),
// which every scheduler the harness starts gets as --secrets-key-file: replicas of one test
// share it, as they must, and no test writes a key into the home directory.
const std::string& SecretsKeyFile();

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_TEST_TOKENS_H_
