#include "scheduler/core/registry_credentials.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/secret_box.h"
#include "scheduler/core/authz.h"

namespace ringmaster::scheduler {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

bool IsLabel(absl::string_view label) {
  if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
    return false;
  }
  return std::all_of(label.begin(), label.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-';
  });
}

// One UTF-8 sequence's length at `s[i]`, or 0 when it is not well formed.
size_t Utf8Length(const std::string& s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 0;
  }
  return n;
}

}  // namespace

RegistryCredentialView ViewOf(const RegistryCredential& credential) {
  return {.team = credential.team,
          .registry = credential.registry,
          .username = credential.username,
          .updated_at_ms = credential.updated_at_ms,
          .problem = credential.problem};
}

std::string SealingContext(const std::string& team, const std::string& registry) {
  return absl::StrCat("registry_credentials", std::string(1, '\0'), team, std::string(1, '\0'),
                      registry);
}

absl::StatusOr<std::string> NormalizeRegistry(const std::string& registry,
                                              const std::string& field) {
  const std::string what = absl::StrCat(
      "must be HOST[:PORT] (a DNS name of '.'-separated labels of a-z, 0-9 and '-', or an IPv4 "
      "address; PORT 1..65535), at most ",
      kMaxRegistryBytes, " bytes, without a scheme or path");
  if (registry.empty() || registry.size() > kMaxRegistryBytes) {
    return Invalid(field, absl::StrCat(what, "; got ", registry.size(), " bytes"));
  }
  const std::string lower = absl::AsciiStrToLower(registry);
  absl::string_view host = lower;
  if (size_t colon = lower.find(':'); colon != std::string::npos) {
    host = absl::string_view(lower).substr(0, colon);
    absl::string_view port_text = absl::string_view(lower).substr(colon + 1);
    int port = 0;
    const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                        std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit);
    if (!digits || !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
      return Invalid(field, absl::StrCat(what, "; got \"", registry, "\""));
    }
  }
  std::vector<absl::string_view> labels = absl::StrSplit(host, '.');
  const bool ok =
      std::all_of(labels.begin(), labels.end(), [](absl::string_view l) { return IsLabel(l); });
  if (!ok) {
    // Quoted only when it is printable: it is the caller's input, not a secret, but may be junk.
    const bool printable =
        std::all_of(registry.begin(), registry.end(), [](char c) { return c > 0x20 && c < 0x7f; });
    return Invalid(field, absl::StrCat(what, "; got ",
                                       printable ? absl::StrCat("\"", registry, "\"")
                                                 : std::string("unprintable bytes")));
  }
  return lower;
}

absl::StatusOr<RegistryCredential> ValidateRegistryCredential(RegistryCredential in) {
  if (auto s = ValidateTeamName(in.team, "team"); !s.ok()) return s;
  auto registry = NormalizeRegistry(in.registry, "registry");
  if (!registry.ok()) return registry.status();
  in.registry = *std::move(registry);
  const bool username_ok = !in.username.empty() &&
                           in.username.size() <= kMaxRegistryUsernameBytes &&
                           std::all_of(in.username.begin(), in.username.end(),
                                       [](char c) { return c > 0x20 && c < 0x7f && c != ':'; });
  if (!username_ok) {
    return Invalid("username", absl::StrCat("must be 1..", kMaxRegistryUsernameBytes,
                                            " printable ASCII characters without spaces or ':'"));
  }
  if (in.secret.empty() || in.secret.size() > kMaxRegistrySecretBytes) {
    return Invalid("secret", absl::StrCat("must be 1..", kMaxRegistrySecretBytes, " bytes; got ",
                                          in.secret.size(), " bytes"));
  }
  for (size_t i = 0; i < in.secret.size();) {
    const size_t n = Utf8Length(in.secret, i);
    const auto c = static_cast<unsigned char>(in.secret[i]);
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7f))) {
      return Invalid("secret",
                     absl::StrCat("must be UTF-8 text without control characters (a trailing "
                                  "newline included); byte ",
                                  i, " is not"));
    }
    i += n;
  }
  return in;
}

std::string RegistryOfImage(const std::string& image) {
  const size_t slash = image.find('/');
  if (slash == std::string::npos) return kDefaultRegistry;
  const std::string first = image.substr(0, slash);
  if (absl::StrContains(first, '.') || absl::StrContains(first, ':') || first == "localhost") {
    return absl::AsciiStrToLower(first);
  }
  return kDefaultRegistry;
}

std::optional<RegistryCredential> CredentialForImage(const RegistryCredentials& credentials,
                                                     const std::string& team,
                                                     const std::string& image) {
  if (image.empty() || team.empty()) return std::nullopt;
  auto it = credentials.find({team, RegistryOfImage(image)});
  if (it == credentials.end()) return std::nullopt;
  return it->second;
}

std::optional<RegistryCredential> AuthForImage(const RegistryCredentials& readable,
                                               const UnreadableRegistryCredentials& unreadable,
                                               const std::string& team, const std::string& image) {
  if (auto credential = CredentialForImage(readable, team, image)) return credential;
  if (image.empty() || team.empty()) return std::nullopt;
  auto it = unreadable.find({team, RegistryOfImage(image)});
  if (it == unreadable.end()) return std::nullopt;
  const RegistryCredentialView& view = it->second;
  return RegistryCredential{.team = view.team,
                            .registry = view.registry,
                            .username = view.username,
                            .secret = {},
                            .updated_at_ms = view.updated_at_ms,
                            .problem = view.problem};
}

StoredSecretStep PlanStoredSecret(const StoredRegistryCredential& stored,
                                  const std::string& current_key_id,
                                  const std::string& previous_key_id) {
  if (current_key_id.empty()) return StoredSecretStep::kNoKey;
  if (stored.sealed_secret.empty()) return StoredSecretStep::kSeal;
  const std::string sealed_with = SealedKeyId(stored.sealed_secret);
  if (!previous_key_id.empty() && sealed_with == previous_key_id && sealed_with != current_key_id) {
    return StoredSecretStep::kReseal;
  }
  return StoredSecretStep::kOpen;
}

size_t CountForTeam(const RegistryCredentials& credentials, const std::string& team) {
  size_t n = 0;
  for (auto it = credentials.lower_bound({team, ""});
       it != credentials.end() && it->first.first == team; ++it) {
    ++n;
  }
  return n;
}

}  // namespace ringmaster::scheduler
