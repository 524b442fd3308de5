// Collective communication among the ranks of one training job, behind one interface so the
// trainer and the allreduce benchmark run unchanged over MPI (host buffers), NCCL (GPU
// buffers) or an in-process group (unit tests).
#ifndef RINGMASTER_TRAINER_COMMUNICATOR_H_
#define RINGMASTER_TRAINER_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::trainer {

// Where a buffer lives. A communicator reduces buffers of one kind only.
enum class MemoryKind { kHost, kCuda };

absl::string_view MemoryKindName(MemoryKind kind);

// One backend's view of the job's ranks. Every rank calls the collectives in the same order
// with the same sizes (as MPI requires); a rank that does not ends in a hang or an error,
// never in a silent mismatch. Implementations name their technology (MpiCommunicator,
// NcclCommunicator, LocalCommunicator). Not thread-safe: one thread drives a communicator.
class Communicator {
 public:
  // Names an allreduce in flight, from StartAllreduceSum to Wait.
  using Handle = uint64_t;

  virtual ~Communicator() = default;

  virtual absl::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The memory every buffer passed to this communicator must live in.
  virtual MemoryKind memory() const = 0;

  // Starts summing data[0, count) elementwise across all ranks, in place. The buffer belongs
  // to the communicator until Wait(handle) returns.
  virtual absl::StatusOr<Handle> StartAllreduceSum(float* data, size_t count) = 0;
  // Finishes one started allreduce. Host backends return with the sum in the buffer; device
  // backends return at once, with the sum ordered before any work the caller enqueues on its
  // compute stream afterwards (the host does not block).
  virtual absl::Status Wait(Handle handle) = 0;
  // Blocks the host until every collective started so far has finished (for timing).
  virtual absl::Status Synchronize() = 0;

  // Copies `bytes` from root's buffer into everyone's; ordered like Wait.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
  virtual absl::Status Barrier() = 0;

  // StartAllreduceSum followed by Wait.
  absl::Status AllreduceSum(float* data, size_t count);
};

// The first communicator in `preference` that reduces buffers of `memory`, in the manner of
// Horovod's OperationManager: callers list backends best first (NCCL before MPI) and the
// tensors' memory decides. FAILED_PRECONDITION naming the candidates when none fits.
absl::StatusOr<Communicator*> SelectCommunicator(const std::vector<Communicator*>& preference,
                                                 MemoryKind memory);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_COMMUNICATOR_H_
