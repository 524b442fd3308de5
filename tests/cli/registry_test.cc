// `ringctl registry`: its arguments, where the secret is read from (never a flag's value), and
// what `list` prints from an in-process gRPC server that plays the scheduler's RegistryService.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "args.h"
#include "errors.h"
#include "format.h"
#include "loopback_server.h"
#include "registry_command.h"
#include "ringmaster/v1/registry.grpc.pb.h"

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

// Answers ListRegistryCredentials with `credentials`, and records the team asked for.
class FakeRegistryService final : public v1::RegistryService::Service {
 public:
  explicit FakeRegistryService(std::vector<v1::RegistryCredential> credentials)
      : credentials_(std::move(credentials)) {}
  grpc::Status ListRegistryCredentials(grpc::ServerContext*,
                                       const v1::ListRegistryCredentialsRequest* request,
                                       v1::ListRegistryCredentialsResponse* response) override {
    asked_team_ = request->team();
    for (const v1::RegistryCredential& c : credentials_) *response->add_credentials() = c;
    return grpc::Status::OK;
  }
  std::string asked_team() const { return asked_team_; }

 private:
  std::vector<v1::RegistryCredential> credentials_;
  std::string asked_team_;  // written by gRPC's thread before the answer the test waits for
};

v1::RegistryCredential Credential(const std::string& team, const std::string& registry,
                                  const std::string& problem) {
  v1::RegistryCredential c;
  c.set_team(team);
  c.set_registry(registry);
  c.set_username("robot");
  c.set_updated_at_ms(1'764'430'802'000);
  c.set_problem(problem);
  return c;
}

constexpr char kProblem[] =
    "the stored secret cannot be read: the value was sealed with another secrets key (key id "
    "0badc0de; this scheduler's key id is 12345678). Start the scheduler with the key it was "
    "sealed with (--secrets-key-file), or set the credential again (ringctl registry set)";

class RegistryListTest : public ::testing::Test {
 protected:
  void Serve(std::vector<v1::RegistryCredential> credentials) {
    service_ = std::make_unique<FakeRegistryService>(std::move(credentials));
    server_ = StartLoopbackServer({service_.get()}, &address_);
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  // Runs `ringctl registry list EXTRA...` against the fake (plaintext on loopback, as a
  // development cluster run --insecure); its exit code.
  int List(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"registry", "list", "--scheduler", address_, "--insecure"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto cmd = Parse(args);
    EXPECT_TRUE(cmd.ok()) << cmd.status();
    if (!cmd.ok()) return -1;
    std::istringstream in;
    return RunRegistryCommand(*cmd, in, out_, err_);
  }

  std::unique_ptr<FakeRegistryService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(RegistryListTest, ACredentialWithAProblemGetsALineUnderTheTableSayingWhy) {
  Serve({Credential("audio", "quay.io", ""), Credential("vision", "ghcr.io", kProblem)});
  ASSERT_EQ(List({"--all"}), kExitOk) << err_.str();
  EXPECT_EQ(service_->asked_team(), "*");
  const std::string when = FormatTimeMs(1'764'430'802'000);
  const std::string table =
      RenderTable({"TEAM", "REGISTRY", "USERNAME", "SET"},
                  {{"audio", "quay.io", "robot", when}, {"vision", "ghcr.io", "robot", when}});
  // Both credentials in the table, then one line for the one with a problem, and no other.
  EXPECT_EQ(out_.str(), absl::StrCat(table, "team vision, ghcr.io: ", kProblem, "\n"));
  EXPECT_EQ(err_.str(), "");
}

TEST_F(RegistryListTest, WithoutProblemsOnlyTheTableIsPrinted) {
  Serve({Credential("vision", "ghcr.io", "")});
  ASSERT_EQ(List({}), kExitOk) << err_.str();
  EXPECT_EQ(service_->asked_team(), "");  // the token's own team
  EXPECT_EQ(out_.str(),
            RenderTable({"TEAM", "REGISTRY", "USERNAME", "SET"},
                        {{"vision", "ghcr.io", "robot", FormatTimeMs(1'764'430'802'000)}}));
  EXPECT_THAT(out_.str(), Not(HasSubstr("cannot be read")));
}

TEST_F(RegistryListTest, JsonCarriesTheProblemField) {
  Serve({Credential("vision", "ghcr.io", kProblem)});
  ASSERT_EQ(List({"-o", "json"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"problem\": \"the stored secret cannot be read"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("team vision, ghcr.io:")));
}

}  // namespace
}  // namespace ringmaster::cli
