// Collectives on a few host values (a loss, a timing, a checksum) through whichever
// Communicator the job uses, staging through device memory when that communicator reduces
// device buffers (NCCL). Meant for small, rare messages; gradients go through
// GradientReducer.
#ifndef RINGMASTER_TRAINER_HOST_COLLECTIVES_H_
#define RINGMASTER_TRAINER_HOST_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/communicator.h"
#include "trainer/compute.h"

namespace ringmaster::trainer {

// Sums each element of `values` across ranks, in place. `compute` allocates the staging
// buffer and must use the communicator's memory.
absl::Status AllreduceHostValues(Compute& compute, Communicator& communicator,
                                 std::vector<float>* values);

// Every rank ends with root's `value`.
absl::Status BroadcastHostValue(Compute& compute, Communicator& communicator, uint64_t* value,
                                int root);

// FNV-1a over the bytes of `values`: equal only for bitwise-equal weights.
uint64_t Fingerprint(const std::vector<float>& values);

// How many ranks hold a fingerprint other than rank 0's (the same answer on every rank).
absl::StatusOr<int> CountRanksDifferingFromRoot(Compute& compute, Communicator& communicator,
                                                uint64_t fingerprint);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_HOST_COLLECTIVES_H_
