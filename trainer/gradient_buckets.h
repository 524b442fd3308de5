// Gradient fusion: consecutive layers' gradients are grouped into buckets of about a fixed size,
// and each bucket is reduced as one allreduce as soon as the backward pass has finished all of
// its layers, while the backward pass goes on with the layers below (as in Horovod's tensor
// fusion and PyTorch DDP's 25 MiB buckets).
#ifndef RINGMASTER_TRAINER_GRADIENT_BUCKETS_H_
#define RINGMASTER_TRAINER_GRADIENT_BUCKETS_H_

#include <cstddef>
#include <chrono>
#include <vector>

#include "absl/status/status.h"
#include "trainer/communicator.h"
#include "trainer/model.h"

namespace ringmaster::trainer {

// Layers [first_layer, last_layer] (forward indices) whose gradients are the contiguous range
// [offset, offset + count) of the flat gradient buffer.
struct Bucket {
  int first_layer = 0;
  int last_layer = 0;
  size_t offset = 0;
  size_t count = 0;
};

// Buckets in the order the backward pass completes them (the output layer's bucket first).
// Layers are added walking from the last layer down while the bucket stays within
// `bucket_bytes`; a layer larger than that gets a bucket of its own.
std::vector<Bucket> PlanBuckets(const std::vector<LayerShape>& layers, size_t bucket_bytes);

// Starts each bucket's allreduce when its lowest layer's gradient is ready and waits for all
// of them before the optimizer step. Does not own the gradient buffer or the communicator.
// Not thread-safe.
class GradientReducer {
 public:
  // `gradients` is the flat buffer the plan indexes, in `communicator`'s memory.
  GradientReducer(Communicator& communicator, float* gradients, std::vector<Bucket> plan);

  // Called by the backward pass once `layer`'s gradients are written, layers in descending
  // order. Starts the bucket that `layer` completes, if any.
  absl::Status OnLayerReady(int layer);
  // Waits for every bucket started this step; host backends return with the sums in place.
  absl::Status WaitAll();

  const std::vector<Bucket>& plan() const { return plan_; }
  // Seconds spent blocked in WaitAll, summed since construction: the part of communication
  // the backward pass did not hide.
  double wait_seconds() const { return wait_seconds_; }
  // The last step's allreduce span, from its first bucket's start to WaitAll's return, and
  // the bytes reduced per step: what bus bandwidth is computed from.
  double last_allreduce_seconds() const { return last_allreduce_seconds_; }
  double bytes_per_step() const;

 private:
  Communicator& communicator_;
  float* gradients_;
  std::vector<Bucket> plan_;
  std::vector<int> bucket_of_layer_;
  std::vector<Communicator::Handle> in_flight_;
  double wait_seconds_ = 0;
  std::chrono::steady_clock::time_point first_start_;
  double last_allreduce_seconds_ = 0;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_GRADIENT_BUCKETS_H_
