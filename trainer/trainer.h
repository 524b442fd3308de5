// The training loop of the built-in workload: data-parallel SGD on the synthetic teacher task,
// with gradient buckets reduced while the backward pass runs.
#ifndef RINGMASTER_TRAINER_TRAINER_H_
#define RINGMASTER_TRAINER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <ostream>

#include "absl/status/statusor.h"
#include "trainer/communicator.h"
#include "trainer/compute.h"
#include "trainer/config.h"

namespace ringmaster::trainer {

struct TrainResult {
  double initial_loss = 0;    // mean over all ranks, first step
  double final_loss = 0;      // mean over all ranks, last step
  double images_per_sec = 0;  // all ranks together, warm-up steps left out
  uint64_t weights_fingerprint = 0;
  int ranks_differing = 0;  // ranks whose final weights differ from rank 0's
  int buckets = 0;
  double allreduce_wait_seconds = 0;  // this rank's time blocked on allreduces
  int resumed_from_step = 0;          // the checkpoint's step this run started after; 0: none
  // The step after which the ranks stopped on SIGTERM (checkpoint saved); 0: ran to the end.
  // The loss, throughput and weights fields are then unset.
  int stopped_at_step = 0;
};

// What one rank saw in one step, for the metrics service.
struct StepStats {
  int step = 0;
  double step_seconds = 0;
  double images_per_sec = 0;  // this rank's average since the warm-up steps (the first: this step)
  double allreduce_bytes = 0;
  double allreduce_seconds = 0;
  double loss = -1;  // the last global loss computed (every log step); -1 before the first
};
using StepObserver = std::function<void(const StepStats&)>;

// One step, every rank in lockstep:
//   1. forward and loss on this rank's batch;
//   2. backward, last layer first; a bucket's allreduce (sum) starts as soon as its layers'
//      gradients are written, while the backward pass goes on below it;
//   3. wait for every bucket, then w -= lr / ranks * sum (the gradient of the global mean loss);
//   4. wait for the device, so the step's time is real.
// Every rank starts from the same seed and applies the same summed gradients, so all end with
// bitwise-equal weights; the end checks that. `out` receives the progress and summary lines
// and is null on ranks other than 0. `compute` must use `communicator`'s memory. `on_step`,
// when set, is called on every rank after every step; it must not block.
absl::StatusOr<TrainResult> Train(const TrainerConfig& config, Compute& compute,
                                  Communicator& communicator, std::ostream* out,
                                  const StepObserver& on_step = nullptr);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_TRAINER_H_
