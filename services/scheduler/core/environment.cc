#include "scheduler/core/environment.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "scheduler/core/authz.h"

namespace ringmaster::scheduler {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Quoted for messages, cut short so a hostile value cannot flood a log or terminal.
std::string Shown(const std::string& value) {
  constexpr size_t kShown = 64;
  std::string out;
  for (char c : value.substr(0, kShown)) {
    out += absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : '?';
  }
  return absl::StrCat("'", out, value.size() > kShown ? "...'" : "'");
}

bool IsLowerAlnum(char c) { return absl::ascii_islower(c) || absl::ascii_isdigit(c); }

bool IsUnder(const std::string& path, const std::string& dir) {
  return path == dir || absl::StartsWith(path, dir + "/");
}

// The shape both kinds of paths share; `forbidden` are the trees a path may not be in.
absl::Status CheckPath(const std::string& path, const std::string& field,
                       const std::vector<std::string>& forbidden) {
  if (path.empty() || path.size() > kMaxPathBytes) {
    return Invalid(field, absl::StrCat("must be an absolute path of 1..", kMaxPathBytes,
                                       " bytes; got ", path.size(), " bytes"));
  }
  if (path.front() != '/') {
    return Invalid(field,
                   absl::StrCat("must be an absolute path (start with '/'); got ", Shown(path)));
  }
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) {
      return Invalid(field, absl::StrCat("must not contain control characters; got ", Shown(path)));
    }
  }
  if (path == "/") return Invalid(field, "must not be '/' (the whole file system)");
  if (path.back() == '/') {
    return Invalid(field, absl::StrCat("must not end with '/'; got ", Shown(path)));
  }
  for (absl::string_view part : absl::StrSplit(path.substr(1), '/')) {
    if (part.empty()) {
      return Invalid(field, absl::StrCat("must be normalised (no '//'); got ", Shown(path)));
    }
    if (part == "." || part == "..") {
      return Invalid(
          field, absl::StrCat("must be normalised (no '.' or '..' components); got ", Shown(path)));
    }
  }
  for (const std::string& dir : forbidden) {
    if (IsUnder(path, dir)) {
      return Invalid(field, absl::StrCat("must not be ", dir, " or below it; got ", Shown(path)));
    }
  }
  return absl::OkStatus();
}

bool IsRegistryHost(absl::string_view host) {
  if (host.empty() || host.size() > 253 || host.front() == '.' || host.front() == '-' ||
      host.back() == '.' || host.back() == '-') {
    return false;
  }
  for (char c : host) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '-') return false;
  }
  return true;
}

absl::Status CheckRegistry(absl::string_view registry, const std::string& field,
                           const std::string& image) {
  absl::string_view host = registry;
  if (size_t colon = registry.find(':'); colon != absl::string_view::npos) {
    host = registry.substr(0, colon);
    absl::string_view port_text = registry.substr(colon + 1);
    int port = 0;
    bool digits = !port_text.empty() && port_text.size() <= 5 &&
                  std::all_of(port_text.begin(), port_text.end(), absl::ascii_isdigit);
    if (!digits || !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
      return Invalid(field, absl::StrCat("registry port must be 1..65535; got ", Shown(image)));
    }
  }
  if (!IsRegistryHost(host)) {
    return Invalid(field, absl::StrCat("registry must be a host name of [A-Za-z0-9.-] (with an "
                                       "optional :PORT); got ",
                                       Shown(image)));
  }
  return absl::OkStatus();
}

