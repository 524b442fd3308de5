// common/flags.h: the flag parser every binary but ringctl shares (CLI11 underneath).
#include "common/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

namespace ringmaster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Flags MakeFlags() {
  Flags flags("ringmaster-test", "A test binary.");
  flags.Add("listen", "0.0.0.0:7070", "address");
  flags.Add("pool-size", "8", "connections");
  flags.AddSwitch("insecure", "plaintext");
  return flags;
}

absl::Status Parse(Flags& flags, std::vector<std::string> args) {
  args.insert(args.begin(), "ringmaster-test");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return flags.Parse(static_cast<int>(argv.size()), argv.data());
}

TEST(FlagsTest, ValueAsNextArgumentOrAfterEquals) {
  Flags flags = MakeFlags();
  ASSERT_TRUE(Parse(flags, {"--listen", "127.0.0.1:1", "--pool-size=3"}).ok());
  EXPECT_EQ(flags.Get("listen"), "127.0.0.1:1");
  int64_t pool = 0;
  ASSERT_TRUE(flags.GetInt("pool-size", &pool).ok());
  EXPECT_EQ(pool, 3);
}

TEST(FlagsTest, DefaultsWhenNeitherFlagNorVariable) {
  Flags flags = MakeFlags();
  ASSERT_TRUE(Parse(flags, {}).ok());
  EXPECT_EQ(flags.Get("listen"), "0.0.0.0:7070");
  bool insecure = true;
  ASSERT_TRUE(flags.GetBool("insecure", &insecure).ok());
  EXPECT_FALSE(insecure);
}

TEST(FlagsTest, FlagThenVariableThenDefault) {
  setenv("RINGMASTER_POOL_SIZE", "5", 1);
  setenv("RINGMASTER_LISTEN", "env:1", 1);
  setenv("RINGMASTER_INSECURE", "1", 1);
  Flags flags = MakeFlags();
  absl::Status status = Parse(flags, {"--listen=flag:2"});
  unsetenv("RINGMASTER_POOL_SIZE");
  unsetenv("RINGMASTER_LISTEN");
  unsetenv("RINGMASTER_INSECURE");
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(flags.Get("listen"), "flag:2");
  EXPECT_EQ(flags.Get("pool-size"), "5");
  bool insecure = false;
  ASSERT_TRUE(flags.GetBool("insecure", &insecure).ok());
  EXPECT_TRUE(insecure);
}

TEST(FlagsTest, SwitchesTakeNoValueOrAnExplicitOne) {
  Flags on = MakeFlags();
  ASSERT_TRUE(Parse(on, {"--insecure"}).ok());
  EXPECT_EQ(on.Get("insecure"), "true");
  Flags off = MakeFlags();
  ASSERT_TRUE(Parse(off, {"--insecure=false"}).ok());
  EXPECT_EQ(off.Get("insecure"), "false");
  Flags bad = MakeFlags();
  ASSERT_TRUE(Parse(bad, {"--insecure=maybe"}).ok());
  bool value = false;
  absl::Status status = bad.GetBool("insecure", &value);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--insecure (or RINGMASTER_INSECURE) must be true or false, got 'maybe'");
}

TEST(FlagsTest, NothingAfterEqualsIsTheEmptyValue) {
  Flags flags = MakeFlags();
  ASSERT_TRUE(Parse(flags, {"--listen=", "--pool-size=3"}).ok());
  EXPECT_EQ(flags.Get("listen"), "");
  EXPECT_EQ(flags.Get("pool-size"), "3");
  Flags value = MakeFlags();
  ASSERT_TRUE(Parse(value, {"--listen", "--pool-size=", "--pool-size", "4"}).ok());
  EXPECT_EQ(value.Get("listen"), "--pool-size=");
  EXPECT_EQ(value.Get("pool-size"), "4");
}

TEST(FlagsTest, TheLastOfARepeatedFlagWins) {
  Flags flags = MakeFlags();
  ASSERT_TRUE(Parse(flags, {"--listen=a:1", "--listen", "b:2"}).ok());
  EXPECT_EQ(flags.Get("listen"), "b:2");
}

