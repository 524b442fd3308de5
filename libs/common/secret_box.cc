#include "common/secret_box.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ringmaster {
namespace {

constexpr char kKeyIdContext[] = "ringmaster-secrets-key-id-v1";
// A key file is 32 bytes or 64 hex digits with a little white space: anything much longer is
// not a key file.
constexpr size_t kMaxKeyFileBytes = 1024;

struct FreeCipherContext {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, FreeCipherContext>;

// OpenSSL queues an error per thread for every failed call: left there, they would be taken
// for errors of the next TLS call on the same thread.
struct ClearErrorsOnExit {
  ~ClearErrorsOnExit() { ERR_clear_error(); }
};

unsigned char* Bytes(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }
const unsigned char* Bytes(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

std::string KeyId(const std::string& key) {
  std::string input = absl::StrCat(kKeyIdContext, key);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // SHA-256 of a short buffer fails only when OpenSSL cannot allocate: the id is then all zero,
  // which only weakens the "another key" diagnosis (the tag still decides).
  if (EVP_Digest(input.data(), input.size(), digest, &length, EVP_sha256(), nullptr) != 1 ||
      length < kSealedKeyIdBytes) {
    return std::string(kSealedKeyIdBytes, '\0');
  }
  return std::string(reinterpret_cast<const char*>(digest), kSealedKeyIdBytes);
}

absl::Status OpenSslError(const char* what) {
  return absl::InternalError(absl::StrCat("AES-256-GCM: ", what, " failed"));
}

}  // namespace

SecretBox::SecretBox(std::string key)
    : key_(std::move(key)), key_id_(KeyId(key_)), key_id_hex_(absl::BytesToHexString(key_id_)) {}

absl::StatusOr<SecretBox> SecretBox::FromKey(absl::string_view key) {
  if (key.size() != kSecretKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a secrets key is ", kSecretKeyBytes, " bytes, not ", key.size()));
  }
  return SecretBox(std::string(key));
}

absl::StatusOr<SecretBox> SecretBox::FromKeyFileContent(absl::string_view content,
                                                        const std::string& source) {
  if (content.size() == kSecretKeyBytes) return FromKey(content);
  absl::string_view hex = absl::StripAsciiWhitespace(content);
  const bool all_hex = !hex.empty() && std::all_of(hex.begin(), hex.end(), [](char c) {
    return absl::ascii_isxdigit(static_cast<unsigned char>(c));
  });
  if (hex.size() == 2 * kSecretKeyBytes && all_hex) return FromKey(absl::HexStringToBytes(hex));
  return absl::InvalidArgumentError(
      absl::StrCat(source, " holds no secrets key: it must be ", kSecretKeyBytes, " bytes, or ",
                   2 * kSecretKeyBytes, " hex digits (openssl rand -hex ", kSecretKeyBytes,
                   "); it has ", content.size(), " bytes"));
}

absl::StatusOr<std::string> SecretBox::Seal(absl::string_view plaintext,
                                            absl::string_view associated_data) const {
  if (plaintext.size() > INT_MAX / 2 || associated_data.size() > INT_MAX / 2) {
    return absl::InvalidArgumentError("a sealed secret is at most 1 GiB");
  }
  ClearErrorsOnExit clear;
  std::string out(kSealedHeaderBytes + plaintext.size() + kSealedTagBytes, '\0');
  out[0] = static_cast<char>(kSealedFormatVersion);
  out.replace(1, kSealedKeyIdBytes, key_id_);
  unsigned char* nonce = Bytes(out) + 1 + kSealedKeyIdBytes;
  if (RAND_bytes(nonce, kSealedNonceBytes) != 1) return OpenSslError("RAND_bytes for a nonce");
  CipherContext ctx(EVP_CIPHER_CTX_new());
  int length = 0;
  const std::string header = out.substr(0, kSealedHeaderBytes);
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kSealedNonceBytes, nullptr) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, Bytes(key_), nonce) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &length, Bytes(header),
                        static_cast<int>(header.size())) != 1 ||
      (!associated_data.empty() &&
       EVP_EncryptUpdate(ctx.get(), nullptr, &length, Bytes(associated_data),
                         static_cast<int>(associated_data.size())) != 1)) {
    return OpenSslError("encryption setup");
  }
  unsigned char* ciphertext = Bytes(out) + kSealedHeaderBytes;
  int written = 0;
  if (!plaintext.empty()) {
    if (EVP_EncryptUpdate(ctx.get(), ciphertext, &length, Bytes(plaintext),
                          static_cast<int>(plaintext.size())) != 1) {
      return OpenSslError("encryption");
    }
    written = length;
  }
  if (EVP_EncryptFinal_ex(ctx.get(), ciphertext + written, &length) != 1 ||
      static_cast<size_t>(written + length) != plaintext.size() ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kSealedTagBytes,
                          ciphertext + plaintext.size()) != 1) {
    return OpenSslError("encryption");
  }
  return out;
}

std::string SealedKeyId(absl::string_view sealed) {
  if (sealed.size() < kSealedMinBytes || static_cast<uint8_t>(sealed[0]) != kSealedFormatVersion) {
    return "";
  }
  return absl::BytesToHexString(sealed.substr(1, kSealedKeyIdBytes));
}

