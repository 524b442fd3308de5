// The trainer's side of checkpoints, over the job's Communicator: resume at start and save at
// step boundaries. The file format and the stop flag are in checkpoint.h.
//
// Protocol, on every rank together:
//   1. At start, rank 0 alone looks in its RINGMASTER_CHECKPOINT_DIR for the newest complete
//      checkpoint of this configuration (others are logged and skipped) and broadcasts its
//      step and then its parameters to every rank; the other ranks' directories are never
//      read (ranks may sit on workers with different checkpoint roots).
//   2. After every step, the ranks allreduce [stop flag, step]: the step sum proves they are
//      at the same boundary, the flag sum says whether any rank got SIGTERM.
//   3. When a rank got SIGTERM, or the step is a multiple of --checkpoint-every, rank 0 copies
//      the weights to the host and writes them atomically (checkpoint.h), then every rank
//      learns whether the write succeeded (a broadcast), and on SIGTERM all stop together.
#ifndef RINGMASTER_TRAINER_CHECKPOINTING_H_
#define RINGMASTER_TRAINER_CHECKPOINTING_H_

#include <cstdint>
#include <ostream>

#include "absl/status/statusor.h"
#include "trainer/communicator.h"
#include "trainer/compute.h"
#include "trainer/config.h"
#include "trainer/mlp.h"

namespace ringmaster::trainer {

// Step 1: loads the newest usable checkpoint into `mlp` on every rank; returns its step
// (0: none, start from the initial weights). `out` (rank 0 only) gets a line saying which.
absl::StatusOr<int64_t> ResumeFromNewestCheckpoint(const TrainerConfig& config, Mlp& mlp,
                                                   Compute& compute, Communicator& communicator,
                                                   std::ostream* out);

// Steps 2 and 3 after `step` completed. Returns true when the ranks must stop now (SIGTERM);
// the checkpoint of this step is then on disk (or its failure was logged).
absl::StatusOr<bool> CheckpointAtStepBoundary(const TrainerConfig& config, int64_t step, Mlp& mlp,
                                              Compute& compute, Communicator& communicator,
                                              std::ostream* out);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_CHECKPOINTING_H_