absl::Status CheckTag(absl::string_view tag, const std::string& field, const std::string& image) {
  bool ok =
      !tag.empty() && tag.size() <= 128 && (absl::ascii_isalnum(tag.front()) || tag.front() == '_');
  for (char c : tag) ok = ok && (absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-');
  if (!ok) {
    return Invalid(field, absl::StrCat("tag must match [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; got ",
                                       Shown(image)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateImageDigest(const std::string& digest, const std::string& field) {
  constexpr absl::string_view kPrefix = "sha256:";
  bool ok = digest.size() == kPrefix.size() + 64 && absl::StartsWith(digest, kPrefix);
  for (size_t i = kPrefix.size(); ok && i < digest.size(); ++i) {
    ok = absl::ascii_isdigit(digest[i]) || (digest[i] >= 'a' && digest[i] <= 'f');
  }
  if (!ok) {
    return Invalid(field, absl::StrCat("must be \"sha256:\" and 64 lower-case hex digits; got ",
                                       Shown(digest)));
  }
  return absl::OkStatus();
}

absl::Status ValidateImageReference(const std::string& image, const std::string& field) {
  if (image.empty() || image.size() > kMaxImageBytes) {
    return Invalid(field, absl::StrCat("must be an image reference of 1..", kMaxImageBytes,
                                       " bytes; got ", image.size(), " bytes"));
  }
  absl::string_view rest = image;
  if (size_t at = rest.find('@'); at != absl::string_view::npos) {
    if (auto s = ValidateImageDigest(std::string(rest.substr(at + 1)), field); !s.ok()) {
      return Invalid(field, absl::StrCat("digest after '@' must be sha256: and 64 lower-case hex "
                                         "digits; got ",
                                         Shown(image)));
    }
    rest = rest.substr(0, at);
  }
  // A ':' after the last '/' starts the tag; one before it is the registry's port.
  const size_t slash = rest.rfind('/');
  const size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos && (slash == absl::string_view::npos || colon > slash)) {
    if (auto s = CheckTag(rest.substr(colon + 1), field, image); !s.ok()) return s;
    rest = rest.substr(0, colon);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  size_t first = 0;
  // As Docker reads a reference: a first component with '.' or ':', or "localhost", names a
  // registry.
  if (parts.size() > 1 && (absl::StrContains(parts[0], '.') || absl::StrContains(parts[0], ':') ||
                           parts[0] == "localhost")) {
    if (auto s = CheckRegistry(parts[0], field, image); !s.ok()) return s;
    first = 1;
  }
  for (size_t i = first; i < parts.size(); ++i) {
    absl::string_view part = parts[i];
    bool ok = !part.empty() && IsLowerAlnum(part.front()) && IsLowerAlnum(part.back());
    for (char c : part) ok = ok && (IsLowerAlnum(c) || c == '.' || c == '_' || c == '-');
    if (!ok) {
      return Invalid(field,
                     absl::StrCat("must be [REGISTRY[:PORT]/]NAME[:TAG][@sha256:DIGEST] with NAME "
                                  "'/'-separated components of lower-case [a-z0-9._-], each "
                                  "starting and ending with a letter or digit; got ",
                                  Shown(image)));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateContainerPath(const std::string& path, const std::string& field) {
  return CheckPath(path, field, {"/proc", "/sys", "/dev"});
}

absl::Status ValidateVolumeName(const std::string& name, const std::string& field) {
  bool ok = !name.empty() && name.size() <= 63 && absl::ascii_islower(name.front());
  for (char c : name) ok = ok && (IsLowerAlnum(c) || c == '-');
  if (!ok) {
    return Invalid(field, absl::StrCat("must be a volume name: 1..63 of a-z, 0-9 and '-', "
                                       "starting with a letter; got ",
                                       Shown(name)));
  }
  return absl::OkStatus();
}

absl::Status CheckEnvironment(const JobSpec& spec) {
  if (spec.image.empty()) {
    // Without a container there is nothing to mount into, size or start in.
    if (!spec.mounts.empty()) return Invalid("mounts", "are allowed only with image");
    if (spec.shm_size_bytes != 0) return Invalid("shm_size_bytes", "is allowed only with image");
    if (!spec.workdir.empty()) return Invalid("workdir", "is allowed only with image");
    return absl::OkStatus();
  }
  if (auto s = ValidateImageReference(spec.image, "image"); !s.ok()) return s;
  if (spec.mounts.size() > kMaxMounts) {
    return Invalid("mounts",
                   absl::StrCat("at most ", kMaxMounts, " allowed, got ", spec.mounts.size()));
  }
  std::map<std::string, size_t> paths;
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const Mount& m = spec.mounts[i];
    const std::string field = absl::StrCat("mounts[", i, "]");
    if (auto s = ValidateVolumeName(m.volume, field + ".volume"); !s.ok()) return s;
    if (auto s = ValidateContainerPath(m.path, field + ".path"); !s.ok()) return s;
    auto [it, fresh] = paths.emplace(m.path, i);
    if (!fresh) {
      return Invalid(field + ".path", absl::StrCat("is also the path of mounts[", it->second,
                                                   "]; each mount needs a path of its own"));
    }
  }
  if (spec.shm_size_bytes != 0 &&
      (spec.shm_size_bytes < kMinShmBytes || spec.shm_size_bytes > kMaxShmBytes)) {
    return Invalid("shm_size_bytes",
                   absl::StrCat("must be 0 (the runtime's default, 64 MiB) or ", kMinShmBytes, "..",
                                kMaxShmBytes, " (1 MiB..64 GiB), got ", spec.shm_size_bytes));
  }
  if (!spec.workdir.empty()) {
    if (auto s = ValidateContainerPath(spec.workdir, "workdir"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<Volume> ValidateVolume(const Volume& in) {
  Volume volume = in;
  if (auto s = ValidateVolumeName(volume.name, "name"); !s.ok()) return s;
  if (auto s = CheckPath(volume.host_path, "host_path",
                         {"/proc", "/sys", "/dev", "/etc", "/boot", "/run", "/var/lib/ringmaster"});
      !s.ok()) {
    return s;
  }
  if (volume.grants.size() > kMaxVolumeGrants) {
    return Invalid("grants", absl::StrCat("at most ", kMaxVolumeGrants, " allowed, got ",
                                          volume.grants.size()));
  }
  std::map<std::string, size_t> teams;
  for (size_t i = 0; i < volume.grants.size(); ++i) {
    const std::string field = absl::StrCat("grants[", i, "].team");
    if (auto s = ValidateTeamName(volume.grants[i].team, field); !s.ok()) return s;
    auto [it, fresh] = teams.emplace(volume.grants[i].team, i);
    if (!fresh) {
      return Invalid(field,
                     absl::StrCat("team '", volume.grants[i].team, "' is also granted by grants[",
                                  it->second, "]; grant each team once"));
    }
  }
  std::sort(volume.grants.begin(), volume.grants.end(),
            [](const VolumeGrant& a, const VolumeGrant& b) { return a.team < b.team; });
  if (volume.description.size() > kMaxVolumeDescriptionBytes) {
    return Invalid("description", absl::StrCat("must be at most ", kMaxVolumeDescriptionBytes,
                                               " bytes, got ", volume.description.size()));
  }
  return volume;
}

bool VolumeVisibleTo(const Volume& volume, const std::string& team, bool admin) {
  if (admin) return true;
  return std::any_of(volume.grants.begin(), volume.grants.end(),
                     [&](const VolumeGrant& g) { return g.team == team; });
}

absl::Status CheckMountRights(const JobSpec& spec, const std::map<std::string, Volume>& volumes,
                              const std::string& team, bool admin) {
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const Mount& m = spec.mounts[i];
    const std::string field = absl::StrCat("mounts[", i, "].volume");
    auto it = volumes.find(m.volume);
    if (admin) {
      if (it == volumes.end()) {
        return absl::NotFoundError(absl::StrCat(field, ": no volume '", m.volume, "'"));
      }
      continue;
    }
    const VolumeGrant* grant = nullptr;
    if (it != volumes.end()) {
      for (const VolumeGrant& g : it->second.grants) {
        if (g.team == team) grant = &g;
      }
    }
    // An unknown volume reads the same as one not granted: names do not leak across teams.
    if (grant == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat(field, ": volume '", m.volume, "' is not granted to team '", team,
                       "' (an admin grants volumes: ringctl volume update --grant)"));
    }
    if (grant->read_only && !m.read_only) {
      return absl::PermissionDeniedError(
          absl::StrCat(field, ": volume '", m.volume, "' is granted to team '", team,
                       "' read-only; mount it with read_only (ringctl: --mount ", m.volume, ":",
                       m.path, ":ro)"));
    }
  }
  return absl::OkStatus();
}

bool MountsVolume(const JobSpec& spec, const std::string& name) {
  return std::any_of(spec.mounts.begin(), spec.mounts.end(),
                     [&](const Mount& m) { return m.volume == name; });
}

absl::StatusOr<std::vector<ResolvedMount>> ResolveMounts(
    const JobSpec& spec, const std::map<std::string, Volume>& volumes) {
  std::vector<ResolvedMount> out;
  out.reserve(spec.mounts.size());
  for (const Mount& m : spec.mounts) {
    auto it = volumes.find(m.volume);
    if (it == volumes.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("volume '", m.volume, "' (mounted at ", m.path,
                       ") no longer exists; the job cannot run without it"));
    }
    out.push_back({m.volume, it->second.host_path, m.path, m.read_only});
  }
  return out;
}

}  // namespace ringmaster::scheduler
