// Unix users and groups of this machine: resolving what --run-as names (core/run_as.h) to the
// uid, gid and groups a job's processes get. Thread-safe (the *_r lookups).
#ifndef RINGMASTER_SERVICES_WORKER_HOST_USERS_H_
#define RINGMASTER_SERVICES_WORKER_HOST_USERS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/core/run_as.h"

namespace ringmaster::worker {

struct UnixUser {
  uid_t uid = 0;
  gid_t gid = 0;
  // Supplementary groups (the user's groups in /etc/group; just `gid` for a bare uid).
  std::vector<gid_t> groups;
  // From the passwd entry; empty for a uid without one.
  std::string name;
  std::string home;
};

// A name must exist (NOT_FOUND naming `flag` otherwise); a number need not: a uid without a
// passwd entry gets the gid given, else gid = uid. Root (uid 0) is refused
// (INVALID_ARGUMENT): running a team as root is what the mapping exists to avoid.
absl::StatusOr<UnixUser> ResolveUnixUser(const RunAsUser& user, const std::string& flag);

// For a worker with --run-as: `dir` (created 0755 when missing) must be owned by this
// process's user and writable by no one else, or another user could plant links in it that
// the worker (root) then follows (FAILED_PRECONDITION naming `flag` and what to change).
absl::Status EnsurePrivateDirectory(const std::string& dir, const std::string& flag);

// Gives the directory `dir` (never a symlink) to `user` with `mode`.
absl::Status HandDirectoryTo(const std::string& dir, const UnixUser& user, mode_t mode);

// Creates the file `path` when missing (never through a symlink) and gives it to `user` with
// `mode`: a file the user's processes append to in a directory they cannot write.
absl::Status HandFileTo(const std::string& path, const UnixUser& user, mode_t mode);

// OK when `user` cannot read `path`, tried as that user (so modes, ACLs and every directory on
// the way count); FAILED_PRECONDITION naming `flag` when it can. For the worker's TLS key: a
// team's processes must not be able to pose as the worker.
absl::Status CheckUnreadableBy(const std::string& path, const UnixUser& user,
                               const std::string& flag);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_USERS_H_
