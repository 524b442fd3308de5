// The small text file a workload writes next to its checkpoints so that the platform sees
// them: `RINGMASTER_CHECKPOINT_DIR/checkpoint.meta`, one `key=value` per line:
//
//   step=1200            steps (or any monotonic unit of work) the checkpoint holds, >= 0
//   time_ms=1764000000000  when it was completed, Unix milliseconds, > 0
//
// Other keys are ignored (ringmaster-train adds `file=`); blank lines and lines starting with
// '#' too. ringmaster-train writes it atomically after each checkpoint; a command workload can
// write it with `printf 'step=%d\ntime_ms=%d\n' ... > tmp && mv tmp checkpoint.meta`. The
// worker of rank 0 reads it and reports it to the scheduler (docs/trainer.md, docs/workers.md).
#ifndef RINGMASTER_LIBS_COMMON_CHECKPOINT_METADATA_H_
#define RINGMASTER_LIBS_COMMON_CHECKPOINT_METADATA_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/atomic_file.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

inline constexpr const char* kCheckpointMetadataFile = "checkpoint.meta";

struct CheckpointMetadata {
  int64_t step = 0;
  int64_t time_ms = 0;
  std::string file;  // optional: the checkpoint's file name in the same directory

  bool operator==(const CheckpointMetadata&) const = default;
};

// INVALID_ARGUMENT naming the key for a missing or malformed step or time_ms.
absl::StatusOr<CheckpointMetadata> ParseCheckpointMetadata(absl::string_view text);
std::string FormatCheckpointMetadata(const CheckpointMetadata& metadata);

// Reads DIR/checkpoint.meta; NOT_FOUND when there is none, FAILED_PRECONDITION for a symlink,
// anything but a regular file, or one over 4 KiB (the directory may be a team's, read by root).
absl::StatusOr<CheckpointMetadata> ReadCheckpointMetadata(const std::string& dir);

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_CHECKPOINT_METADATA_H_
