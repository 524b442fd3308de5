// Job tokens (libs/common/job_token.h) with certificates of the test CA, of another CA, and
// tokens changed after signing.
#include "common/job_token.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "support/test_certs.h"
#include "worker/host/file_io.h"

namespace ringmaster {
namespace {

using test::TestCerts;
using ::testing::HasSubstr;

std::string Read(const std::string& path) { return worker::ReadFileToString(path).value_or(""); }

std::string SignAs(const test::CertFiles& files, const std::string& job_id) {
  absl::StatusOr<std::string> token = SignJobToken(job_id, Read(files.cert), Read(files.key));
  EXPECT_TRUE(token.ok()) << token.status();
  return token.value_or("");
}

JobTokenVerifier Verifier() {
  absl::StatusOr<JobTokenVerifier> v = JobTokenVerifier::FromCaPem(Read(TestCerts::Get().ca()));
  EXPECT_TRUE(v.ok()) << v.status();
  return *v;
}

TEST(JobTokenTest, AWorkersTokenNamesItsJob) {
  const std::string token = SignAs(TestCerts::Get().Worker("w1"), "j-0123456789ab");
  absl::StatusOr<std::string> job = Verifier().Verify(token);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(*job, "j-0123456789ab");
  EXPECT_LT(token.size(), kMaxJobTokenBytes);
  // What the metrics service pays once per stream (docs/security.md, "Rank samples").
  const JobTokenVerifier v = Verifier();
  constexpr int kRounds = 200;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) ASSERT_TRUE(v.Verify(token).ok());
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      kRounds;
  std::printf("job token: %zu bytes; %.0f us per check (mean of %d)\n", token.size(), us, kRounds);
}

TEST(JobTokenTest, AnotherCasCertificateIsRefused) {
  const std::string token = SignAs(TestCerts::Foreign().Worker("w1"), "j-0123456789ab");
  absl::StatusOr<std::string> job = Verifier().Verify(token);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(job.status().message(), HasSubstr("not one of the cluster's CA"));
}

TEST(JobTokenTest, AnotherJobsIdInAValidTokenBreaksItsSignature) {
  const std::string token = SignAs(TestCerts::Get().Worker("w1"), "j-0123456789ab");
  std::vector<std::string> parts = absl::StrSplit(token, '.');
  ASSERT_EQ(parts.size(), 4u);
  parts[1] = absl::WebSafeBase64Escape("j-ffffffffffff");
  absl::StatusOr<std::string> job = Verifier().Verify(absl::StrJoin(parts, "."));
  EXPECT_EQ(job.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(job.status().message(), HasSubstr("signature does not match"));
}

TEST(JobTokenTest, AForeignSignatureUnderAClusterCertificateIsRefused) {
  // A signature by another CA's key, presented with a certificate of the cluster's.
  std::vector<std::string> ours =
      absl::StrSplit(SignAs(TestCerts::Get().Worker("w1"), "j-0123456789ab"), '.');
  std::vector<std::string> theirs =
      absl::StrSplit(SignAs(TestCerts::Foreign().Worker("w1"), "j-0123456789ab"), '.');
  ours[2] = theirs[2];
  EXPECT_EQ(Verifier().Verify(absl::StrJoin(ours, ".")).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(JobTokenTest, JunkIsNotAToken) {
  const JobTokenVerifier v = Verifier();
  for (const std::string& junk :
       {std::string(), std::string("rmj1"), std::string("rmj1.a.b.c"), std::string("rmj2.a.b.c"),
        std::string("rmj1...."), std::string(kMaxJobTokenBytes + 1, 'a'),
        "rmj1." + absl::WebSafeBase64Escape("j-1") + ".AAAA." +
            absl::WebSafeBase64Escape("-----BEGIN CERTIFICATE-----\nAAAA\n")}) {
    absl::StatusOr<std::string> job = v.Verify(junk);
    EXPECT_EQ(job.status().code(), absl::StatusCode::kUnauthenticated) << junk.substr(0, 40);
  }
}

TEST(JobTokenTest, AKeyThatIsNotTheCertificatesSignsNothing) {
  const test::CertFiles w1 = TestCerts::Get().Worker("w1");
  const test::CertFiles w2 = TestCerts::Get().Worker("w2");
  absl::StatusOr<std::string> token = SignJobToken("j-0123456789ab", Read(w1.cert), Read(w2.key));
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(SignJobToken("j-0123456789ab", "", Read(w1.key)).ok());
  EXPECT_FALSE(JobTokenVerifier::FromCaPem("not a certificate").ok());
}

}  // namespace
}  // namespace ringmaster
