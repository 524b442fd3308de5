#include "common/secret_box.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/status_test_util.h"

namespace ringmaster {
namespace {

using ::ringmaster::test::IsOkAndHolds;
using ::ringmaster::test::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

// StatusIs(code) whose message also contains `text`.
MATCHER_P2(StatusSays, code, text, "") {
  absl::Status status = ::ringmaster::test::StatusOf(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code && absl::StrContains(status.message(), text);
}

constexpr char kAd[] = "registry_credentials\0vision\0ghcr.io";
const std::string kAssociated(kAd, sizeof(kAd) - 1);
const std::string kSecret = "p\xc3\xa4ssw0rd-with-some-length";

SecretBox Box(char fill) { return *SecretBox::FromKey(std::string(kSecretKeyBytes, fill)); }

TEST(SecretBoxTest, ASealedValueOpensWithTheSameKeyAndAssociatedData) {
  const SecretBox box = Box('k');
  RM_ASSERT_OK_AND_ASSIGN(std::string sealed, box.Seal(kSecret, kAssociated));
  EXPECT_EQ(sealed.size(), kSealedMinBytes + kSecret.size());
  EXPECT_EQ(static_cast<uint8_t>(sealed[0]), kSealedFormatVersion);
  EXPECT_THAT(sealed, Not(HasSubstr(kSecret)));
  RM_ASSERT_OK_AND_ASSIGN(std::string opened, box.Open(sealed, kAssociated));
  EXPECT_EQ(opened, kSecret);
  // An empty plaintext and empty associated data are values too.
  RM_ASSERT_OK_AND_ASSIGN(std::string empty, box.Seal("", ""));
  EXPECT_EQ(empty.size(), kSealedMinBytes);
  EXPECT_THAT(box.Open(empty, ""), IsOkAndHolds(std::string()));
}

TEST(SecretBoxTest, EverySealTakesAFreshNonce) {
  const SecretBox box = Box('k');
  std::set<std::string> nonces;
  for (int i = 0; i < 64; ++i) {
    RM_ASSERT_OK_AND_ASSIGN(std::string sealed, box.Seal(kSecret, kAssociated));
    nonces.insert(sealed.substr(1 + kSealedKeyIdBytes, kSealedNonceBytes));
  }
  EXPECT_EQ(nonces.size(), 64u);
}

TEST(SecretBoxTest, AnotherKeyIsFailedPreconditionNamingBothKeyIds) {
  RM_ASSERT_OK_AND_ASSIGN(std::string sealed, Box('k').Seal(kSecret, kAssociated));
  const SecretBox other = Box('o');
  auto opened = other.Open(sealed, kAssociated);
  EXPECT_THAT(opened,
              StatusSays(absl::StatusCode::kFailedPrecondition, "sealed with another secrets key"));
  EXPECT_THAT(opened.status().message(), HasSubstr(Box('k').key_id()));
  EXPECT_THAT(opened.status().message(), HasSubstr(other.key_id()));
  EXPECT_NE(Box('k').key_id(), other.key_id());
}

TEST(SecretBoxTest, TheKeyIdOfASealedValueIsReadWithoutAKey) {
  RM_ASSERT_OK_AND_ASSIGN(std::string sealed, Box('k').Seal(kSecret, kAssociated));
  EXPECT_EQ(SealedKeyId(sealed), Box('k').key_id());
  EXPECT_NE(SealedKeyId(sealed), Box('o').key_id());
  // Not a value of this build's format: no key id.
  EXPECT_EQ(SealedKeyId(""), "");
  EXPECT_EQ(SealedKeyId(sealed.substr(0, kSealedMinBytes - 1)), "");
  EXPECT_EQ(SealedKeyId(kSecret), "");
  sealed[0] = 2;
  EXPECT_EQ(SealedKeyId(sealed), "");
}

TEST(SecretBoxTest, AnotherKeyWithTheSameKeyIdStillDoesNotOpen) {
  // The key id is only a diagnosis: a value whose id bytes were rewritten to the reader's is
  // refused by the tag.
  RM_ASSERT_OK_AND_ASSIGN(std::string sealed, Box('k').Seal(kSecret, kAssociated));
  const SecretBox other = Box('o');
  sealed.replace(1, kSealedKeyIdBytes, absl::HexStringToBytes(other.key_id()));
  EXPECT_THAT(other.Open(sealed, kAssociated), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(SecretBoxTest, AnyAlteredByteOfTheValueIsDataLoss) {
  const SecretBox box = Box('k');
  RM_ASSERT_OK_AND_ASSIGN(const std::string sealed, box.Seal(kSecret, kAssociated));
  // Every byte but the version and the key id (those give FAILED_PRECONDITION): the nonce, the
  // ciphertext and the tag.
  for (size_t i = 1 + kSealedKeyIdBytes; i < sealed.size(); ++i) {
    std::string altered = sealed;
    altered[i] = static_cast<char>(altered[i] ^ 0x01);
    EXPECT_THAT(box.Open(altered, kAssociated),
                StatusSays(absl::StatusCode::kDataLoss, "does not authenticate"))
        << "byte " << i;
  }
}

TEST(SecretBoxTest, AlteredAssociatedDataIsDataLoss) {
  const SecretBox box = Box('k');
  RM_ASSERT_OK_AND_ASSIGN(std::string sealed, box.Seal(kSecret, kAssociated));
  const std::string audio("registry_credentials\0audio\0ghcr.io", 34);
  EXPECT_THAT(box.Open(sealed, audio), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(box.Open(sealed, ""), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(box.Open(sealed, kAssociated + "x"), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(SecretBoxTest, ATruncatedValueIsDataLoss) {
  const SecretBox box = Box('k');
  RM_ASSERT_OK_AND_ASSIGN(const std::string sealed, box.Seal(kSecret, kAssociated));
  EXPECT_THAT(box.Open("", kAssociated), StatusIs(absl::StatusCode::kDataLoss));
  for (size_t n : {size_t{1}, size_t{5}, kSealedHeaderBytes, kSealedMinBytes - 1}) {
    EXPECT_THAT(box.Open(sealed.substr(0, n), kAssociated),
                StatusSays(absl::StatusCode::kDataLoss, "truncated"))
        << n << " bytes";
  }
  // Long enough to parse, but the tag is cut: it does not authenticate.
  for (size_t n : {kSealedMinBytes, sealed.size() - 1}) {
    EXPECT_THAT(box.Open(sealed.substr(0, n), kAssociated), StatusIs(absl::StatusCode::kDataLoss))
        << n << " bytes";
  }
}

TEST(SecretBoxTest, AnUnknownFormatVersionIsFailedPrecondition) {
  const SecretBox box = Box('k');
  RM_ASSERT_OK_AND_ASSIGN(std::string sealed, box.Seal(kSecret, kAssociated));
  sealed[0] = 2;
  EXPECT_THAT(box.Open(sealed, kAssociated),
              StatusSays(absl::StatusCode::kFailedPrecondition, "format version 2"));
  // A plaintext password is not a sealed value.
  EXPECT_THAT(box.Open(kSecret, kAssociated), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(SecretBoxTest, KeysAreThirtyTwoBytesOrSixtyFourHexDigits) {
  EXPECT_THAT(SecretBox::FromKey(std::string(31, 'k')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const std::string raw(kSecretKeyBytes, '\x7f');
  const std::string hex = absl::BytesToHexString(raw);
  RM_ASSERT_OK_AND_ASSIGN(SecretBox from_raw, SecretBox::FromKeyFileContent(raw, "f"));
  RM_ASSERT_OK_AND_ASSIGN(SecretBox from_hex, SecretBox::FromKeyFileContent(hex + "\n", "f"));
  RM_ASSERT_OK_AND_ASSIGN(SecretBox upper,
                          SecretBox::FromKeyFileContent(" 7F7F" + hex.substr(4), "f"));
  EXPECT_EQ(from_raw.key_id(), from_hex.key_id());
  EXPECT_EQ(from_raw.key_id(), upper.key_id());
  RM_ASSERT_OK_AND_ASSIGN(std::string sealed, from_raw.Seal(kSecret, kAssociated));
  EXPECT_THAT(from_hex.Open(sealed, kAssociated), IsOkAndHolds(kSecret));
  for (const std::string& bad :
       {std::string(), hex.substr(2), hex + "00", "zz" + hex.substr(2), std::string(33, 'k')}) {
    auto box = SecretBox::FromKeyFileContent(bad, "/etc/key");
    EXPECT_THAT(box, StatusSays(absl::StatusCode::kInvalidArgument, "/etc/key"));
  }
}

class SecretsKeyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "/secrets-key-XXXXXX";
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string dir_;
};

TEST_F(SecretsKeyFileTest, AMissingKeyFileIsMadeOnceWithModeSixHundred) {
  const std::string path = dir_ + "/state/ringmaster/secrets.key";
  EXPECT_THAT(LoadSecretsKey(path), StatusIs(absl::StatusCode::kNotFound));
  bool created = false;
  RM_ASSERT_OK_AND_ASSIGN(SecretBox made, LoadOrCreateSecretsKey(path, &created));
  EXPECT_TRUE(created);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir_ + "/state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  RM_ASSERT_OK_AND_ASSIGN(std::string sealed, made.Seal(kSecret, kAssociated));
  // The second start reads the same key.
  RM_ASSERT_OK_AND_ASSIGN(SecretBox again, LoadOrCreateSecretsKey(path, &created));
  EXPECT_FALSE(created);
  EXPECT_EQ(again.key_id(), made.key_id());
  EXPECT_THAT(again.Open(sealed, kAssociated), IsOkAndHolds(kSecret));
}

TEST_F(SecretsKeyFileTest, AKeyFileThatHoldsNoKeyIsInvalidArgumentAndIsNotReplaced) {
  const std::string path = dir_ + "/secrets.key";
  std::ofstream(path) << "not a key\n";
  bool created = true;
  EXPECT_THAT(LoadOrCreateSecretsKey(path, &created),
              StatusSays(absl::StatusCode::kInvalidArgument, path));
  EXPECT_FALSE(created);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "not a key");
}

TEST_F(SecretsKeyFileTest, AKeyFileThatCannotBeMadeIsFailedPreconditionNamingIt) {
  // Its directory would be under a plain file (as root, a read-only directory would not do).
  std::ofstream(dir_ + "/file") << "x";
  bool created = true;
  EXPECT_THAT(LoadOrCreateSecretsKey(dir_ + "/file/secrets.key", &created),
              StatusSays(absl::StatusCode::kFailedPrecondition, dir_ + "/file"));
  EXPECT_FALSE(created);
}

}  // namespace
}  // namespace ringmaster
