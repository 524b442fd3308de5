// Registry secrets at rest with the scheduler as a real process on real PostgreSQL
// (docs/environments.md, "Secrets at rest"): what the database holds of a secret set through
// the API, a scheduler restarted with another key or over an altered row, which keeps serving
// and lists what it cannot read, and a key rotation (--previous-secrets-key-file).
#include <fcntl.h>
#include <unistd.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/secret_box.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/registry.grpc.pb.h"
#include "scheduler/harness.h"
#include "support/postgres_server.h"
#include "support/test_tokens.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "hunter2-integration-secret";

// A key file of 64 hex digits `fill` in the test's temporary directory; its path.
std::string WriteKeyFile(const std::string& name, char fill) {
  const std::string path = absl::StrCat(::testing::TempDir(), name, "-", getpid());
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0) << path;
  const std::string key(64, fill);
  EXPECT_EQ(write(fd, key.data(), key.size()), 64);
  close(fd);
  return path;
}

class RegistrySecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = TestDatabase::Create();
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    auto redis = RedisServer::StartNew();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    StartScheduler({});
  }
  void TearDown() override {
    if (HasFailure() && scheduler_)
      std::cerr << "scheduler log:\n" << scheduler_->LogTail() << "\n";
    scheduler_.reset();
  }

  void StartScheduler(std::vector<std::string> extra_args) {
    scheduler_.reset();  // its lease goes with it (SIGTERM)
    auto scheduler =
        SchedulerProcess::Start(db_->url(), redis_->addr(), 1500, std::move(extra_args));
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = *std::move(scheduler);
  }

  grpc::Status Set(const std::string& team, const std::string& registry,
                   const std::string& secret) {
    auto stub = v1::RegistryService::NewStub(scheduler_->channel());
    grpc::ClientContext ctx;
    v1::SetRegistryCredentialRequest req;
    req.set_team(team);
    req.set_registry(registry);
    req.set_username("robot");
    req.set_secret(secret);
    v1::RegistryCredential resp;
    return stub->SetRegistryCredential(&ctx, req, &resp);
  }

  std::vector<v1::RegistryCredential> List() {
    auto stub = v1::RegistryService::NewStub(scheduler_->channel());
    grpc::ClientContext ctx;
    v1::ListRegistryCredentialsRequest req;
    req.set_team("*");
    v1::ListRegistryCredentialsResponse resp;
    grpc::Status s = stub->ListRegistryCredentials(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {resp.credentials().begin(), resp.credentials().end()};
  }

  std::string Exec1(const std::string& sql) {
    pqxx::connection conn(db_->url());
    pqxx::work tx(conn);
    pqxx::row row = tx.exec1(sql);
    tx.commit();
    return row[0].is_null() ? "NULL" : row[0].as<std::string>();
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<SchedulerProcess> scheduler_;
};

TEST_F(RegistrySecretsTest, TheDatabaseHoldsOnlySealedBytesOfASecretSetThroughTheApi) {
  grpc::Status s = Set("vision", "ghcr.io", kSecret);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // Every column as text, and the sealed bytes escaped.
  const std::string row = Exec1(
      "SELECT t::text || encode(sealed_secret, 'escape') || encode(sealed_secret, 'hex') "
      "FROM registry_credentials t");
  EXPECT_THAT(row, HasSubstr("robot"));
  EXPECT_THAT(row, Not(HasSubstr("hunter2")));
  EXPECT_EQ(Exec1("SELECT plaintext_secret FROM registry_credentials"), "NULL");
  // Version 1, then the key id, a nonce, the ciphertext and the tag.
  EXPECT_EQ(Exec1("SELECT get_byte(sealed_secret, 0) FROM registry_credentials"), "1");
  EXPECT_EQ(Exec1("SELECT length(sealed_secret) FROM registry_credentials"),
            absl::StrCat(33 + std::string(kSecret).size()));
}

TEST_F(RegistrySecretsTest, AnotherKeyOrAnAlteredRowLeavesTheSchedulerServingAndListsTheProblem) {
  ASSERT_TRUE(Set("vision", "ghcr.io", kSecret).ok());
  ASSERT_TRUE(Set("audio", "quay.io", "audio-secret").ok());

  // Another key: both credentials stay listed, each with its problem, and the scheduler serves.
  const std::string other = WriteKeyFile("other-secrets-key", 'e');
  StartScheduler({"--secrets-key-file", other});
  std::vector<v1::RegistryCredential> listed = List();
  ASSERT_EQ(listed.size(), 2u);
  for (const v1::RegistryCredential& c : listed) {
    EXPECT_THAT(c.problem(), HasSubstr("sealed with another secrets key")) << c.team();
    EXPECT_THAT(c.problem(), Not(HasSubstr("hunter2")));
  }
  EXPECT_THAT(scheduler_->LogTail(),
              HasSubstr("registry credentials of team vision for ghcr.io: the stored secret "
                        "cannot be read"));
  EXPECT_THAT(scheduler_->LogTail(), Not(HasSubstr("hunter2")));
  // Set again under this key, it is mended.
  ASSERT_TRUE(Set("vision", "ghcr.io", kSecret).ok());
  listed = List();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[1].team(), "vision");
  EXPECT_EQ(listed[1].problem(), "");

  // One byte of its ciphertext flipped in the database: it does not authenticate.
  Exec1(
      "UPDATE registry_credentials SET sealed_secret = set_byte(sealed_secret, 20, "
      "get_byte(sealed_secret, 20) # 1) WHERE team = 'vision' RETURNING 1");
  StartScheduler({"--secrets-key-file", other});
  listed = List();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_THAT(listed[1].problem(), HasSubstr("does not authenticate"));
  EXPECT_THAT(scheduler_->LogTail(), Not(HasSubstr("hunter2")));
}

