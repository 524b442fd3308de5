// ringctl's config file (cli/config.h): the scheduler and CA a new shell finds without exports,
// and where it stands against flags and the environment.
#include "config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "args.h"

namespace ringmaster::cli {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

GetEnvFn Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/ringctl-config-XXXXXX";
    ASSERT_NE(mkdtemp(templ), nullptr);
    home_ = templ;
  }
  void TearDown() override { (void)std::system(("rm -rf " + home_).c_str()); }

  // Writes ~/.config/ringmaster/config under the fake home.
  std::string WriteConfig(const std::string& text) {
    (void)std::system(("mkdir -p " + home_ + "/.config/ringmaster").c_str());
    const std::string path = home_ + "/.config/ringmaster/config";
    std::ofstream(path) << text;
    return path;
  }
  absl::StatusOr<Command> ParseWith(const std::vector<std::string>& args,
                                    std::map<std::string, std::string> vars = {}) {
    vars.emplace("HOME", home_);
    return ParseArgs(args, Env(std::move(vars)));
  }

  std::string home_;
};

TEST_F(ConfigTest, ANewShellFindsTheSchedulerAndCaInTheConfigFile) {
  const std::string path = WriteConfig(
      "# written by scripts/quickstart\nscheduler: 127.0.0.1:7171\ntls_ca: /q/certs/ca.crt\n");
  absl::StatusOr<Command> cmd = ParseWith({"workers"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->scheduler, "127.0.0.1:7171");
  EXPECT_EQ(cmd->tls.ca_file, "/q/certs/ca.crt");
  EXPECT_FALSE(cmd->tls.insecure);
  EXPECT_EQ(cmd->config_file, path);
}

TEST_F(ConfigTest, FlagsThenEnvironmentThenConfigFile) {
  WriteConfig("scheduler: file-host:1\ntls_ca: /file/ca.crt\ntls_cert: /file/c.crt\n");
  absl::StatusOr<Command> flags =
      ParseWith({"list", "--scheduler", "flag-host:3", "--tls-ca", "/flag/ca.crt"},
                {{"RINGMASTER_SCHEDULER", "env-host:2"}, {"RINGMASTER_TLS_CA", "/env/ca.crt"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->scheduler, "flag-host:3");
  EXPECT_EQ(flags->tls.ca_file, "/flag/ca.crt");
  EXPECT_EQ(flags->tls.cert_file, "/file/c.crt");  // given by neither: the file's
  absl::StatusOr<Command> env = ParseWith(
      {"list"}, {{"RINGMASTER_SCHEDULER", "env-host:2"}, {"RINGMASTER_TLS_CA", "/env/ca.crt"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->scheduler, "env-host:2");
  EXPECT_EQ(env->tls.ca_file, "/env/ca.crt");
}

TEST_F(ConfigTest, InsecureFromTheFileYieldsToTheEnvironment) {
  WriteConfig("insecure: true\n");
  absl::StatusOr<Command> file = ParseWith({"list"});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->tls.insecure);
  absl::StatusOr<Command> env = ParseWith({"list"}, {{"RINGMASTER_INSECURE", "0"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->tls.insecure);
}

TEST_F(ConfigTest, RelativePathsAreTakenFromTheFilesDirectory) {
  WriteConfig("tls_ca: certs/ca.crt\n");
  absl::StatusOr<Command> cmd = ParseWith({"list"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->tls.ca_file, home_ + "/.config/ringmaster/certs/ca.crt");
}

TEST_F(ConfigTest, XdgConfigHomeAndRingmasterConfigPickTheFile) {
  const std::string xdg = home_ + "/xdg";
  (void)std::system(("mkdir -p " + xdg + "/ringmaster").c_str());
  std::ofstream(xdg + "/ringmaster/config") << "scheduler: xdg-host:4\n";
  std::ofstream(home_ + "/other.yaml") << "scheduler: named-host:5\n";
  absl::StatusOr<Command> from_xdg = ParseWith({"list"}, {{"XDG_CONFIG_HOME", xdg}});
  ASSERT_TRUE(from_xdg.ok()) << from_xdg.status();
  EXPECT_EQ(from_xdg->scheduler, "xdg-host:4");
  absl::StatusOr<Command> named =
      ParseWith({"list"}, {{"XDG_CONFIG_HOME", xdg}, {"RINGMASTER_CONFIG", home_ + "/other.yaml"}});
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->scheduler, "named-host:5");
}

TEST_F(ConfigTest, NoFileMeansTheDefaults) {
  absl::StatusOr<Command> cmd = ParseWith({"list"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->scheduler, "localhost:7070");
  EXPECT_TRUE(cmd->config_file.empty());
}

TEST_F(ConfigTest, AMissingFileNamedByRingmasterConfigIsNotFound) {
  absl::StatusOr<Command> cmd =
      ParseWith({"list"}, {{"RINGMASTER_CONFIG", home_ + "/nonexistent"}});
  ASSERT_FALSE(cmd.ok());
  EXPECT_EQ(cmd.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(cmd.status().message(),
              AllOf(HasSubstr(home_ + "/nonexistent"), HasSubstr("RINGMASTER_CONFIG")));
}

TEST_F(ConfigTest, AnUnknownKeyIsNamedWithItsLineAndTheKeysAllowed) {
  const std::string path = WriteConfig("scheduler: h:1\ntls-ca: /x\n");
  absl::StatusOr<Command> cmd = ParseWith({"list"});
  ASSERT_FALSE(cmd.ok());
  EXPECT_EQ(cmd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      cmd.status().message(),
      AllOf(HasSubstr(path + ", line 2"), HasSubstr("unknown key 'tls-ca'"), HasSubstr("tls_ca")));
}

TEST_F(ConfigTest, BadValuesAreNamed) {
  EXPECT_THAT(ParseClientConfig("insecure: yes please\n", "/c").status().message(),
              HasSubstr("insecure: expected true or false, got 'yes please'"));
  EXPECT_THAT(ParseClientConfig("tls_ca: [a, b]\n", "/c").status().message(),
              HasSubstr("tls_ca: expected a single value"));
  EXPECT_THAT(ParseClientConfig("scheduler: ''\n", "/c").status().message(),
              HasSubstr("scheduler: must not be empty"));
  EXPECT_THAT(ParseClientConfig("- a\n- b\n", "/c").status().message(),
              HasSubstr("expected a mapping"));
  EXPECT_THAT(ParseClientConfig("scheduler: [\n", "/c").status().code(),
              absl::StatusCode::kInvalidArgument);
  WriteConfig("scheduler: no-port\n");
  absl::StatusOr<Command> cmd = ParseWith({"list"});
  ASSERT_FALSE(cmd.ok());
  EXPECT_THAT(cmd.status().message(), HasSubstr("scheduler in config file"));
}

TEST_F(ConfigTest, AnEmptyFileIsNoSettings) {
  absl::StatusOr<ClientConfig> config = ParseClientConfig("# nothing yet\n", "/c");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->scheduler.empty());
  EXPECT_FALSE(config->insecure.has_value());
}

}  // namespace
}  // namespace ringmaster::cli
