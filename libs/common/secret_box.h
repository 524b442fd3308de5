// A SecretBox seals small secrets (teams' registry passwords) for storage with AES-256-GCM, so
// that what a database holds, or a backup or a replica of it, reveals nothing without the key
// (docs/environments.md, "Private registries"). It holds one 256-bit key; the key's file is read
// and, on a first start, made by LoadOrCreateSecretsKey. Thread-safe once made: Seal and Open
// keep no state between calls.
//
// A sealed value is one versioned blob of bytes:
//   byte 0       format version, 1
//   bytes 1..4   key id: the first 4 bytes of SHA-256("ringmaster-secrets-key-id-v1" || key), so
//                a value sealed under another key is told apart from an altered one
//   bytes 5..16  nonce: 96 random bits, fresh for every value
//   bytes 17..   the ciphertext (as long as the plaintext), then the 128-bit GCM tag
// The caller's associated data (what the value belongs to, e.g. a team and a registry) and the
// header (bytes 0..16) are authenticated with it: a value copied to another row, or a header
// edited, does not open.
#ifndef RINGMASTER_LIBS_COMMON_SECRET_BOX_H_
#define RINGMASTER_LIBS_COMMON_SECRET_BOX_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

inline constexpr size_t kSecretKeyBytes = 32;
inline constexpr uint8_t kSealedFormatVersion = 1;
inline constexpr size_t kSealedKeyIdBytes = 4;
inline constexpr size_t kSealedNonceBytes = 12;
inline constexpr size_t kSealedTagBytes = 16;
inline constexpr size_t kSealedHeaderBytes = 1 + kSealedKeyIdBytes + kSealedNonceBytes;
// The shortest sealed value: an empty plaintext.
inline constexpr size_t kSealedMinBytes = kSealedHeaderBytes + kSealedTagBytes;

class SecretBox {
 public:
  // INVALID_ARGUMENT unless `key` is exactly 32 bytes.
  static absl::StatusOr<SecretBox> FromKey(absl::string_view key);
  // A key file's content: 32 raw bytes, or 64 hex digits (as `openssl rand -hex 32` prints
  // them) with optional white space around. INVALID_ARGUMENT naming `source` otherwise; the
  // message never quotes the content.
  static absl::StatusOr<SecretBox> FromKeyFileContent(absl::string_view content,
                                                      const std::string& source);

  // 8 hex digits naming the key (bytes 1..4 of every value it seals); safe to log.
  const std::string& key_id() const { return key_id_hex_; }

  // A sealed value of `plaintext`, bound to `associated_data`. INTERNAL only when OpenSSL fails
  // (no entropy for the nonce).
  absl::StatusOr<std::string> Seal(absl::string_view plaintext,
                                   absl::string_view associated_data) const;

  // The plaintext of a value Seal made with this key and the same associated data. Else:
  //   DATA_LOSS          empty or shorter than any sealed value (truncated), or the tag does
  //                      not match (ciphertext, header or associated data altered);
  //   FAILED_PRECONDITION sealed under another key (the message names both key ids), or in a
  //                      format version this build does not know.
  // Messages say what is wrong, never any of the bytes.
  absl::StatusOr<std::string> Open(absl::string_view sealed,
                                   absl::string_view associated_data) const;

 private:
  explicit SecretBox(std::string key);
  std::string key_;
  std::string key_id_;      // 4 bytes
  std::string key_id_hex_;  // the same, in hex
};

// The key id (8 hex digits, as SecretBox::key_id) in the header of a sealed value, read without
// any key: which key sealed it. Empty when `sealed` is not a value of this build's format
// version or is shorter than any sealed value. Says nothing of whether the value opens.
std::string SealedKeyId(absl::string_view sealed);

// The key file of --secrets-key-file. LoadSecretsKey: NOT_FOUND when `path` does not exist,
// INVALID_ARGUMENT when it holds no key (as FromKeyFileContent), FAILED_PRECONDITION when it
// cannot be read. LoadOrCreateSecretsKey also makes the file when it does not exist: 64 hex
// digits of fresh random bytes, mode 0600, its directory (0700) too when missing; a file made
// at the same moment by another process is read, not replaced. `*created` says which.
absl::StatusOr<SecretBox> LoadSecretsKey(const std::string& path);
absl::StatusOr<SecretBox> LoadOrCreateSecretsKey(const std::string& path, bool* created);

// Where the key file is when --secrets-key-file is not given: $XDG_STATE_HOME/ringmaster/
// secrets.key, else $HOME/.local/state/ringmaster/secrets.key; empty when neither is set.
std::string DefaultSecretsKeyFile();

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_SECRET_BOX_H_
