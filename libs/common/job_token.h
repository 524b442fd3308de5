// A job token: a worker's word that its holder is a rank of one job, which the metrics service
// checks before it takes that job's samples (docs/security.md, "Rank samples").
//
// The worker signs the job id with the private key of its own TLS certificate and puts its
// certificate chain in the token, so the checker needs nothing but the cluster's CA: no secret
// to share, and a certificate the cluster already issues. The token says nothing about the
// rank or the attempt: ranks of one job are one team's processes, which may report for each
// other. It lasts as long as the certificate that signed it.
//
// Format: "rmj1." base64url(job id) "." base64url(signature) "." base64url(certificate chain,
// PEM), the signature an ECDSA or RSA SHA-256 signature of "ringmaster-job-token-v1\n" + job id.
#ifndef RINGMASTER_LIBS_COMMON_JOB_TOKEN_H_
#define RINGMASTER_LIBS_COMMON_JOB_TOKEN_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

// Where ranks find their token, and the gRPC metadata key that carries it to the service.
inline constexpr char kJobTokenEnv[] = "RINGMASTER_JOB_TOKEN";
inline constexpr char kJobTokenMetadata[] = "ringmaster-job-token";
// Longer tokens are refused unread (a chain of a few certificates is a few KiB).
inline constexpr size_t kMaxJobTokenBytes = 16 * 1024;

// Signs `job_id` with `key_pem` (the private key of the first certificate of `chain_pem`).
// INVALID_ARGUMENT when the key or chain cannot be read, or the key is not the certificate's.
absl::StatusOr<std::string> SignJobToken(const std::string& job_id, const std::string& chain_pem,
                                         const std::string& key_pem);

// Checks tokens against a CA. Thread-safe once made.
class JobTokenVerifier {
 public:
  // INVALID_ARGUMENT when `ca_pem` holds no certificate.
  static absl::StatusOr<JobTokenVerifier> FromCaPem(const std::string& ca_pem);

  // The job id a valid token was signed for; UNAUTHENTICATED saying what is wrong otherwise
  // (not a token, a certificate the CA did not issue or that expired, a bad signature).
  absl::StatusOr<std::string> Verify(const std::string& token) const;

 private:
  struct Store;
  explicit JobTokenVerifier(std::shared_ptr<const Store> store) : store_(std::move(store)) {}
  std::shared_ptr<const Store> store_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_JOB_TOKEN_H_
