// Teams' credentials for private image registries (docs/environments.md, "Private
// registries"): what one is, the rules it is checked against, and which one goes with a job's
// image. The secret is held here only to be stored and sent to the worker that pulls the
// image; nothing that lists credentials, logs or audits carries it (RegistryCredentialView).
// Pure functions on plain structs, no I/O; thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_REGISTRY_CREDENTIALS_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_REGISTRY_CREDENTIALS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::scheduler {

inline constexpr size_t kMaxRegistryBytes = 255;
inline constexpr size_t kMaxRegistryUsernameBytes = 256;
inline constexpr size_t kMaxRegistrySecretBytes = 4096;
inline constexpr size_t kMaxRegistryCredentialsPerTeam = 16;
// The registry of an image reference without one, as Docker and Podman read it.
inline constexpr char kDefaultRegistry[] = "docker.io";

struct RegistryCredential {
  std::string team;
  std::string registry;  // HOST[:PORT], lower-case
  std::string username;
  std::string secret;  // password or token: never logged, never returned by an API
  int64_t updated_at_ms = 0;
  // Empty, but in what an assignment carries for a stored credential this scheduler cannot
  // read (AuthForImage): why (RegistryCredentialView::problem); `secret` is empty then.
  std::string problem{};
  bool operator==(const RegistryCredential&) const = default;
};

// What may be shown of a credential: everything but the secret.
struct RegistryCredentialView {
  std::string team;
  std::string registry;
  std::string username;
  int64_t updated_at_ms = 0;
  // Empty, or why this scheduler cannot read the stored secret (another secrets key, or the
  // value was altered): such a credential is not sent to workers until it is set again.
  std::string problem{};
  bool operator==(const RegistryCredentialView&) const = default;
};

// A credential as the JobStore keeps it: the secret sealed (common/secret_box.h) with
// SealingContext(team, registry) as associated data, so a sealed value moved to another team's
// or registry's row does not open. `plaintext_secret` is set instead only in a row stored before
// secrets were sealed (schema migration 14), until Scheduler::Start seals it.
struct StoredRegistryCredential {
  std::string team;
  std::string registry;
  std::string username;
  std::string sealed_secret{};     // bytes, not text
  std::string plaintext_secret{};  // empty but in an old row
  int64_t updated_at_ms = 0;
  bool operator==(const StoredRegistryCredential&) const = default;
};

// What Scheduler::Start does with one stored secret, decided from the key id in its header
// (common/secret_box.h, SealedKeyId) and the ids of this scheduler's keys, before any is opened.
enum class StoredSecretStep {
  kSeal,    // plaintext, from before migration 15: seal it with the current key and store it
  kOpen,    // open it with the current key: sealed with it, or with a key this scheduler does
            // not hold, or not a sealed value at all (Open then says which)
  kReseal,  // sealed with the previous key (a rotation): open it with that key, seal it with
            // the current one and store it in place, keeping updated_at_ms
  kNoKey,   // this scheduler has no current key: it cannot be read
};

// `current_key_id` and `previous_key_id` are SecretBox::key_id() of --secrets-key-file and
// --previous-secrets-key-file, empty when there is no such key. The current key wins when both
// have the same id.
StoredSecretStep PlanStoredSecret(const StoredRegistryCredential& stored,
                                  const std::string& current_key_id,
                                  const std::string& previous_key_id);

// The associated data a credential's secret is sealed with: "registry_credentials", the team
// and the registry, NUL-separated (neither may hold a NUL).
std::string SealingContext(const std::string& team, const std::string& registry);
RegistryCredentialView ViewOf(const RegistryCredential& credential);

// HOST[:PORT]: HOST a DNS name of '.'-separated labels of [a-z0-9-] (each 1..63, not starting
// or ending with '-') or an IPv4 address, PORT 1..65535, at most 255 bytes in all; upper-case
// letters are taken as lower-case. Returns the lower-case form, or INVALID_ARGUMENT naming
// `field`.
absl::StatusOr<std::string> NormalizeRegistry(const std::string& registry,
                                              const std::string& field);

// Returns `in` with its registry lower-cased, or INVALID_ARGUMENT naming the first bad field:
// team (a team name), registry (as NormalizeRegistry), username (1..256 printable ASCII
// characters, no ':', which would end the user in HTTP basic authentication), secret (1..4096
// bytes of UTF-8 without control characters). The messages never quote the secret.
absl::StatusOr<RegistryCredential> ValidateRegistryCredential(RegistryCredential in);

// The registry an image reference is pulled from, lower-case: its first component when that has
// a '.' or ':' or is "localhost" (as Docker reads references), else docker.io.
std::string RegistryOfImage(const std::string& image);

// Keyed by (team, registry).
using RegistryCredentials = std::map<std::pair<std::string, std::string>, RegistryCredential>;
// Stored credentials whose secret cannot be read, with the reason; keyed by (team, registry).
using UnreadableRegistryCredentials =
    std::map<std::pair<std::string, std::string>, RegistryCredentialView>;

// The credential of `team` for the registry of `image`, if it has one; none for a job without
// an image or a team. Only this one goes to the worker: never another registry's or team's.
std::optional<RegistryCredential> CredentialForImage(const RegistryCredentials& credentials,
                                                     const std::string& team,
                                                     const std::string& image);

// What an assignment carries for the registry of `image`: CredentialForImage's, else, when the
// team's stored credential for that registry cannot be read, its registry and user with the
// problem and no secret, so that the worker's failed pull can say why instead of "the team has
// none" (docs/environments.md, "Secrets at rest").
std::optional<RegistryCredential> AuthForImage(const RegistryCredentials& readable,
                                               const UnreadableRegistryCredentials& unreadable,
                                               const std::string& team, const std::string& image);

// How many registries `team` has credentials for.
size_t CountForTeam(const RegistryCredentials& credentials, const std::string& team);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_REGISTRY_CREDENTIALS_H_
