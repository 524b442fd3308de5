#include "worker/host/rank_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringmaster::worker {

absl::StatusOr<std::unique_ptr<RankChannelFile>> RankChannelFile::Create(const std::string& dir,
                                                                         const std::string& tag) {
  // /dev/shm is shared by every user of the host: a name nobody can guess, created with
  // O_EXCL (mkostemp), so a planted file or symlink is never opened, let alone truncated.
  std::string name = absl::StrCat(dir, "/ringmaster-rank-", tag, "-", getpid(), "-XXXXXX");
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create ", name, ": ", std::strerror(errno)));
  }
  const std::string path = name;
  if (ftruncate(fd, RM_RANK_CHANNEL_SIZE) != 0) {
    const int err = errno;
    close(fd);
    unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat("cannot size ", path, ": ", std::strerror(err)));
  }
  void* p = mmap(nullptr, RM_RANK_CHANNEL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat("cannot map ", path, ": ", std::strerror(err)));
  }
  auto* channel = static_cast<rm_rank_channel*>(p);
  __atomic_store_n(&channel->magic, RM_RANK_CHANNEL_MAGIC, __ATOMIC_RELEASE);
  return std::unique_ptr<RankChannelFile>(new RankChannelFile(path, channel));
}

RankChannelFile::~RankChannelFile() {
  munmap(channel_, RM_RANK_CHANNEL_SIZE);
  unlink(path_.c_str());
}

std::string RankChannelDir() {
  if (access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
  const char* tmp = std::getenv("TMPDIR");
  if (tmp != nullptr && tmp[0] != '\0') return tmp;
  return "/tmp";
}

std::string AppendPreload(const std::string& current, const std::string& library) {
  for (absl::string_view entry :
       absl::StrSplit(current, absl::ByAnyChar(" :"), absl::SkipEmpty())) {
    if (entry == library) return current;
  }
  return current.empty() ? library : absl::StrCat(current, " ", library);
}

}  // namespace ringmaster::worker
