// Every binary the project ships, run as a user would: --help and an unknown flag behave the same
// way everywhere, and the environment fallbacks the help documents are really read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "support/subprocess.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using Result = test::CapturedRun;

// Runs `binary args` with `env` added, stdout and stderr apart.
Result RunBinary(const std::string& binary, const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<Result> run = test::RunCaptured(argv, env, "", std::chrono::seconds(60));
  if (!run.ok()) {
    ADD_FAILURE() << binary << ": " << run.status();
    return Result{};
  }
  return *run;
}

std::string NameOf(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// Built binaries, from CMake: every one that install() or docker/Dockerfile ships.
std::vector<std::string> Binaries() {
  return absl::StrSplit(RINGMASTER_HELP_BINARIES, ':', absl::SkipEmpty());
}

TEST(HelpTest, EveryShippedBinaryIsCovered) {
  std::set<std::string> names;
  for (const std::string& path : Binaries()) names.insert(NameOf(path));
  for (const char* name :
       {"ringctl", "ringmaster-scheduler", "ringmaster-worker", "ringmaster-metrics",
        "ringmaster-train", "ringmaster-check", "ringmaster-rsh", "ringmaster-rank",
        "ringmaster-progress", "ringmaster-sim"}) {
    EXPECT_TRUE(names.count(name)) << name << " is not built, or not given to this test";
  }
}

// Exit 0; stdout starts with "Usage: NAME", then a one-line summary; nothing on stderr. Every
// flag line of the shared layout (libs/common/flags.h) names its variable and its default.
TEST(HelpTest, HelpPrintsUsageSummaryAndEveryFlagsVariableAndDefault) {
  const std::regex flag_line(R"(^  --[a-z0-9-]+ \(RINGMASTER_[A-Z0-9_]+, default '[^']*'\)$)");
  for (const std::string& binary : Binaries()) {
    const std::string name = NameOf(binary);
    SCOPED_TRACE(name);
    for (const char* help : {"--help", "-h"}) {
      Result r = RunBinary(binary, {help});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.err, "");
      EXPECT_THAT(r.out, StartsWith("Usage: " + name + " "));
      std::vector<std::string> lines = absl::StrSplit(r.out, '\n');
      ASSERT_GE(lines.size(), 3u);
      EXPECT_FALSE(lines[1].empty()) << "no one-line summary under the usage line";
      EXPECT_FALSE(absl::StartsWith(lines[1], " ")) << lines[1];
      if (name == "ringctl") continue;  // its own layout, checked below
      EXPECT_THAT(r.out, HasSubstr("\nFlags (environment fallback, default):\n"));
      EXPECT_THAT(r.out, HasSubstr("\n  -h, --help\n"));
      for (const std::string& line : lines) {
        if (absl::StartsWith(line, "  --") && !absl::StartsWith(line, "  --help")) {
          EXPECT_TRUE(std::regex_match(line, flag_line)) << line;
        }
      }
    }
  }
}

TEST(HelpTest, RingctlHelpNamesEveryVariableItReads) {
  for (const std::string& binary : Binaries()) {
    if (NameOf(binary) != "ringctl") continue;
    Result r = RunBinary(binary, {"--help"});
    for (const char* env : {"RINGMASTER_SCHEDULER", "RINGMASTER_TLS_CA", "RINGMASTER_TLS_CERT",
                            "RINGMASTER_TLS_KEY", "RINGMASTER_TOKEN", "RINGMASTER_INSECURE"}) {
      EXPECT_THAT(r.out, HasSubstr(env));
    }
    EXPECT_THAT(r.out, HasSubstr("default localhost:7070"));
  }
}

// Exit 2, nothing on stdout, one line on stderr that names the flag and points to --help; the
// same with a value and with a valid flag before it.
TEST(HelpTest, UnknownFlagIsOneLineNamingItAndExitsTwo) {
  for (const std::string& binary : Binaries()) {
    const std::string name = NameOf(binary);
    SCOPED_TRACE(name);
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"--no-such-flag"}, {"--no-such-flag=3"}}) {
      Result r = RunBinary(binary, args);
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_EQ(r.out, "");
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_EQ(r.err, name + ": unknown flag --no-such-flag (see " + name + " --help)\n");
    }
  }
}

// One variable per binary, given a value the binary must refuse: it is read, and the error
// names it. Each is checked before the binary reaches for the network or MPI.
TEST(HelpTest, EnvironmentFallbacksAreRead) {
  struct Fallback {
    std::string variable;
    std::string flag;
  };
  const std::map<std::string, Fallback> fallbacks = {
      {"ringmaster-scheduler", {"RINGMASTER_POSTGRES_POOL", "--postgres-pool"}},
      {"ringmaster-worker", {"RINGMASTER_CPU_SLOTS", "--cpu-slots"}},
      {"ringmaster-metrics", {"RINGMASTER_MAX_JOBS", "--max-jobs"}},
      {"ringmaster-train", {"RINGMASTER_STEPS", "--steps"}},
      {"ringmaster-check", {"RINGMASTER_CHECK_ITERS", "--iters"}},
      {"ringmaster-sim", {"RINGMASTER_LIMIT", "--limit"}},
  };
  for (const std::string& binary : Binaries()) {
    const std::string name = NameOf(binary);
    SCOPED_TRACE(name);
    if (name == "ringctl") {
      Result r = RunBinary(binary, {"list"}, {{"RINGMASTER_TLS_CA", "/nonexistent/ca.pem"}});
      EXPECT_EQ(r.exit_code, 2);
      EXPECT_THAT(r.err, HasSubstr("RINGMASTER_TLS_CA"));
      EXPECT_THAT(r.err, HasSubstr("/nonexistent/ca.pem"));
      continue;
    }
    if (name == "ringmaster-rsh") {
      // Without its variables it says which it needs; with them it gets as far as the host.
      Result bare = RunBinary(binary, {"host-a", "true"});
      EXPECT_EQ(bare.exit_code, 255);
      EXPECT_THAT(bare.err, HasSubstr("needs RINGMASTER_AGENT_PORTS"));
      Result set = RunBinary(binary, {"host-a", "true"},
                       {{"RINGMASTER_AGENT_PORTS", "host-b:7071"},
                        {"RINGMASTER_JOB_ID", "j-1"},
                        {"RINGMASTER_ATTEMPT", "1"},
                        {"RINGMASTER_TOKEN", "t"}});
      EXPECT_EQ(set.exit_code, 255);
      EXPECT_THAT(set.err, HasSubstr("host host-a is not a worker of this job"));
      EXPECT_THAT(set.err, ::testing::Not(HasSubstr("needs RINGMASTER_AGENT_PORTS")));
      continue;
    }
    auto it = fallbacks.find(name);
    if (it == fallbacks.end()) continue;  // rank, progress: no flags, the worker's variables
    const Fallback& f = it->second;
    Result help = RunBinary(binary, {"--help"});
    EXPECT_THAT(help.out, HasSubstr("  " + f.flag + " (" + f.variable + ", default '"));
    Result r = RunBinary(binary, {}, {{f.variable, "not-a-number"}});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, name + ": " + f.flag + " (or " + f.variable +
                         ") must be an integer, got 'not-a-number'\n");
    // The flag wins over its variable.
    Result flag_wins = RunBinary(binary, {f.flag + "=also-bad"}, {{f.variable, "not-a-number"}});
    EXPECT_EQ(flag_wins.exit_code, 2);
    EXPECT_THAT(flag_wins.err, HasSubstr("got 'also-bad'"));
  }
}

}  // namespace
}  // namespace ringmaster
