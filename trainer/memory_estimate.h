// The device memory a run of ringmaster-train allocates, computed from its configuration alone
// before anything is allocated, and the check of it against the rank's limit
// (RINGMASTER_GPU_MEMORY, docs/gpu-sharing.md). Pure arithmetic: no device is touched.
#ifndef RINGMASTER_TRAINER_MEMORY_ESTIMATE_H_
#define RINGMASTER_TRAINER_MEMORY_ESTIMATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "trainer/config.h"

namespace ringmaster::trainer {

// Bytes of each kind of buffer one rank holds at its peak, as the code allocates them (every
// buffer holds floats):
struct MemoryEstimate {
  int batch_per_rank = 0;  // samples per rank the training parts are for
  int64_t parameters = 0;  // Mlp: the flat weights and biases
  int64_t gradients = 0;   // Mlp: the same layout again
  int64_t optimizer = 0;   // Sgd: one velocity per parameter with momentum, none without
  // Mlp: each layer's output for the batch, the two ping-pong gradient buffers of the widest
  // layer (inputs included) and the per-sample losses.
  int64_t activations = 0;
  int64_t data = 0;  // SyntheticDataset: data_batches batches of inputs and labels
  // Staging buffers of the collectives on host values (checkpoint.h's broadcast of the
  // parameters when a checkpoint directory is set, a few floats otherwise) and the NCCL
  // communicator's scratch float; in the allreduce benchmark, its one buffer of the largest
  // size.
  int64_t workspace = 0;

  int64_t total() const {
    return parameters + gradients + optimizer + activations + data + workspace;
  }
};

// Samples per rank for `world_size` ranks: --global-batch-size split (rounded up when it does
// not divide; the run then refuses to start anyway), else --batch-size. A run resumed from a
// checkpoint of another global batch without --global-batch-size trains with the checkpoint's;
// this is the configured one.
int BatchPerRank(const TrainerConfig& config, int world_size);

MemoryEstimate EstimateDeviceMemory(const TrainerConfig& config, int world_size);

// OK when `limit_bytes` is 0 (no limit) or the estimate fits in it; otherwise
// RESOURCE_EXHAUSTED: "needs N bytes of GPU memory (model M, B samples per rank);
// RINGMASTER_GPU_MEMORY allows L". Every rank computes the same, so all refuse together.
absl::Status CheckDeviceMemory(const TrainerConfig& config, int world_size, int64_t limit_bytes);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_MEMORY_ESTIMATE_H_
