// `ringctl registry`: its arguments, and where the secret is read from (never a flag's value).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "args.h"
#include "registry_command.h"

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<Command> Parse(const std::vector<std::string>& args) {
  return ParseArgs(args, [](const char*) -> const char* { return nullptr; });
}

TEST(RegistryArgsTest, SetTakesTheRegistryUserAndWhereTheSecretIs) {
  auto cmd = Parse({"registry", "set", "ghcr.io", "--username", "ci", "--password-stdin"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->verb, Verb::kRegistry);
  EXPECT_EQ(cmd->registry_action, RegistryAction::kSet);
  EXPECT_EQ(cmd->registry, "ghcr.io");
  EXPECT_EQ(cmd->registry_username, "ci");
  EXPECT_EQ(cmd->registry_password_file, "-");
  cmd = Parse({"registry", "set", "ghcr.io", "--username", "ci", "--password-file", "/tmp/t",
               "--team", "audio"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->registry_password_file, "/tmp/t");
  EXPECT_EQ(cmd->token_team, "audio");
}

TEST(RegistryArgsTest, ASetWithoutASecretSourceOrUserIsRefused) {
  auto cmd = Parse({"registry", "set", "ghcr.io", "--username", "ci"});
  ASSERT_FALSE(cmd.ok());
  EXPECT_THAT(std::string(cmd.status().message()), HasSubstr("--password-stdin"));
  EXPECT_FALSE(Parse({"registry", "set", "ghcr.io", "--password-stdin"}).ok());
  EXPECT_FALSE(Parse({"registry", "set", "--username", "ci", "--password-stdin"}).ok());
  // There is no flag that takes the secret itself.
  EXPECT_FALSE(
      Parse({"registry", "set", "ghcr.io", "--username", "ci", "--password", "hunter2"}).ok());
}

TEST(RegistryArgsTest, ListAndDelete) {
  auto cmd = Parse({"registry", "list", "--all"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->registry_action, RegistryAction::kList);
  EXPECT_TRUE(cmd->all_tokens);
  EXPECT_FALSE(Parse({"registry", "list", "--all", "--team", "a"}).ok());
  cmd = Parse({"registry", "delete", "ghcr.io", "--team", "vision"});
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->registry_action, RegistryAction::kDelete);
  EXPECT_EQ(cmd->registry, "ghcr.io");
  EXPECT_FALSE(Parse({"registry", "delete"}).ok());
  EXPECT_FALSE(Parse({"registry", "delete", "ghcr.io", "--password-stdin"}).ok());
  EXPECT_FALSE(Parse({"registry", "delete", "ghcr.io", "--all"}).ok());
  EXPECT_FALSE(Parse({"registry", "rotate"}).ok());
  EXPECT_FALSE(Parse({"registry"}).ok());
}

TEST(RegistrySecretTest, OneTrailingNewlineIsDroppedAndAnEmptySecretRefused) {
  std::istringstream in("s3cret\n");
  auto secret = ReadRegistrySecret("-", in);
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(*secret, "s3cret");
  std::istringstream crlf("s3cret\r\n");
  EXPECT_EQ(*ReadRegistrySecret("-", crlf), "s3cret");
  std::istringstream two("s3cret\n\n");
  EXPECT_EQ(*ReadRegistrySecret("-", two), "s3cret\n");  // the scheduler refuses it, saying so
  std::istringstream empty("\n");
  EXPECT_EQ(ReadRegistrySecret("-", empty).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RegistrySecretTest, AFileIsReadAndAMissingOneNamedButNeverItsContent) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / absl::StrCat("reg-secret-", getpid()))
          .string();
  std::ofstream(path) << "from-a-file\n";
  std::istringstream unused;
  auto secret = ReadRegistrySecret(path, unused);
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(*secret, "from-a-file");
  std::filesystem::remove(path);
  auto missing = ReadRegistrySecret(path, unused);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(missing.status().message()), Not(HasSubstr("from-a-file")));
}

}  // namespace
}  // namespace ringmaster::cli
