// Runs the built ringctl binary as a user would, against an address where nothing listens.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"

extern char** environ;

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadAll(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Runs ringctl with `args`; the environment is this process's, minus proxies (gRPC would
// honour them) and RINGMASTER_SCHEDULER, plus `env`.
Result RunRingctl(const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env = {}) {
  static int counter = 0;
  const std::string base =
      absl::StrCat(::testing::TempDir(), "/ringctl-", getpid(), "-", ++counter);
  const std::string out_path = base + ".out";
  const std::string err_path = base + ".err";

  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (absl::EndsWithIgnoreCase(name, "_proxy") || name == "RINGMASTER_SCHEDULER") continue;
    env_strings.push_back(entry);
  }
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);

  const std::string binary = RINGMASTER_BINARY_DIR "/cli/ringctl";
  std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  Result result;
  if (rc != 0) {
    ADD_FAILURE() << "cannot run " << binary << ": " << std::strerror(rc);
    return result;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadAll(out_path);
  result.err = ReadAll(err_path);
  return result;
}

int LineCount(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Plaintext for the unreachable-scheduler tests: under ASan (with the slow unwinder CI uses)
// loading the system's CA bundle for TLS takes most of ringctl's 5 s deadline, and these tests
// are about the exit code and the message, which TLS does not change.
const std::map<std::string, std::string> kPlaintext = {{"RINGMASTER_INSECURE", "1"}};

class RingctlBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<int> port = PickFreePort("127.0.0.1");
    ASSERT_TRUE(port.ok()) << port.status();
    address_ = absl::StrCat("127.0.0.1:", *port);
  }
  std::string address_;
};

TEST_F(RingctlBinaryTest, UnreachableSchedulerExitsThreeWithOneLineNamingTheAddress) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--scheduler", address_, "list"},
                                             {"get", "j-1", "--scheduler", address_},
                                             {"workers", "--scheduler", address_, "-o", "json"},
                                             {"watch", "j-1", "--scheduler", address_}}) {
    Result r = RunRingctl(args, kPlaintext);
    SCOPED_TRACE(args[0] + " " + args[1]);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_THAT(r.err, StartsWith("ringctl: scheduler unreachable at " + address_ + ": "));
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(RingctlBinaryTest, SubmitToAnUnreachableSchedulerRetriesThenExitsThree) {
  Result r = RunRingctl({"submit", "--name", "smoke", "--request-id", "binary-test-1",
                         "--scheduler", address_, "--retry-seconds", "1"},
                        kPlaintext);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(LineCount(r.err), 2) << r.err;  // retrying starts, and gives up
  EXPECT_THAT(r.err, StartsWith("ringctl: scheduler unreachable at " + address_ + ": "));
  EXPECT_THAT(r.err, HasSubstr("; retrying for up to 1 s with request id binary-test-1\n"));
  EXPECT_THAT(r.err, HasSubstr("(tried 3 times with request id binary-test-1)"));
}

TEST_F(RingctlBinaryTest, SchedulerAddressFallsBackToTheEnvironment) {
  Result r =
      RunRingctl({"list"}, {{"RINGMASTER_SCHEDULER", address_}, {"RINGMASTER_INSECURE", "1"}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, StartsWith("ringctl: scheduler unreachable at " + address_ + ": "));
}

TEST_F(RingctlBinaryTest, UsageErrorExitsTwo) {
  Result r = RunRingctl({"list", "--limit", "lots"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ringctl: --limit: expected an integer, got 'lots'\n");
}

TEST_F(RingctlBinaryTest, HelpExitsZero) {
  Result r = RunRingctl({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("Usage: ringctl"));
  EXPECT_EQ(r.err, "");
  Result submit = RunRingctl({"submit", "--help"});
  EXPECT_EQ(submit.exit_code, 0);
  EXPECT_THAT(submit.out, HasSubstr("--gpus-per-replica"));
}

}  // namespace
}  // namespace ringmaster::cli
