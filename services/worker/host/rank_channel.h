// The wrapper's side of the rank channel (libs/rank/rank_channel.h): it creates the shared page
// the rank's processes write their collective counts and progress to, and removes it when the
// rank ends. Not thread-safe; one per rank wrapper.
#ifndef RINGMASTER_SERVICES_WORKER_HOST_RANK_CHANNEL_H_
#define RINGMASTER_SERVICES_WORKER_HOST_RANK_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rank/rank_channel.h"

namespace ringmaster::worker {

class RankChannelFile {
 public:
  // Creates a fresh channel file in `dir` (its name carries `tag` and the pid) and maps it.
  static absl::StatusOr<std::unique_ptr<RankChannelFile>> Create(const std::string& dir,
                                                                 const std::string& tag);
  ~RankChannelFile();
  RankChannelFile(const RankChannelFile&) = delete;
  RankChannelFile& operator=(const RankChannelFile&) = delete;

  const std::string& path() const { return path_; }
  rm_rank_snapshot Read() const { return rm_rank_channel_read(channel_); }
  uint64_t MpiState() const { return rm_rank_channel_mpi_state(channel_); }

 private:
  RankChannelFile(std::string path, rm_rank_channel* channel)
      : path_(std::move(path)), channel_(channel) {}
  std::string path_;
  rm_rank_channel* channel_;
};

// Where the channel goes: /dev/shm when it is a writable directory (memory, no writeback),
// else $TMPDIR, else /tmp.
std::string RankChannelDir();

// `current` with `library` appended as LD_PRELOAD expects (space-separated); a library already
// listed is not added twice.
std::string AppendPreload(const std::string& current, const std::string& library);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_RANK_CHANNEL_H_
