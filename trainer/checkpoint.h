// ringmaster-train's checkpoints: the format of one file, writing it atomically, finding the
// newest complete one in a directory, and the SIGTERM flag the training loop polls.
//
// A checkpoint file `ckpt-<step, 12 digits>.rmck` holds, little-endian as the host writes it:
//   magic "RMCKPT01" | u32 format version (2) | i64 step | u64 seed | i32 world size |
//   i32 batch size | f64 lr | f64 momentum | i64 data position | u64 rng state | str model |
//   u64 n + n x f32 parameters | u64 m + m x f32 optimizer state | u64 FNV-1a 64 of all before
// (str: u32 length + bytes). Version 1, without the momentum, still reads (as momentum 0). The
// checksum makes a torn or corrupted file detectable; a file is only ever seen whole because it is
// written under a temp name, fsynced, renamed and the directory fsynced (WriteFileAtomically). No
// I/O but plain files; no MPI.
#ifndef RINGMASTER_TRAINER_CHECKPOINT_H_
#define RINGMASTER_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::trainer {

struct TrainingCheckpoint {
  int64_t step = 0;  // steps completed; training goes on at step + 1
  uint64_t seed = 0;
  // The ranks and per-rank batch it was written at: only their product, the global batch,
  // binds a resumed run, which may have another number of ranks (checkpointing.h).
  int32_t world_size = 0;
  int32_t batch_size = 0;
  double lr = 0;
  double momentum = 0;  // 0: plain SGD
  // Index of the next global synthetic batch (the data loader's position; the same on every
  // rank at every world size).
  int64_t data_position = 0;
  // State of the training-time random stream. The synthetic pool is drawn once from the seed
  // and plain SGD draws nothing per step, so this is the seed-derived state the stream
  // resumes from; kept so a model with dropout or shuffling resumes the same way.
  uint64_t rng_state = 0;
  std::string model;
  std::vector<float> parameters;
  // Per-parameter optimizer buffers (the velocity with momentum; optimizer.h). Plain SGD
  // keeps none: empty.
  std::vector<float> optimizer_state;

  bool operator==(const TrainingCheckpoint&) const = default;
};

std::string EncodeCheckpoint(const TrainingCheckpoint& checkpoint);
// DATA_LOSS naming what is wrong (short, bad magic, checksum mismatch, bad lengths).
absl::StatusOr<TrainingCheckpoint> DecodeCheckpoint(absl::string_view bytes);

// "ckpt-000000001200.rmck"; the step in the name orders the files.
std::string CheckpointFileName(int64_t step);

// Writes DIR/ckpt-<step>.rmck atomically (creating DIR if needed), then DIR/checkpoint.meta
// (common/checkpoint_metadata.h) with the step and `time_ms`, then deletes all but the newest
// `keep` checkpoint files.
absl::Status WriteCheckpoint(const std::string& dir, const TrainingCheckpoint& checkpoint,
                             int64_t time_ms, int keep = 2);

struct FoundCheckpoint {
  std::string path;
  TrainingCheckpoint checkpoint;
};

// The checkpoint with the highest step in `dir` that reads back whole (checksum right) and
// that `usable` accepts (when given). Files that do not are skipped, each with a line in
// `skipped` saying why. nullopt when there is none (or no such directory).
std::optional<FoundCheckpoint> FindNewestCheckpoint(
    const std::string& dir, std::vector<std::string>* skipped,
    const std::function<absl::Status(const TrainingCheckpoint&)>& usable = nullptr);

// SIGTERM (and SIGINT) set a flag and do nothing else; the training loop reads it at step
// boundaries, where the ranks agree to checkpoint and stop together.
void InstallStopSignalHandlers();
bool StopRequested();
// For tests: set or clear the flag as the handler would.
void SetStopRequestedForTest(bool value);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_CHECKPOINT_H_