TEST(FlagsTest, MistakesNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--bogus"}, "unknown flag --bogus (see ringmaster-test --help)"},
           {{"--bogus=1"}, "unknown flag --bogus (see ringmaster-test --help)"},
           {{"-x"}, "unknown flag -x (see ringmaster-test --help)"},
           {{"--listen"}, "--listen needs a value"},
           {{"stray"}, "unexpected argument 'stray' (see ringmaster-test --help)"},
       }) {
    Flags flags = MakeFlags();
    absl::Status status = Parse(flags, c.args);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.args[0];
    EXPECT_EQ(status.message(), c.message);
  }
  Flags flags = MakeFlags();
  ASSERT_TRUE(Parse(flags, {"--pool-size=many"}).ok());
  int64_t pool = 0;
  absl::Status status = flags.GetInt("pool-size", &pool);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--pool-size (or RINGMASTER_POOL_SIZE) must be an integer, got 'many'");
}

TEST(FlagsTest, HelpWinsOverUnknownFlags) {
  for (const char* help : {"--help", "-h"}) {
    Flags flags = MakeFlags();
    ASSERT_TRUE(Parse(flags, {"--bogus", help}).ok());
    EXPECT_TRUE(flags.help_requested());
  }
}

TEST(FlagsTest, UsageListsEveryFlagWithVariableAndDefault) {
  const std::string usage = MakeFlags().Usage();
  EXPECT_THAT(usage, testing::StartsWith("Usage: ringmaster-test [flags]\nA test binary.\n"));
  EXPECT_THAT(
      usage,
      HasSubstr("\n  --listen (RINGMASTER_LISTEN, default '0.0.0.0:7070')\n      address\n"));
  EXPECT_THAT(usage, HasSubstr("\n  --insecure (RINGMASTER_INSECURE, default 'false')\n"));
  EXPECT_THAT(MakeFlags().Names(),
              ElementsAre("--listen", "RINGMASTER_LISTEN", "--pool-size", "RINGMASTER_POOL_SIZE",
                          "--insecure", "RINGMASTER_INSECURE"));
}

TEST(FlagsTest, DeclaredArgumentsAndEverythingAfterDashDash) {
  Flags flags = MakeFlags();
  flags.SetArguments("FILE...", "files", /*pass_through=*/false);
  ASSERT_TRUE(Parse(flags, {"a", "--listen=x:1", "b", "--", "--pool-size=1", "-z"}).ok());
  EXPECT_THAT(flags.positional(), ElementsAre("a", "b", "--pool-size=1", "-z"));
  EXPECT_EQ(flags.Get("listen"), "x:1");
  EXPECT_EQ(flags.Get("pool-size"), "8");
}

// ringmaster-rsh HOST COMMAND..., ringmaster-rank [--] PROGRAM ARGS...: flags end at the first
// argument, the command line after it is passed on untouched, its --help included.
TEST(FlagsTest, PassThroughKeepsTheCommandLineAsGiven) {
  Flags flags = MakeFlags();
  flags.SetArguments("PROGRAM [ARGS...]", "", /*pass_through=*/true);
  ASSERT_TRUE(Parse(flags, {"--listen=x:1", "prog", "--help", "--listen", "y"}).ok());
  EXPECT_FALSE(flags.help_requested());
  EXPECT_EQ(flags.Get("listen"), "x:1");
  EXPECT_THAT(flags.positional(), ElementsAre("prog", "--help", "--listen", "y"));
  Flags dash_dash = MakeFlags();
  dash_dash.SetArguments("PROGRAM [ARGS...]", "", /*pass_through=*/true);
  ASSERT_TRUE(Parse(dash_dash, {"--", "prog", "-h"}).ok());
  EXPECT_FALSE(dash_dash.help_requested());
  EXPECT_THAT(dash_dash.positional(), ElementsAre("prog", "-h"));
}

TEST(FlagsTest, EnvPrefixNamesTheVariables) {
  Flags flags("ringmaster-check", "check");
  flags.SetEnvPrefix("RINGMASTER_CHECK_");
  flags.Add("iters", "20", "iterations");
  setenv("RINGMASTER_CHECK_ITERS", "7", 1);
  setenv("RINGMASTER_ITERS", "9", 1);
  absl::Status status = Parse(flags, {});
  unsetenv("RINGMASTER_CHECK_ITERS");
  unsetenv("RINGMASTER_ITERS");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(flags.Get("iters"), "7");
  EXPECT_THAT(flags.Usage(), HasSubstr("--iters (RINGMASTER_CHECK_ITERS, default '20')"));
}

}  // namespace
}  // namespace ringmaster
