#include "common/tls.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/net.h"

namespace ringmaster {
namespace {

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// The file exists, is readable and holds a PEM block: a clear error at start instead of a
// handshake that fails on every call.
absl::Status CheckPemFile(const std::string& flag, const std::string& path) {
  const std::string env = Flags::EnvName(flag);
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " (or ", env,
                     ") is needed for TLS; see docs/security.md (scripts/lib/dev_certs.sh makes "
                     "development certificates), or pass --insecure on loopback"));
  }
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " (or ", env, "): cannot read ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " (or ", env, "): ", path, " holds no PEM block"));
  }
  return absl::OkStatus();
}

std::vector<std::string> Property(const grpc::AuthContext& context, const char* name) {
  std::vector<std::string> out;
  for (const grpc::string_ref& v : context.FindPropertyValues(name)) {
    out.emplace_back(v.data(), v.size());
  }
  return out;
}

}  // namespace

void AddTlsFlags(Flags& flags) {
  flags.Add("tls-cert", "", "certificate chain (PEM) of this process; see docs/security.md");
  flags.Add("tls-key", "", "private key (PEM) of --tls-cert");
  flags.Add("tls-ca", "", "CA bundle (PEM) that peers' certificates are verified against");
  flags.AddSwitch("insecure",
                  "plaintext gRPC without any peer check: development on loopback only "
                  "(servers refuse it on other addresses)");
}

absl::StatusOr<TlsOptions> TlsOptionsFromFlags(const Flags& flags) {
  TlsOptions options;
  options.cert_file = flags.Get("tls-cert");
  options.key_file = flags.Get("tls-key");
  options.ca_file = flags.Get("tls-ca");
  if (auto s = flags.GetBool("insecure", &options.insecure); !s.ok()) return s;
  return options;
}

TlsOptions TlsOptionsFromEnvironment() {
  TlsOptions options;
  options.cert_file = EnvOr(kTlsCertEnv);
  options.key_file = EnvOr(kTlsKeyEnv);
  options.ca_file = EnvOr(kTlsCaEnv);
  bool insecure = false;
  const std::string value = EnvOr(kInsecureEnv);
  options.insecure = !value.empty() && absl::SimpleAtob(value, &insecure) && insecure;
  return options;
}

std::map<std::string, std::string> TlsEnvironment(const TlsOptions& options,
                                                  bool with_identity) {
  std::map<std::string, std::string> env;
  if (options.insecure) {
    env[kInsecureEnv] = "1";
    return env;
  }
  // Absolute: the children (orted, ranks) run in other directories.
  auto absolute = [](const std::string& path) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(path, ec);
    return ec ? path : p.string();
  };
  if (!options.ca_file.empty()) env[kTlsCaEnv] = absolute(options.ca_file);
  if (with_identity) {
    if (!options.cert_file.empty()) env[kTlsCertEnv] = absolute(options.cert_file);
    if (!options.key_file.empty()) env[kTlsKeyEnv] = absolute(options.key_file);
  }
  return env;
}

bool IsLoopbackAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) {
    return true;
  }
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, "address", &host, &port).ok()) host = address;  // no port
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  return false;
}

