#include "worker/host/users.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/host/process.h"

namespace ringmaster::worker {
namespace {

bool ParseId(const std::string& text, uint32_t* id) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos &&
         absl::SimpleAtoi(text, id) && *id != std::numeric_limits<uint32_t>::max();
}

}  // namespace

absl::StatusOr<UnixUser> ResolveUnixUser(const RunAsUser& spec, const std::string& flag) {
  UnixUser out;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  uint32_t id = 0;
  int err;
  if (ParseId(spec.user, &id)) {
    err = getpwuid_r(id, &pw, buf.data(), buf.size(), &found);
    out.uid = id;
    out.gid = id;
  } else {
    err = getpwnam_r(spec.user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (found == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(flag, ": no user '", spec.user, "' on this machine",
                       err != 0 ? absl::StrCat(" (", std::strerror(err), ")") : "",
                       "; create it or give a numeric uid"));
    }
  }
  if (found != nullptr) {
    out.uid = pw.pw_uid;
    out.gid = pw.pw_gid;
    out.name = pw.pw_name;
    out.home = pw.pw_dir;
  }
  if (out.uid == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", spec.user, "' is root; map teams to unprivileged users"));
  }
  if (!spec.group.empty()) {
    if (ParseId(spec.group, &id)) {
      out.gid = id;
    } else {
      group gr{};
      group* g = nullptr;
      err = getgrnam_r(spec.group.c_str(), &gr, buf.data(), buf.size(), &g);
      if (g == nullptr) {
        return absl::NotFoundError(absl::StrCat(flag, ": no group '", spec.group,
                                                "' on this machine; create it or give a gid"));
      }
      out.gid = g->gr_gid;
    }
  }
  if (out.gid == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", spec.user, spec.group.empty() ? "" : ":", spec.group,
                     "' has group root (gid 0); give an unprivileged group"));
  }
  out.groups = {out.gid};
  if (!out.name.empty()) {
    int n = 64;
    std::vector<gid_t> groups(n);
    if (getgrouplist(out.name.c_str(), out.gid, groups.data(), &n) < 0) {
      groups.resize(n);
      if (getgrouplist(out.name.c_str(), out.gid, groups.data(), &n) < 0) n = 0;
    }
    for (int i = 0; i < n; ++i) {
      if (groups[i] == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, ": user '", out.name, "' is in group root; map teams to unprivileged users"));
      }
      if (groups[i] != out.gid) out.groups.push_back(groups[i]);
    }
  }
  return out;
}

absl::Status EnsurePrivateDirectory(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": cannot create ", dir, ": ", ec.message()));
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": cannot stat ", dir, ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": ", dir, " must be a directory owned by uid ", geteuid(),
                     " and writable by no one else with --run-as (it is ",
                     S_ISDIR(st.st_mode) ? "" : "not a directory, ", "owned by uid ", st.st_uid,
                     ", mode ", absl::StrFormat("%04o", st.st_mode & 07777), ")"));
  }
  return absl::OkStatus();
}

absl::Status HandDirectoryTo(const std::string& dir, const UnixUser& user, mode_t mode) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", dir, ": ", std::strerror(errno)));
  }
  const bool ok = fchown(fd, user.uid, user.gid) == 0 && fchmod(fd, mode) == 0;
  const int err = errno;
  close(fd);
  if (!ok) {
    return absl::InternalError(
        absl::StrCat("cannot give ", dir, " to uid ", user.uid, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status HandFileTo(const std::string& path, const UnixUser& user, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  const bool ok = fchown(fd, user.uid, user.gid) == 0 && fchmod(fd, mode) == 0;
  const int err = errno;
  close(fd);
  if (!ok) {
    return absl::InternalError(
        absl::StrCat("cannot give ", path, " to uid ", user.uid, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::Status CheckUnreadableBy(const std::string& path, const UnixUser& user,
                               const std::string& flag) {
  SpawnOptions spawn;
  spawn.argv = {"/bin/sh", "-c", "test -r \"$0\"", path};
  spawn.env = {{"PATH", "/usr/bin:/bin"}};
  spawn.new_session = false;
  spawn.user = user;
  absl::StatusOr<Spawned> child = Spawn(spawn);
  if (!child.ok()) return child.status();
  if (WaitForExit(child->pid).exit_code != 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      flag, ": ", path, " is readable by uid ", user.uid,
      ", which runs a team's jobs (--run-as): make it readable by root only (mode 0600)"));
}

}  // namespace ringmaster::worker
