// The trainer's side of checkpoints, over the job's Communicator: resume at start and save at
// step boundaries. The file format and the stop flag are in checkpoint.h.
//
// Protocol, on every rank together:
//   1. At start, rank 0 alone looks in its RINGMASTER_CHECKPOINT_DIR for the newest complete
//      checkpoint of this configuration (others are logged and skipped) and broadcasts its
//      step and global batch (FindResumePoint); every rank then sizes its batch from that
//      global batch, and rank 0 broadcasts the parameters (LoadResumePoint). The other ranks'
//      directories are never read (ranks may sit on workers with different checkpoint roots).
//      Nothing in a checkpoint depends on the world size it was written at (the weights are
//      every rank's, the data position is a global batch index, the optimizer's velocity is
//      that of the mean gradient), so a job resumes at any number of ranks that divides its
//      global batch.
//   2. After every step, the ranks allreduce [stop flag, step]: the step sum proves they are
//      at the same boundary, the flag sum says whether any rank got SIGTERM.
//   3. When a rank got SIGTERM, or the step is a multiple of --checkpoint-every, rank 0 copies
//      the weights to the host and writes them atomically (checkpoint.h), then every rank
//      learns whether the write succeeded (a broadcast), and on SIGTERM all stop together.
#ifndef RINGMASTER_TRAINER_CHECKPOINTING_H_
#define RINGMASTER_TRAINER_CHECKPOINTING_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/communicator.h"
#include "trainer/compute.h"
#include "trainer/config.h"
#include "trainer/mlp.h"
#include "trainer/optimizer.h"

namespace ringmaster::trainer {

// Where a run starts: after a checkpoint's step, or at step 1 from the initial weights.
struct ResumePoint {
  int64_t step = 0;  // steps the checkpoint completed; 0: none
  // The global batch this run trains with: --global-batch-size when set, else the
  // checkpoint's (the ranks it was written at x their batch), else --batch-size x ranks.
  int global_batch = 0;
  int checkpoint_world_size = 0;       // 0: none
  std::string path;                    // rank 0 only
  std::vector<float> parameters;       // rank 0 only, until LoadResumePoint
  std::vector<float> optimizer_state;  // rank 0 only, until LoadResumePoint
};

// Step 1, first half: every rank learns the step and global batch to start from. With no
// --checkpoint-dir, no communication: step 0 and the configured global batch.
absl::StatusOr<ResumePoint> FindResumePoint(const TrainerConfig& config, Compute& compute,
                                            Communicator& communicator);

// Step 1, second half: every rank's `mlp` and `sgd` get the checkpoint's weights and
// optimizer state (nothing to do at step 0). `out` (rank 0 only) gets a line saying where the
// run starts.
absl::Status LoadResumePoint(const TrainerConfig& config, ResumePoint& point, Mlp& mlp, Sgd& sgd,
                             Compute& compute, Communicator& communicator, std::ostream* out);

// Steps 2 and 3 after `step` completed. Returns true when the ranks must stop now (SIGTERM);
// the checkpoint of this step is then on disk (or its failure was logged).
absl::StatusOr<bool> CheckpointAtStepBoundary(const TrainerConfig& config, int64_t step, Mlp& mlp,
                                              Sgd& sgd, Compute& compute,
                                              Communicator& communicator, std::ostream* out);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_CHECKPOINTING_H_
