#include "common/job_token.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringmaster {
namespace {

constexpr char kVersion[] = "rmj1";
constexpr char kSigned[] = "ringmaster-job-token-v1\n";

struct Free {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
  void operator()(STACK_OF(X509) * p) const { sk_X509_pop_free(p, X509_free); }
};
template <typename T>
using Owned = std::unique_ptr<T, Free>;

// OpenSSL queues an error per thread for every failed call (and the last PEM read always fails):
// left there, they would be taken for errors of the next TLS call on the same gRPC thread.
struct ClearErrorsOnExit {
  ~ClearErrorsOnExit() { ERR_clear_error(); }
};

Owned<BIO> MemoryBio(const std::string& data) {
  return Owned<BIO>(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

// Every certificate of a PEM text, in order.
std::vector<Owned<X509>> ReadCertificates(const std::string& pem) {
  std::vector<Owned<X509>> out;
  Owned<BIO> bio = MemoryBio(pem);
  while (bio) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    out.emplace_back(cert);
  }
  return out;
}

}  // namespace

struct JobTokenVerifier::Store {
  X509_STORE* store = X509_STORE_new();
  ~Store() { X509_STORE_free(store); }
};

absl::StatusOr<std::string> SignJobToken(const std::string& job_id, const std::string& chain_pem,
                                         const std::string& key_pem) {
  ClearErrorsOnExit clear;
  std::vector<Owned<X509>> chain = ReadCertificates(chain_pem);
  if (chain.empty()) return absl::InvalidArgumentError("job token: no certificate to sign with");
  Owned<BIO> key_bio = MemoryBio(key_pem);
  Owned<EVP_PKEY> key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key) return absl::InvalidArgumentError("job token: the private key cannot be read");
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    return absl::InvalidArgumentError("job token: the key is not the certificate's");
  }
  const std::string data = absl::StrCat(kSigned, job_id);
  Owned<EVP_MD_CTX> md(EVP_MD_CTX_new());
  size_t length = 0;
  if (!md || EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(md.get(), nullptr, &length,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    return absl::InternalError("job token: signing failed");
  }
  std::string signature(length, '\0');
  if (EVP_DigestSign(md.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    return absl::InternalError("job token: signing failed");
  }
  signature.resize(length);
  return absl::StrCat(kVersion, ".", absl::WebSafeBase64Escape(job_id), ".",
                      absl::WebSafeBase64Escape(signature), ".",
                      absl::WebSafeBase64Escape(chain_pem));
}

absl::StatusOr<JobTokenVerifier> JobTokenVerifier::FromCaPem(const std::string& ca_pem) {
  ClearErrorsOnExit clear;
  auto store = std::make_shared<Store>();
  int added = 0;
  for (const Owned<X509>& cert : ReadCertificates(ca_pem)) {
    added += X509_STORE_add_cert(store->store, cert.get()) == 1;
  }
  if (added == 0) return absl::InvalidArgumentError("job tokens: the CA file holds no certificate");
  return JobTokenVerifier(std::move(store));
}

absl::StatusOr<std::string> JobTokenVerifier::Verify(const std::string& token) const {
  ClearErrorsOnExit clear;
  auto bad = [](const std::string& why) {
    return absl::UnauthenticatedError(absl::StrCat("job token: ", why));
  };
  if (token.empty()) return bad("none was sent");
  if (token.size() > kMaxJobTokenBytes) {
    return bad(absl::StrCat("longer than ", kMaxJobTokenBytes, " bytes"));
  }
  std::vector<std::string> parts = absl::StrSplit(token, '.');
  std::string job_id, signature, chain_pem;
  if (parts.size() != 4 || parts[0] != kVersion ||
      !absl::WebSafeBase64Unescape(parts[1], &job_id) ||
      !absl::WebSafeBase64Unescape(parts[2], &signature) ||
      !absl::WebSafeBase64Unescape(parts[3], &chain_pem)) {
    return bad("not a job token");
  }
  std::vector<Owned<X509>> chain = ReadCertificates(chain_pem);
  if (chain.empty()) return bad("it carries no certificate");
  Owned<STACK_OF(X509)> untrusted(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) {
    if (X509_up_ref(chain[i].get()) != 1 || sk_X509_push(untrusted.get(), chain[i].get()) == 0) {
      return absl::InternalError("job token: out of memory");
    }
  }
  Owned<X509_STORE_CTX> ctx(X509_STORE_CTX_new());
  if (!ctx ||
      X509_STORE_CTX_init(ctx.get(), store_->store, chain.front().get(), untrusted.get()) != 1) {
    return absl::InternalError("job token: out of memory");
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    return bad(absl::StrCat("its certificate is not one of the cluster's CA (",
                            X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())),
                            ")"));
  }
  const std::string data = absl::StrCat(kSigned, job_id);
  Owned<EVP_MD_CTX> md(EVP_MD_CTX_new());
  if (!md ||
      EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr,
                           X509_get0_pubkey(chain.front().get())) != 1 ||
      EVP_DigestVerify(md.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(data.data()),
                       data.size()) != 1) {
    return bad("the signature does not match");
  }
  return job_id;
}

}  // namespace ringmaster
