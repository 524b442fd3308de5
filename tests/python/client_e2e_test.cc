// Drives the Python client's unittest suite (client_e2e_test.py) against a real cluster:
// PostgreSQL, Redis, the scheduler and two real workers on 127.0.0.2 and .3. The suite gets the
// scheduler's address in $RINGMASTER_SCHEDULER and the package (python/ and the generated
// stubs under BUILD/python) on PYTHONPATH; its own output is printed whatever the outcome.
#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "support/cluster/cluster.h"
#include "support/subprocess.h"
#include "support/test_certs.h"

namespace ringmaster::test {
namespace {

using namespace std::chrono_literals;

TEST(PythonClientE2eTest, UnittestSuitePassesAgainstARealCluster) {
  auto cluster = Cluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  for (int i = 2; i <= 3; ++i) {
    WorkerConfig config;
    // Ids unique to this run: a worker kills what its id left behind.
    config.id = absl::StrCat("py", i, "-", getpid());
    config.address = absl::StrCat("127.0.0.", i);
    config.cpu_slots = 2;
    ASSERT_TRUE((*cluster)->AddWorker(config).ok());
  }
  absl::Status ready = (*cluster)->WaitWorkersReady(2);
  ASSERT_TRUE(ready.ok()) << ready << "\n" << (*cluster)->Logs();

  SubprocessOptions options;
  options.argv = {RINGMASTER_PYTHON, "-m", "unittest", "-v", "client_e2e_test"};
  options.working_dir = RINGMASTER_SOURCE_DIR "/tests/python";
  options.env = {
      {"RINGMASTER_SCHEDULER", (*cluster)->scheduler().addr()},
      {"PYTHONPATH", RINGMASTER_SOURCE_DIR "/python:" RINGMASTER_BINARY_DIR "/python"},
      {"PYTHONDONTWRITEBYTECODE", "1"},
      {"PYTHONUNBUFFERED", "1"},
  };
  // The cluster speaks TLS: only the test CA, no certificate of the client's own (logs come
  // through the scheduler).
  options.env[kTlsCaEnv] = TestCerts::Get().ca();
  options.env[kTlsCertEnv] = "";
  options.env[kTlsKeyEnv] = "";
  auto suite = Subprocess::Start(options);
  ASSERT_TRUE(suite.ok()) << suite.status();
  auto code = (*suite)->Wait(300s);
  std::cerr << (*suite)->Log();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << "the Python suite failed; cluster logs:\n" << (*cluster)->Logs();
}

}  // namespace
}  // namespace ringmaster::test
