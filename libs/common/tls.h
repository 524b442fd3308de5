// Transport security of every Ringmaster gRPC server and channel: TLS from certificate files
// named by the same flags on every binary, mutual TLS between services, and the explicit
// plaintext escape hatch for loopback development. See docs/security.md.
//
//   --tls-cert FILE  (RINGMASTER_TLS_CERT)  this process's certificate chain, PEM
//   --tls-key FILE   (RINGMASTER_TLS_KEY)   its private key, PEM
//   --tls-ca FILE    (RINGMASTER_TLS_CA)    the CA bundle peers are verified against, PEM
//   --insecure       (RINGMASTER_INSECURE=1) plaintext; servers refuse it off loopback
//
// Certificates are read through gRPC's FileWatcherCertificateProvider: replaced files are
// picked up within kTlsReloadIntervalS, without a restart; connections already open keep the
// certificate they were made with.
//
// Everything here is stateless and thread-safe.
#ifndef RINGMASTER_LIBS_COMMON_TLS_H_
#define RINGMASTER_LIBS_COMMON_TLS_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/auth_context.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flags.h"

namespace ringmaster {

inline constexpr unsigned int kTlsReloadIntervalS = 10;

// Names of the environment variables (flag fallbacks; also how a worker hands its
// certificates to ringmaster-rsh and ringmaster-rank).
inline constexpr const char* kTlsCertEnv = "RINGMASTER_TLS_CERT";
inline constexpr const char* kTlsKeyEnv = "RINGMASTER_TLS_KEY";
inline constexpr const char* kTlsCaEnv = "RINGMASTER_TLS_CA";
inline constexpr const char* kInsecureEnv = "RINGMASTER_INSECURE";

struct TlsOptions {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  // Plaintext, no peer checks. Development on loopback only.
  bool insecure = false;
};

// What a server asks of its clients' certificates.
enum class ClientCertificates {
  // Mutual TLS: a client without a certificate chaining to --tls-ca is refused in the
  // handshake (service-to-service ports: the worker agent).
  kRequire,
  // A certificate is verified when given; clients without one connect too (ports that serve
  // people and ranks: the scheduler's API, the metrics ingest). Handlers look at the peer.
  kVerifyIfPresent,
};

// Declares --tls-cert, --tls-key, --tls-ca and --insecure.
void AddTlsFlags(Flags& flags);
// Reads them back; INVALID_ARGUMENT naming the flag for a bad --insecure value.
absl::StatusOr<TlsOptions> TlsOptionsFromFlags(const Flags& flags);
// From the environment alone (programs without flags: ringmaster-rsh, ringmaster-rank).
TlsOptions TlsOptionsFromEnvironment();
// The environment that makes a child process use `options` (the inverse of the above).
// `with_identity` false leaves out the certificate and key: the child can verify servers but
// has no identity of its own (what a rank's workload gets).
std::map<std::string, std::string> TlsEnvironment(const TlsOptions& options, bool with_identity);

// True for 127.0.0.0/8, ::1, "localhost" and unix: sockets. `address` is HOST:PORT or HOST.
bool IsLoopbackAddress(const std::string& address);

// Server credentials for a port listening on `listen_address` (named by `listen_flag` in
// errors). --insecure: refused with FAILED_PRECONDITION naming --insecure and the flag when
// the address is not loopback, else plaintext with a loud warning in the log. TLS: needs the
// certificate, key and CA files to be readable PEM (INVALID_ARGUMENT naming the flag).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options, ClientCertificates client_certificates,
    const std::string& listen_flag, const std::string& listen_address);

// How a client checks the server's certificate beyond its chain to the CA.
enum class ServerName {
  // The name dialled (host of the target) must be in the certificate: the scheduler and the
  // metrics service, reached by their well-known names.
  kVerify,
  // Any certificate of the cluster's CA: worker agents, reached by node IP addresses that
  // their certificates need not list (docs/security.md says what this trusts). Without
  // --tls-ca it is kVerify against the system's roots.
  kAnyOfTheCa,
};

// Channel credentials: TLS verifying the server against --tls-ca (the system's roots when no CA
// is given) and, with ServerName::kVerify, its name against the address dialled; the
// certificate and key, when given, are this client's identity. --insecure: plaintext.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& options, ServerName server_name = ServerName::kVerify);

// Logs the loud warning of --insecure once per process (servers log it themselves).
void WarnInsecure(const std::string& program);

// The DNS names in the subjectAltName of the peer's verified certificate; empty when the peer
// sent none (or the connection is plaintext).
std::vector<std::string> PeerDnsNames(const grpc::AuthContext& context);
// True when the peer presented a certificate that was verified against the CA.
bool PeerHasVerifiedCertificate(const grpc::AuthContext& context);

// The rule that admits a worker: its certificate carries `worker_id` as a subjectAltName DNS
// name (the common name is not used). PERMISSION_DENIED naming the id and the names it has
// otherwise.
absl::Status CheckWorkerIdentity(const grpc::AuthContext& context, const std::string& worker_id);

// The rule of calls only the scheduler makes (a worker's ReadLogs): the peer's verified
// certificate has one of `names` as a subjectAltName DNS name. PERMISSION_DENIED naming `what`,
// the names wanted and the names the certificate has otherwise.
absl::Status CheckPeerNamed(const grpc::AuthContext& context, const std::vector<std::string>& names,
                            const std::string& what);

// The rule of service-to-service calls: the peer has a verified certificate. PERMISSION_DENIED
// naming `what` otherwise.
absl::Status CheckServicePeer(const grpc::AuthContext& context, const std::string& what);

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_TLS_H_
