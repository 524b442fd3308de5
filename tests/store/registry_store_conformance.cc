// The registry-credential part of the JobStore conformance suite (job_store_conformance.h): it
// runs on every implementation the suite is instantiated with.
#include "gmock/gmock.h"
#include "job_store_conformance.h"
#include "support/status_test_util.h"

namespace ringmaster::scheduler {
namespace store_test {
namespace {

using ::ringmaster::test::StatusIs;
using ::testing::ElementsAre;

constexpr int64_t kT0 = 1'700'000'000'000;

// The store keeps what it is given: a sealed secret is any bytes (NULs and invalid UTF-8
// included), which the store neither reads nor changes.
StoredRegistryCredential MakeCredential(const std::string& team, const std::string& registry) {
  return {.team = team,
          .registry = registry,
          .username = "robot$" + team,
          .sealed_secret = std::string("\x01\0\xff\xfe sealed 'quoted' \\ ", 23) + team,
          .updated_at_ms = kT0};
}

TEST_P(JobStoreConformanceTest, ThereAreNoRegistryCredentialsAtFirst) {
  RM_ASSERT_OK_AND_ASSIGN(auto credentials, store().ListRegistryCredentials());
  EXPECT_TRUE(credentials.empty());
}

TEST_P(JobStoreConformanceTest, SetRegistryCredentialStoresEveryFieldAndListIsByTeamThenRegistry) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(
      store().SetRegistryCredential(MakeCredential("vision", "registry.example.com"), epoch));
  RM_ASSERT_OK(store().SetRegistryCredential(MakeCredential("audio", "ghcr.io"), epoch));
  RM_ASSERT_OK(store().SetRegistryCredential(MakeCredential("vision", "127.0.0.1:5000"), epoch));
  RM_ASSERT_OK_AND_ASSIGN(auto credentials, store().ListRegistryCredentials());
  EXPECT_THAT(credentials, ElementsAre(MakeCredential("audio", "ghcr.io"),
                                       MakeCredential("vision", "127.0.0.1:5000"),
                                       MakeCredential("vision", "registry.example.com")));
}

TEST_P(JobStoreConformanceTest, SettingARegistryCredentialAgainReplacesTheTeamsOneForThatRegistry) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().SetRegistryCredential(MakeCredential("vision", "ghcr.io"), epoch));
  RM_ASSERT_OK(store().SetRegistryCredential(MakeCredential("audio", "ghcr.io"), epoch));
  StoredRegistryCredential next = MakeCredential("vision", "ghcr.io");
  next.username = "ci";
  next.sealed_secret = std::string("\x01rotated\0", 9);
  next.updated_at_ms = kT0 + 5;
  RM_ASSERT_OK(store().SetRegistryCredential(next, epoch));
  RM_ASSERT_OK_AND_ASSIGN(auto credentials, store().ListRegistryCredentials());
  EXPECT_THAT(credentials, ElementsAre(MakeCredential("audio", "ghcr.io"), next));
}

// A row stored before secrets were sealed (migration 14) holds its plaintext; sealing it
// replaces the plaintext, and the other way round.
TEST_P(JobStoreConformanceTest, ARegistryCredentialHoldsEitherAPlaintextOrASealedSecret) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  StoredRegistryCredential old = MakeCredential("vision", "ghcr.io");
  old.sealed_secret.clear();
  old.plaintext_secret = "s3cr\xc3\xa9t 'quoted' \"and\" \\ backslashed";
  RM_ASSERT_OK(store().SetRegistryCredential(old, epoch));
  RM_ASSERT_OK_AND_ASSIGN(auto credentials, store().ListRegistryCredentials());
  EXPECT_THAT(credentials, ElementsAre(old));
  RM_ASSERT_OK(store().SetRegistryCredential(MakeCredential("vision", "ghcr.io"), epoch));
  RM_ASSERT_OK_AND_ASSIGN(credentials, store().ListRegistryCredentials());
  EXPECT_THAT(credentials, ElementsAre(MakeCredential("vision", "ghcr.io")));
  RM_ASSERT_OK(store().SetRegistryCredential(old, epoch));
  RM_ASSERT_OK_AND_ASSIGN(credentials, store().ListRegistryCredentials());
  EXPECT_THAT(credentials, ElementsAre(old));
}

TEST_P(JobStoreConformanceTest, DeleteRegistryCredentialRemovesOnlyThatTeamsOne) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().SetRegistryCredential(MakeCredential("vision", "ghcr.io"), epoch));
  RM_ASSERT_OK(store().SetRegistryCredential(MakeCredential("audio", "ghcr.io"), epoch));
  RM_ASSERT_OK(store().DeleteRegistryCredential("vision", "ghcr.io", epoch));
  RM_ASSERT_OK_AND_ASSIGN(auto credentials, store().ListRegistryCredentials());
  EXPECT_THAT(credentials, ElementsAre(MakeCredential("audio", "ghcr.io")));
  EXPECT_THAT(store().DeleteRegistryCredential("vision", "ghcr.io", epoch),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().DeleteRegistryCredential("audio", "docker.io", epoch),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(JobStoreConformanceTest, RegistryCredentialWritesOfAnOlderLeaderAreFenced) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t old_epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().SetRegistryCredential(MakeCredential("vision", "ghcr.io"), old_epoch));
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  ASSERT_NE(epoch, old_epoch);
  EXPECT_TRUE(
      IsFenced(store().SetRegistryCredential(MakeCredential("audio", "ghcr.io"), old_epoch)));
  EXPECT_TRUE(IsFenced(store().DeleteRegistryCredential("vision", "ghcr.io", old_epoch)));
  RM_ASSERT_OK_AND_ASSIGN(auto credentials, store().ListRegistryCredentials());
  EXPECT_THAT(credentials, ElementsAre(MakeCredential("vision", "ghcr.io")));
}

}  // namespace
}  // namespace store_test
}  // namespace ringmaster::scheduler
