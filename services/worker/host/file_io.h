// Reading and writing files, /proc entries and pipes with plain POSIX calls that report every
// failure as a Status. The worker must outlive whatever it reads: a process that exits between
// open() and read() of its /proc entry (ESRCH), an unreadable file (EIO, EISDIR), a full disk
// (ENOSPC) or a reader that went away (EPIPE). std::ifstream is not used for this because
// libstdc++'s filebuf throws std::ios_base::failure on a read error whatever the stream's
// exception mask, which ended a worker with std::terminate. Thread-safe (no shared state).
#ifndef RINGMASTER_SERVICES_WORKER_HOST_FILE_IO_H_
#define RINGMASTER_SERVICES_WORKER_HOST_FILE_IO_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::worker {

// Errors carry errno's canonical code (absl::ErrnoToStatus): ENOENT and ESRCH (a process that
// is gone) are NOT_FOUND, EACCES is PERMISSION_DENIED, ENOSPC and EDQUOT RESOURCE_EXHAUSTED,
// EPIPE and EISDIR FAILED_PRECONDITION; `what` names the file in the message.

// Reads `fd` to its end (restarting on EINTR), at most `max_bytes` (more is cut off).
absl::StatusOr<std::string> ReadFd(int fd, std::string_view what, size_t max_bytes);

// The whole of a (small) file or /proc entry, at most `max_bytes`.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             size_t max_bytes = 16 << 20);

// ReadFileToString for a file in a directory another user may write (a team's, with --run-as):
// a symlink is not followed, and anything but a regular file (a FIFO that would block, a
// device) is FAILED_PRECONDITION, so the worker never reads, as root, what the link named.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes);

// The last `max_bytes` of a file, from a line start where the cut falls inside a line, with
// trailing newlines and spaces trimmed.
absl::StatusOr<std::string> ReadFileTail(const std::string& path, size_t max_bytes);

// Writes all of `data` to `fd` (restarting on EINTR and after short writes).
absl::Status WriteAllToFd(int fd, std::string_view data, std::string_view what);

// Replaces `path` with `text`: written to PATH.tmp, then renamed over it, so that a full disk
// leaves the old file (or none), never a truncated one.
absl::Status WriteFileAtomically(const std::string& path, std::string_view text);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_FILE_IO_H_
