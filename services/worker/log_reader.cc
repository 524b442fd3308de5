#include "log_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/launch.h"

namespace ringmaster::worker {
namespace {

constexpr size_t kChunk = 64 * 1024;

}  // namespace

absl::Status LogReader::Read(const std::string& job_id, int32_t rank,
                             std::optional<int32_t> attempt, bool follow,
                             const std::function<bool(std::string_view, int32_t)>& write,
                             const std::function<bool()>& cancelled) const {
  if (!IsSafeJobId(job_id)) {
    return absl::InvalidArgumentError(absl::StrCat("job_id: '", job_id, "' is not a job id"));
  }
  if (rank < 0) return absl::InvalidArgumentError("rank: must not be negative");
  if (attempt && *attempt < 0) return absl::InvalidArgumentError("attempt: must not be negative");
  const std::string file = absl::StrCat("rank-", rank, ".log");
  if (!attempt) {
    // The latest attempt with a log of this rank here.
    DIR* dir = opendir(absl::StrCat(layout_.log_dir, "/", job_id).c_str());
    if (dir != nullptr) {
      while (dirent* entry = readdir(dir)) {
        int32_t n = 0;
        if (!absl::SimpleAtoi(entry->d_name, &n) || n < 0) continue;
        struct stat st;
        const std::string path = absl::StrCat(layout_.log_dir, "/", job_id, "/", n, "/", file);
        if (stat(path.c_str(), &st) == 0 && (!attempt || n > *attempt)) attempt = n;
      }
      closedir(dir);
    }
    if (!attempt) {
      return absl::NotFoundError(
          absl::StrCat("worker ", worker_id_, " has no log of job ", job_id, " rank ", rank));
    }
  }
  const std::string path = layout_.RankLogPath(job_id, *attempt, rank);
  // Whether more output may still come.
  auto live = [&] { return live_(job_id, *attempt, rank); };
  constexpr auto kPoll = std::chrono::milliseconds(200);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  while (fd < 0 && follow && live() && !cancelled()) {
    std::this_thread::sleep_for(kPoll);
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("worker ", worker_id_, " has no log of job ", job_id,
                                            " attempt ", *attempt, " rank ", rank));
  }
  std::string buf(kChunk, '\0');
  bool last_pass = !follow;
  while (true) {
    const bool more_may_come = follow && !last_pass && live();
    ssize_t got;
    while ((got = read(fd, buf.data(), buf.size())) != 0) {
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        const int err = errno;
        close(fd);
        return absl::ErrnoToStatus(err, absl::StrCat("read ", path));
      }
      if (!write(std::string_view(buf.data(), got), *attempt)) {
        close(fd);
        return absl::OkStatus();
      }
    }
    if (!more_may_come || last_pass || cancelled()) break;
    std::this_thread::sleep_for(kPoll);
    // One more read after the rank ended picks up its last words.
    if (!live()) last_pass = true;
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace ringmaster::worker
