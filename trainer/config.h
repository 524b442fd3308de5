// ringmaster-train's flags and the configuration they make. Flags come with RINGMASTER_*
// environment fallbacks (common/flags.h), so a worker can set them either way.
#ifndef RINGMASTER_TRAINER_CONFIG_H_
#define RINGMASTER_TRAINER_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/flags.h"
#include "trainer/model.h"

namespace ringmaster::trainer {

enum class DeviceRequest { kAuto, kCpu, kGpu };
enum class DeviceKind { kCpu, kGpu };
enum class Mode { kTrain, kAllreduceBenchmark };

struct TrainerConfig {
  Mode mode = Mode::kTrain;
  DeviceRequest device = DeviceRequest::kAuto;

  // Training.
  ModelSpec model;
  int batch_size = 64;  // per rank
  // Samples per step over all ranks; 0: batch_size x ranks (or, resuming, the checkpoint's).
  // Set, it wins over batch_size: each rank takes global / ranks (GlobalBatchPerRank).
  int global_batch_size = 0;
  int steps = 100;
  int warmup_steps = 2;  // excluded from total images/sec
  double lr = 0.05;
  double momentum = 0;  // SGD momentum (optimizer.h); 0: plain SGD
  uint64_t seed = 42;
  size_t bucket_bytes = 25u << 20;
  int log_every = 10;
  int data_batches = 32;  // synthetic batches per rank, cycled

  // Checkpoints (checkpointing.h): where rank 0 keeps them (the worker sets
  // RINGMASTER_CHECKPOINT_DIR; empty: none, and SIGTERM ends the process as usual) and how
  // often besides SIGTERM (0: only on SIGTERM).
  std::string checkpoint_dir;
  int checkpoint_every = 50;

  // Streaming to the metrics service: its address (empty: no streaming) and the labels of
  // this job, which the worker passes in the environment (RINGMASTER_JOB_ID, ...).
  std::string metrics_addr;
  std::string job_id;
  int attempt = 0;
  std::string queue;
  std::string gpu_type;
  std::string worker_id;

  // A share of one GPU (docs/gpu-sharing.md; the worker sets RINGMASTER_GPU_SHARE and
  // RINGMASTER_GPU_MEMORY): the share as the worker wrote it ("0.25"; empty: a whole device),
  // printed at start, and the device memory this rank may use in bytes (0: no limit), which a
  // run that needs more refuses before allocating anything (memory_estimate.h).
  std::string gpu_share;
  int64_t gpu_memory = 0;

  // --benchmark allreduce.
  size_t min_bytes = 8;
  size_t max_bytes = size_t{256} << 20;
  int iters = 20;
  int warmup_iters = 5;
};

// Declares every flag of ringmaster-train.
void AddTrainerFlags(Flags* flags);

// INVALID_ARGUMENT naming the flag for a value that does not parse or is out of range.
absl::StatusOr<TrainerConfig> ConfigFromFlags(const Flags& flags);

// "256M" -> 268435456; accepts a plain count or a K, M or G suffix (powers of 1024).
absl::StatusOr<size_t> ParseByteSize(absl::string_view text);

// --device's value: "auto", "cpu" or "gpu"; INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<DeviceRequest> ParseDeviceRequest(absl::string_view text);

// Decides where this job computes. `gpu_built`: the binary has the CUDA path;
// `every_rank_has_gpu`: all ranks see a usable GPU (ranks must agree, or their collectives
// would not match); `why_not` says why some rank has none. FAILED_PRECONDITION when a GPU is
// demanded and cannot be had.
absl::StatusOr<DeviceKind> ResolveDevice(DeviceRequest request, bool gpu_built,
                                         bool every_rank_has_gpu, absl::string_view why_not);

absl::string_view DeviceKindName(DeviceKind kind);

// Each rank's share of a global batch at `world_size` ranks. FAILED_PRECONDITION naming both
// sizes when it does not divide evenly: ranks with unequal batches would weigh samples
// unequally in the averaged gradient, and a resized job must keep its global batch.
absl::StatusOr<int> GlobalBatchPerRank(int global_batch, int world_size);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_CONFIG_H_
