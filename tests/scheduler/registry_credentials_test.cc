#include "scheduler/core/registry_credentials.h"

#include <string>

#include "common/secret_box.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/status_test_util.h"

namespace ringmaster::scheduler {
namespace {

using ::ringmaster::test::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

RegistryCredential Good() {
  return {.team = "vision",
          .registry = "Registry.Example.com:5000",
          .username = "robot$ci",
          .secret = "p4ss w\xc3\xb6rd"};
}

void ExpectInvalid(const RegistryCredential& credential, const std::string& field) {
  auto valid = ValidateRegistryCredential(credential);
  EXPECT_THAT(valid, StatusIs(absl::StatusCode::kInvalidArgument)) << field;
  if (!valid.ok()) {
    EXPECT_THAT(std::string(valid.status().message()), testing::StartsWith(field + ": "));
  }
}

TEST(RegistryCredentialsTest, AGoodCredentialIsKeptWithItsRegistryLowerCased) {
  RM_ASSERT_OK_AND_ASSIGN(RegistryCredential valid, ValidateRegistryCredential(Good()));
  EXPECT_EQ(valid.registry, "registry.example.com:5000");
  EXPECT_EQ(valid.username, "robot$ci");
  EXPECT_EQ(valid.secret, Good().secret);
}

TEST(RegistryCredentialsTest, RegistriesAreHostsWithAnOptionalPortAndNothingElse) {
  for (const char* good :
       {"ghcr.io", "127.0.0.1:5000", "localhost:65535", "docker.io", "a", "my-registry.internal"}) {
    EXPECT_TRUE(NormalizeRegistry(good, "registry").ok()) << good;
  }
  for (const std::string& bad :
       {std::string(), std::string("https://ghcr.io"), std::string("ghcr.io/team"),
        std::string("ghcr.io:0"), std::string("ghcr.io:65536"), std::string("ghcr.io:"),
        std::string("-a.io"), std::string("a..io"), std::string("a_b.io"),
        std::string("[::1]:5000"), std::string("gh cr.io"), std::string(256, 'a'),
        std::string(64, 'a') + ".io"}) {
    auto normalized = NormalizeRegistry(bad, "registry");
    EXPECT_THAT(normalized, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    if (!normalized.ok()) {
      EXPECT_THAT(std::string(normalized.status().message()), HasSubstr("HOST[:PORT]"));
    }
  }
}

TEST(RegistryCredentialsTest, EveryFieldIsCheckedAndNamed) {
  RegistryCredential c = Good();
  c.team = "Vision";
  ExpectInvalid(c, "team");
  c = Good();
  c.registry = "ghcr.io/x";
  ExpectInvalid(c, "registry");
  for (const std::string& bad : {std::string(), std::string("a b"), std::string("a:b"),
                                 std::string(257, 'u'), std::string("tab\t")}) {
    c = Good();
    c.username = bad;
    ExpectInvalid(c, "username");
  }
  c = Good();
  c.username = std::string(256, 'u');
  RM_EXPECT_OK(ValidateRegistryCredential(c));
  for (const std::string& bad : {std::string(), std::string(4097, 's'), std::string("line\n"),
                                 std::string("nul\0x", 5), std::string("\xff\xfe")}) {
    c = Good();
    c.secret = bad;
    ExpectInvalid(c, "secret");
  }
  c = Good();
  c.secret = std::string(4096, 's');
  RM_EXPECT_OK(ValidateRegistryCredential(c));
}

TEST(RegistryCredentialsTest, NoMessageQuotesTheSecret) {
  RegistryCredential c = Good();
  c.secret = "hunter2\n";
  auto valid = ValidateRegistryCredential(c);
  ASSERT_FALSE(valid.ok());
  EXPECT_THAT(std::string(valid.status().message()), Not(HasSubstr("hunter2")));
}

TEST(RegistryCredentialsTest, TheRegistryOfAnImageIsItsFirstComponentWhenThatNamesAHost) {
  EXPECT_EQ(RegistryOfImage("ghcr.io/team/train:v1"), "ghcr.io");
  EXPECT_EQ(RegistryOfImage("127.0.0.1:5000/train@sha256:" + std::string(64, 'a')),
            "127.0.0.1:5000");
  EXPECT_EQ(RegistryOfImage("Registry.Example.com/x"), "registry.example.com");
  EXPECT_EQ(RegistryOfImage("localhost/x"), "localhost");
  EXPECT_EQ(RegistryOfImage("pytorch/pytorch:2.3"), "docker.io");
  EXPECT_EQ(RegistryOfImage("ubuntu"), "docker.io");
  EXPECT_EQ(RegistryOfImage("ubuntu:24.04"), "docker.io");
}

TEST(RegistryCredentialsTest, AJobGetsOnlyItsTeamsCredentialForItsImagesRegistry) {
  RegistryCredentials all;
  RegistryCredential vision = Good();
  vision.registry = "ghcr.io";
  RegistryCredential audio = vision;
  audio.team = "audio";
  audio.secret = "other";
  RegistryCredential hub = vision;
  hub.registry = "docker.io";
  for (const auto& c : {vision, audio, hub}) all[{c.team, c.registry}] = c;
  EXPECT_EQ(CredentialForImage(all, "vision", "ghcr.io/v/train:1"), vision);
  EXPECT_EQ(CredentialForImage(all, "audio", "ghcr.io/v/train:1"), audio);
  EXPECT_EQ(CredentialForImage(all, "vision", "ubuntu:24.04"), hub);
  EXPECT_EQ(CredentialForImage(all, "audio", "ubuntu:24.04"), std::nullopt);
  EXPECT_EQ(CredentialForImage(all, "speech", "ghcr.io/v/train:1"), std::nullopt);
  EXPECT_EQ(CredentialForImage(all, "vision", "quay.io/v/train:1"), std::nullopt);
  EXPECT_EQ(CredentialForImage(all, "vision", ""), std::nullopt);
  EXPECT_EQ(CredentialForImage(all, "", "ghcr.io/v/train:1"), std::nullopt);
  EXPECT_EQ(CountForTeam(all, "vision"), 2u);
  EXPECT_EQ(CountForTeam(all, "audio"), 1u);
  EXPECT_EQ(CountForTeam(all, "speech"), 0u);
}

// A stored row of team vision for ghcr.io whose secret `box` sealed.
StoredRegistryCredential SealedWith(const SecretBox& box) {
  return {.team = "vision",
          .registry = "ghcr.io",
          .username = "v",
          .sealed_secret = *box.Seal("s3cret", SealingContext("vision", "ghcr.io")),
          .updated_at_ms = 7};
}

TEST(StoredSecretPlanTest, OnlyWhatThePreviousKeySealedIsResealed) {
  const SecretBox current = *SecretBox::FromKey(std::string(kSecretKeyBytes, 'n'));
  const SecretBox previous = *SecretBox::FromKey(std::string(kSecretKeyBytes, 'o'));
  const SecretBox other = *SecretBox::FromKey(std::string(kSecretKeyBytes, 'x'));
  const std::string now = current.key_id();
  const std::string before = previous.key_id();
  EXPECT_EQ(PlanStoredSecret(SealedWith(previous), now, before), StoredSecretStep::kReseal);
  EXPECT_EQ(PlanStoredSecret(SealedWith(current), now, before), StoredSecretStep::kOpen);
  // Neither key's: opened with the current key, which says what is wrong.
  EXPECT_EQ(PlanStoredSecret(SealedWith(other), now, before), StoredSecretStep::kOpen);
  // Without a previous key nothing is resealed.
  EXPECT_EQ(PlanStoredSecret(SealedWith(previous), now, ""), StoredSecretStep::kOpen);
  // Plaintext of an older schema is sealed; without a current key nothing is read.
  const StoredRegistryCredential plaintext{
      .team = "vision", .registry = "ghcr.io", .username = "v", .plaintext_secret = "p"};
  EXPECT_EQ(PlanStoredSecret(plaintext, now, before), StoredSecretStep::kSeal);
  EXPECT_EQ(PlanStoredSecret(plaintext, "", before), StoredSecretStep::kNoKey);
  EXPECT_EQ(PlanStoredSecret(SealedWith(previous), "", before), StoredSecretStep::kNoKey);
  // The same key given twice: it is the current one.
  EXPECT_EQ(PlanStoredSecret(SealedWith(current), now, now), StoredSecretStep::kOpen);
}

TEST(StoredSecretPlanTest, AHeaderThatIsNotASealedValueIsOpenedNotResealed) {
  const SecretBox current = *SecretBox::FromKey(std::string(kSecretKeyBytes, 'n'));
  const SecretBox previous = *SecretBox::FromKey(std::string(kSecretKeyBytes, 'o'));
  StoredRegistryCredential stored = SealedWith(previous);
  stored.sealed_secret[0] = 2;  // a format version this build does not know
  EXPECT_EQ(PlanStoredSecret(stored, current.key_id(), previous.key_id()), StoredSecretStep::kOpen);
  stored = SealedWith(previous);
  stored.sealed_secret.resize(kSealedHeaderBytes);  // truncated
  EXPECT_EQ(PlanStoredSecret(stored, current.key_id(), previous.key_id()), StoredSecretStep::kOpen);
}

TEST(RegistryCredentialsTest, AnUnreadableCredentialGoesWithItsProblemAndNoSecret) {
  RegistryCredentials readable;
  RegistryCredential quay = Good();
  quay.registry = "quay.io";
  readable[{quay.team, quay.registry}] = quay;
  UnreadableRegistryCredentials unreadable;
  unreadable[{"vision", "ghcr.io"}] = RegistryCredentialView{.team = "vision",
                                                             .registry = "ghcr.io",
                                                             .username = "robot",
                                                             .updated_at_ms = 7,
                                                             .problem = "cannot be read"};
  EXPECT_EQ(AuthForImage(readable, unreadable, "vision", "ghcr.io/v/train:1"),
            (RegistryCredential{.team = "vision",
                                .registry = "ghcr.io",
                                .username = "robot",
                                .secret = "",
                                .updated_at_ms = 7,
                                .problem = "cannot be read"}));
  EXPECT_EQ(AuthForImage(readable, unreadable, "vision", "quay.io/v/train:1"), quay);
  // Only the team's, only for that registry.
  EXPECT_EQ(AuthForImage(readable, unreadable, "audio", "ghcr.io/v/train:1"), std::nullopt);
  EXPECT_EQ(AuthForImage(readable, unreadable, "vision", "docker.io/v/train:1"), std::nullopt);
  EXPECT_EQ(AuthForImage(readable, unreadable, "vision", ""), std::nullopt);
}

TEST(RegistryCredentialsTest, AViewHasEverythingButTheSecret) {
  RegistryCredential c = Good();
  c.updated_at_ms = 7;
  RegistryCredentialView view = ViewOf(c);
  EXPECT_EQ(view, (RegistryCredentialView{"vision", c.registry, "robot$ci", 7, ""}));
}

}  // namespace
}  // namespace ringmaster::scheduler