absl::StatusOr<std::string> SecretBox::Open(absl::string_view sealed,
                                            absl::string_view associated_data) const {
  if (sealed.empty()) return absl::DataLossError("the sealed value is empty");
  if (static_cast<uint8_t>(sealed[0]) != kSealedFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("the sealed value is in format version ", static_cast<uint8_t>(sealed[0]),
                     "; this build reads version ", kSealedFormatVersion,
                     " (written by a newer Ringmaster, or not a sealed value)"));
  }
  if (sealed.size() < kSealedMinBytes) {
    return absl::DataLossError(absl::StrCat("the sealed value is truncated: ", sealed.size(),
                                            " bytes, the least is ", kSealedMinBytes));
  }
  if (sealed.size() > INT_MAX / 2 || associated_data.size() > INT_MAX / 2) {
    return absl::DataLossError("the sealed value is longer than any this build seals");
  }
  const absl::string_view key_id = sealed.substr(1, kSealedKeyIdBytes);
  if (key_id != key_id_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the value was sealed with another secrets key (key id ", absl::BytesToHexString(key_id),
        "; this scheduler's key id is ", key_id_hex_, ")"));
  }
  ClearErrorsOnExit clear;
  const absl::string_view header = sealed.substr(0, kSealedHeaderBytes);
  const unsigned char* nonce = Bytes(sealed) + 1 + kSealedKeyIdBytes;
  const absl::string_view ciphertext =
      sealed.substr(kSealedHeaderBytes, sealed.size() - kSealedMinBytes);
  std::string tag(sealed.substr(sealed.size() - kSealedTagBytes));
  std::string out(ciphertext.size(), '\0');
  CipherContext ctx(EVP_CIPHER_CTX_new());
  int length = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kSealedNonceBytes, nullptr) != 1 ||
      EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, Bytes(key_), nonce) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &length, Bytes(header),
                        static_cast<int>(header.size())) != 1 ||
      (!associated_data.empty() &&
       EVP_DecryptUpdate(ctx.get(), nullptr, &length, Bytes(associated_data),
                         static_cast<int>(associated_data.size())) != 1)) {
    return OpenSslError("decryption setup");
  }
  int written = 0;
  if (!ciphertext.empty()) {
    if (EVP_DecryptUpdate(ctx.get(), Bytes(out), &length, Bytes(ciphertext),
                          static_cast<int>(ciphertext.size())) != 1) {
      return OpenSslError("decryption");
    }
    written = length;
  }
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kSealedTagBytes, Bytes(tag)) != 1) {
    return OpenSslError("decryption setup");
  }
  if (EVP_DecryptFinal_ex(ctx.get(), Bytes(out) + written, &length) != 1) {
    // Whatever was decrypted is not to be trusted, nor kept.
    OPENSSL_cleanse(out.data(), out.size());
    return absl::DataLossError(
        "the sealed value does not authenticate: it was altered, or it belongs to another "
        "record");
  }
  return out;
}

namespace {

absl::StatusOr<std::string> ReadKeyFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) == 0 && (st.st_mode & 077) != 0) {
    RM_LOG(kWarning) << "the secrets key file " << path
                     << " may be read by others than its owner; chmod 600 it";
  }
  std::string content(kMaxKeyFileBytes + 1, '\0');
  size_t got = 0;
  while (got < content.size()) {
    ssize_t n = read(fd, content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read ", path, ": ", std::strerror(error)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  content.resize(got);
  return content;
}

absl::Status MakeDirectories(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) return absl::OkStatus();
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    if (auto s = MakeDirectories(dir.substr(0, slash)); !s.ok()) return s;
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make the directory ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Writes a fresh key to a temporary file beside `path`, then links it to `path`, which fails
// when the name exists: a reader never sees a half-written key, and a key made by another
// process at the same moment is never replaced. False when that other process won.
absl::StatusOr<bool> CreateKeyFile(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
  if (auto s = MakeDirectories(dir); !s.ok()) return s;
  std::string key(kSecretKeyBytes, '\0');
  if (RAND_bytes(Bytes(key), static_cast<int>(key.size())) != 1) {
    ERR_clear_error();
    return absl::InternalError("RAND_bytes failed; no key can be made");
  }
  const std::string line = absl::StrCat(absl::BytesToHexString(key), "\n");
  OPENSSL_cleanse(key.data(), key.size());
  std::string temp = absl::StrCat(path, ".XXXXXX");
  int fd = mkstemp(temp.data());  // mode 0600
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  const bool written =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  const int write_error = errno;
  close(fd);
  if (!written) {
    unlink(temp.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(write_error)));
  }
  const int linked = link(temp.c_str(), path.c_str());
  const int link_error = errno;
  unlink(temp.c_str());
  if (linked != 0 && link_error != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(link_error)));
  }
  return linked == 0;
}

}  // namespace

absl::StatusOr<SecretBox> LoadSecretsKey(const std::string& path) {
  absl::StatusOr<std::string> content = ReadKeyFile(path);
  if (!content.ok()) return content.status();
  absl::StatusOr<SecretBox> box = SecretBox::FromKeyFileContent(*content, path);
  OPENSSL_cleanse(content->data(), content->size());
  return box;
}

absl::StatusOr<SecretBox> LoadOrCreateSecretsKey(const std::string& path, bool* created) {
  *created = false;
  absl::StatusOr<SecretBox> box = LoadSecretsKey(path);
  if (!absl::IsNotFound(box.status())) return box;
  absl::StatusOr<bool> made = CreateKeyFile(path);
  if (!made.ok()) return made.status();
  // Another process may have linked its key first; either way the file's key is the one.
  box = LoadSecretsKey(path);
  *created = box.ok() && *made;
  return box;
}

std::string DefaultSecretsKeyFile() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return absl::StrCat(state, "/ringmaster/secrets.key");
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') {
    return absl::StrCat(home, "/.local/state/ringmaster/secrets.key");
  }
  return "";
}

}  // namespace ringmaster
