// A job's environment (docs/environments.md): the OCI image its ranks run in, the cluster
// volumes mounted into their containers, /dev/shm's size and the working directory; and the
// volumes themselves, which admins name and grant to teams.
//
// What a submit goes through, in order:
//   1. ValidateJobSpec calls CheckEnvironment: the fields' syntax and limits
//      (INVALID_ARGUMENT naming the field, e.g. "mounts[2].path: ...").
//   2. CheckMountRights: every mounted volume exists and is granted to the submitter's team
//      (read-only grants mounted read-only); PERMISSION_DENIED otherwise, the same for an
//      unknown volume so that names of other teams' volumes do not leak. Admins mount any.
//   3. At each placement, ResolveMounts turns spec.mounts into host paths from the volumes as
//      they are then; a volume gone by then fails the job instead of launching without it.
// Pure functions on plain structs, no I/O; thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_ENVIRONMENT_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_ENVIRONMENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

inline constexpr size_t kMaxImageBytes = 512;
inline constexpr size_t kMaxMounts = 16;
inline constexpr size_t kMaxPathBytes = 1024;
inline constexpr int64_t kMinShmBytes = 1LL << 20;   // 1 MiB
inline constexpr int64_t kMaxShmBytes = 64LL << 30;  // 64 GiB
inline constexpr size_t kMaxVolumeGrants = 64;
inline constexpr size_t kMaxVolumeDescriptionBytes = 256;

// [REGISTRY[:PORT]/]NAME[:TAG][@sha256:DIGEST], NAME lower-case path components of
// [a-z0-9._-] (each starting and ending with a letter or digit), TAG
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}, DIGEST 64 lower-case hex digits, at most 512 bytes.
absl::Status ValidateImageReference(const std::string& image, const std::string& field);

// An absolute, normalised path inside a container: no "." or ".." components, no "//", no
// trailing "/", at most 1024 bytes, no control characters; not "/" and not /proc, /sys, /dev
// or below them.
absl::Status ValidateContainerPath(const std::string& path, const std::string& field);

// "sha256:" and 64 lower-case hex digits.
absl::Status ValidateImageDigest(const std::string& digest, const std::string& field);

// A volume's name: 1..63 of a-z, 0-9 and '-', starting with a letter.
absl::Status ValidateVolumeName(const std::string& name, const std::string& field);

// The environment fields of a spec (step 1 above): image, mounts (only with an image, at most
// 16, volume names, container paths, no two at one path), shm_size_bytes (0 or 1 MiB..64 GiB,
// only with an image) and workdir (a container path, only with an image).
absl::Status CheckEnvironment(const JobSpec& spec);

// Returns `volume` with its grants sorted by team, or the first problem: the name, host_path
// (as a container path, and not under /etc, /boot, /run or /var/lib/ringmaster either), at most
// 64 grants of valid team names, each team once, a description of at most 256 bytes.
// The times are not checked.
absl::StatusOr<Volume> ValidateVolume(const Volume& volume);

// Step 2 above. `volumes` by name; `team` is the submitter's.
absl::Status CheckMountRights(const JobSpec& spec, const std::map<std::string, Volume>& volumes,
                              const std::string& team, bool admin);

// True when `team` may see `volume` (it is granted to the team); admins see every volume.
bool VolumeVisibleTo(const Volume& volume, const std::string& team, bool admin);

// True when `spec` mounts the volume `name`.
bool MountsVolume(const JobSpec& spec, const std::string& name);

// One mount of an attempt's containers, with the volume's host path as it is now.
struct ResolvedMount {
  std::string volume;
  std::string host_path;
  std::string container_path;
  bool read_only = false;
  bool operator==(const ResolvedMount&) const = default;
};

// Step 3 above: spec.mounts in order with their host paths. FAILED_PRECONDITION naming the
// volume when one no longer exists.
absl::StatusOr<std::vector<ResolvedMount>> ResolveMounts(
    const JobSpec& spec, const std::map<std::string, Volume>& volumes);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_ENVIRONMENT_H_
