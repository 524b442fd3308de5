#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int saved = errno;
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(saved)));
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                 absl::string_view bytes) {
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string temp = absl::StrCat(dir, "/.", name, ".tmp.", getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", temp);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status status = Errno("cannot write", temp);
      ::close(fd);
      ::unlink(temp.c_str());
      return status;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    absl::Status status = Errno("cannot fsync", temp);
    ::close(fd);
    ::unlink(temp.c_str());
    return status;
  }
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    return Errno("cannot close", temp);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status status = Errno("cannot rename onto", path);
    ::unlink(temp.c_str());
    return status;
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Errno("cannot open directory", dir);
  const int synced = ::fsync(dir_fd);
  ::close(dir_fd);
  if (synced != 0) return Errno("cannot fsync directory", dir);
  return absl::OkStatus();
}

}  // namespace ringmaster
