// Certificates for tests: one development CA per test process, made on first use with
// scripts/lib/dev_certs.sh (the script the quickstart and compose use), and certificates for
// each worker id a test asks for. Every process a test starts gets TLS from these (Flags or
// Env); a test that wants plaintext asks for it explicitly. Thread-safe.
#ifndef RINGMASTER_TESTS_SUPPORT_TEST_CERTS_H_
#define RINGMASTER_TESTS_SUPPORT_TEST_CERTS_H_

#include <map>
#include <string>
#include <vector>

#include "common/tls.h"

namespace ringmaster::test {

// One certificate in cert-manager's layout: DIR/tls.crt, DIR/tls.key, DIR/ca.crt.
struct CertFiles {
  std::string cert;
  std::string key;
  std::string ca;

  TlsOptions Options() const { return TlsOptions{cert, key, ca, false}; }
  // --tls-cert=... --tls-key=... --tls-ca=...
  std::vector<std::string> Flags() const;
  // RINGMASTER_TLS_CERT/KEY/CA.
  std::map<std::string, std::string> Env() const;
};

class TestCerts {
 public:
  // The CA of this test process (made on first call; aborts the test binary when openssl or
  // the script fails: nothing TLS can run then).
  static const TestCerts& Get();
  // Another CA, unrelated to Get()'s: certificates that a cluster must refuse.
  static const TestCerts& Foreign();

  // DNS localhost, IP 127.0.0.1 (the scheduler's names).
  CertFiles Scheduler() const { return Named("scheduler"); }
  CertFiles Metrics() const { return Named("metrics"); }
  // A client certificate of the CA without any name (what ringctl logs once used; the agents'
  // ReadLogs now refuses it).
  CertFiles Client() const { return Named("client"); }
  // A certificate naming worker `id` (DNS) with IP SANs 127.0.0.1 .. 127.0.0.9.
  CertFiles Worker(const std::string& id) const;
  // Only the CA: a client that verifies servers but has no identity.
  TlsOptions CaOnly() const { return TlsOptions{"", "", ca_, false}; }
  const std::string& ca() const { return ca_; }

 private:
  explicit TestCerts(std::string dir);
  CertFiles Named(const std::string& name) const;

  std::string dir_;
  std::string ca_;
};

// Plaintext: what `--insecure` processes and their clients use.
inline TlsOptions InsecureTls() { return TlsOptions{"", "", "", true}; }

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_TEST_CERTS_H_
