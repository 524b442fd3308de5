// The trainer's optimizer: SGD, with optional momentum, applied to gradients summed over ranks.
#ifndef RINGMASTER_TRAINER_OPTIMIZER_H_
#define RINGMASTER_TRAINER_OPTIMIZER_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/compute.h"

namespace ringmaster::trainer {

// Owns the optimizer state (with momentum: one velocity per parameter, in the Compute's
// memory; plain SGD has none). Every rank applies the same summed gradients, so every rank
// holds the same state. The velocity is that of the mean gradient over the global batch, not
// of the sum, so the state means the same at every world size and a checkpoint of it resumes
// at any. The Compute must outlive the Sgd. Not thread-safe.
class Sgd {
 public:
  static absl::StatusOr<Sgd> Create(Compute& compute, size_t parameters, double lr, float momentum);

  // One update from gradients summed over `ranks` ranks:
  //   momentum 0: w -= lr / ranks * summed (one Axpy);
  //   otherwise:  v = momentum * v + summed / ranks; w -= lr * v.
  absl::Status Step(const float* summed, int ranks, float* parameters);

  // The state as a checkpoint keeps it: empty for plain SGD.
  size_t state_size() const { return velocity_.size(); }
  absl::StatusOr<std::vector<float>> StateToHost();
  // INVALID_ARGUMENT unless `host` has state_size() values.
  absl::Status SetState(const std::vector<float>& host);

 private:
  Sgd(Compute& compute, size_t parameters, double lr, float momentum)
      : compute_(&compute), parameters_(parameters), lr_(lr), momentum_(momentum) {}

  Compute* compute_;
  size_t parameters_;
  double lr_;
  float momentum_;
  DeviceBuffer velocity_;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_OPTIMIZER_H_