TEST_F(RegistrySecretsTest, ARotationResealsWithTheNewKeyAndTheOldKeyAloneNoLongerReads) {
  ASSERT_TRUE(Set("vision", "ghcr.io", kSecret).ok());
  const std::string old_key = SecretsKeyFile();  // every harness scheduler's key
  const std::string new_key = WriteKeyFile("new-secrets-key", 'b');
  auto old_box = LoadSecretsKey(old_key);
  auto new_box = LoadSecretsKey(new_key);
  ASSERT_TRUE(old_box.ok() && new_box.ok());
  const std::string key_id_sql =
      "SELECT encode(substring(sealed_secret from 2 for 4), 'hex') FROM registry_credentials";
  ASSERT_EQ(Exec1(key_id_sql), old_box->key_id());
  const std::string set_at = Exec1("SELECT updated_at_ms FROM registry_credentials");

  // The new key, the old one as the previous: resealed in place, its time kept.
  StartScheduler({"--secrets-key-file", new_key, "--previous-secrets-key-file", old_key});
  std::vector<v1::RegistryCredential> listed = List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem(), "");
  EXPECT_EQ(Exec1(key_id_sql), new_box->key_id());
  EXPECT_EQ(Exec1("SELECT updated_at_ms FROM registry_credentials"), set_at);
  EXPECT_EQ(Exec1("SELECT plaintext_secret FROM registry_credentials"), "NULL");
  EXPECT_THAT(scheduler_->LogTail(),
              HasSubstr(absl::StrCat("resealed 1 registry secret(s) sealed with the previous "
                                     "secrets key (key id ",
                                     old_box->key_id(), ")")));
  EXPECT_THAT(scheduler_->LogTail(), HasSubstr("--previous-secrets-key-file can be dropped"));
  EXPECT_THAT(scheduler_->LogTail(), Not(HasSubstr("hunter2")));

  // The previous key dropped: still read.
  StartScheduler({"--secrets-key-file", new_key});
  listed = List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem(), "");

  // A scheduler with only the old key (a replica left behind) lists the problem and writes
  // nothing.
  StartScheduler({});
  listed = List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_THAT(listed[0].problem(), HasSubstr("sealed with another secrets key"));
  EXPECT_THAT(listed[0].problem(), HasSubstr(new_box->key_id()));
  EXPECT_EQ(Exec1(key_id_sql), new_box->key_id());
}

}  // namespace
}  // namespace ringmaster::test