void WarnInsecure(const std::string& program) {
  static std::once_flag once;
  std::call_once(once, [&] {
    RM_LOG(kWarning)
        << "*** INSECURE: " << program
        << " runs with --insecure: gRPC in plaintext, no certificate checked, worker identities "
           "and service peers NOT verified. Loopback development only; see docs/security.md ***";
  });
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options, ClientCertificates client_certificates,
    const std::string& listen_flag, const std::string& listen_address) {
  if (options.insecure) {
    if (!IsLoopbackAddress(listen_address)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--insecure (or ", kInsecureEnv, ") is refused: ", listen_flag, " ", listen_address,
          " is not a loopback address; plaintext is for development on 127.0.0.0/8 only. Give "
          "--tls-cert, --tls-key and --tls-ca instead (docs/security.md)"));
    }
    return grpc::InsecureServerCredentials();
  }
  for (auto s : {CheckPemFile("tls-cert", options.cert_file),
                 CheckPemFile("tls-key", options.key_file),
                 CheckPemFile("tls-ca", options.ca_file)}) {
    if (!s.ok()) return s;
  }
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      options.key_file, options.cert_file, options.ca_file, kTlsReloadIntervalS);
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  tls.watch_root_certs();
  tls.set_cert_request_type(client_certificates == ClientCertificates::kRequire
                                ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(tls);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& options, ServerName server_name) {
  if (options.insecure) return grpc::InsecureChannelCredentials();
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key (RINGMASTER_TLS_CERT, RINGMASTER_TLS_KEY) go together");
  }
  const bool identity = !options.cert_file.empty();
  if (identity) {
    for (auto s : {CheckPemFile("tls-cert", options.cert_file),
                   CheckPemFile("tls-key", options.key_file)}) {
      if (!s.ok()) return s;
    }
  }
  if (!options.ca_file.empty()) {
    if (auto s = CheckPemFile("tls-ca", options.ca_file); !s.ok()) return s;
  }
  grpc::experimental::TlsChannelCredentialsOptions tls;
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (identity || !options.ca_file.empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        options.key_file, options.cert_file, options.ca_file, kTlsReloadIntervalS);
    tls.set_certificate_provider(provider);
    if (!options.ca_file.empty()) tls.watch_root_certs();
    if (identity) tls.watch_identity_key_cert_pairs();
  }
  // The chain is always verified; the verifier is the check after it (the host name by default).
  tls.set_verify_server_certs(true);
  // Without a CA of our own the system's roots decide, and then the name is checked too:
  // "any certificate" of a public CA would be anyone's.
  if (server_name == ServerName::kAnyOfTheCa && !options.ca_file.empty()) {
    tls.set_certificate_verifier(
        std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
    tls.set_check_call_host(false);
  }
  return grpc::experimental::TlsCredentials(tls);
}

std::vector<std::string> PeerDnsNames(const grpc::AuthContext& context) {
  return Property(context, GRPC_PEER_DNS_PROPERTY_NAME);
}

bool PeerHasVerifiedCertificate(const grpc::AuthContext& context) {
  // Servers verify every certificate they get (REQUEST_*_AND_VERIFY), so one in the auth
  // context is one that chained to the CA.
  return !Property(context, GRPC_X509_PEM_CERT_PROPERTY_NAME).empty();
}

absl::Status CheckWorkerIdentity(const grpc::AuthContext& context, const std::string& worker_id) {
  if (!PeerHasVerifiedCertificate(context)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", worker_id,
        " presented no client certificate: workers register with a certificate whose "
        "subjectAltName holds their id (--tls-cert, --tls-key)"));
  }
  std::vector<std::string> names = PeerDnsNames(context);
  for (const std::string& name : names) {
    if (name == worker_id) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "worker id ", worker_id, " is not a DNS name of the caller's certificate (it names: ",
      names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
}

absl::Status CheckPeerNamed(const grpc::AuthContext& context, const std::vector<std::string>& names,
                            const std::string& what) {
  std::vector<std::string> has;
  if (PeerHasVerifiedCertificate(context)) has = PeerDnsNames(context);
  for (const std::string& name : has) {
    for (const std::string& wanted : names) {
      if (name == wanted) return absl::OkStatus();
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      what, " is served only to a caller whose certificate names ", absl::StrJoin(names, " or "),
      " (the caller's names: ", has.empty() ? "none" : absl::StrJoin(has, ", "), ")"));
}

absl::Status CheckServicePeer(const grpc::AuthContext& context, const std::string& what) {
  if (PeerHasVerifiedCertificate(context)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " is accepted only from Ringmaster services with a certificate of the "
                         "cluster's CA"));
}

}  // namespace ringmaster
