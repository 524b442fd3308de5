#include "worker/host/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace ringmaster::worker {
namespace {

absl::Status ErrnoError(int err, std::string_view verb, std::string_view what) {
  // absl::string_view is not std::string_view in this Abseil build: concatenate as strings.
  std::string message(verb);
  message.append(" ").append(what);
  return absl::ErrnoToStatus(err, message);
}

// Closes on scope exit; close errors on a read-only descriptor tell nothing.
class ReadFdCloser {
 public:
  explicit ReadFdCloser(int fd) : fd_(fd) {}
  ~ReadFdCloser() {
    if (fd_ >= 0) close(fd_);
  }
  ReadFdCloser(const ReadFdCloser&) = delete;
  ReadFdCloser& operator=(const ReadFdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<std::string> ReadFd(int fd, std::string_view what, size_t max_bytes) {
  std::string data;
  char buf[16 * 1024];
  while (data.size() < max_bytes) {
    const size_t want = std::min(sizeof(buf), max_bytes - data.size());
    const ssize_t n = read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "read", what);
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open", path);
  ReadFdCloser closer(fd);
  return ReadFd(fd, path, max_bytes);
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(path, " is a symbolic link"));
    }
    return ErrnoError(errno, "open", path);
  }
  ReadFdCloser closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoError(errno, "stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  return ReadFd(fd, path, max_bytes);
}

absl::StatusOr<std::string> ReadFileTail(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open", path);
  ReadFdCloser closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoError(errno, "stat", path);
  const off_t start = std::max<off_t>(0, st.st_size - static_cast<off_t>(max_bytes));
  if (start > 0 && lseek(fd, start, SEEK_SET) < 0) return ErrnoError(errno, "seek", path);
  absl::StatusOr<std::string> read = ReadFd(fd, path, max_bytes);
  if (!read.ok()) return read.status();
  std::string text = std::move(*read);
  if (start > 0) {
    if (auto nl = text.find('\n'); nl != std::string::npos && nl + 1 < text.size()) {
      text.erase(0, nl + 1);
    }
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

absl::Status WriteAllToFd(int fd, std::string_view data, std::string_view what) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "write", what);
    // write() of a non-empty buffer to a file or pipe returns at least 1 or fails.
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "create", tmp);
  absl::Status written = WriteAllToFd(fd, text, tmp);
  // Some file systems report a full disk only at close.
  if (close(fd) != 0 && written.ok()) written = ErrnoError(errno, "close", tmp);
  if (written.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    written = ErrnoError(errno, "rename to", path);
  }
  if (!written.ok()) unlink(tmp.c_str());
  return written;
}

}  // namespace ringmaster::worker
