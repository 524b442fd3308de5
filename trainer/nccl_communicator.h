// Collectives over NCCL on GPU buffers, overlapped with the compute stream's work.
#ifndef RINGMASTER_TRAINER_NCCL_COMMUNICATOR_H_
#define RINGMASTER_TRAINER_NCCL_COMMUNICATOR_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "trainer/communicator.h"

namespace ringmaster::trainer {

// Owns an NCCL communicator, a stream of its own for collectives and the CUDA events that
// order that stream against the caller's compute stream. An allreduce waits on the compute
// stream (the gradients must be written), runs on the collective stream, and Wait makes the
// compute stream wait for it: the host never blocks, and the GEMMs that follow a bucket's
// start overlap its transfer. Uses the device current at creation. Not thread-safe.
class NcclCommunicator : public Communicator {
 public:
  // Forms the ring, every rank calling together:
  //   1. rank 0 asks NCCL for a unique id;
  //   2. `bootstrap` (MPI) broadcasts the id to every rank;
  //   3. every rank joins with ncclCommInitRank(size, id, rank) on its current device.
  // `compute_stream` is the stream whose work produces and consumes the buffers.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(Communicator& bootstrap,
                                                                  cudaStream_t compute_stream);
  ~NcclCommunicator() override;

  absl::string_view name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }

  absl::StatusOr<Handle> StartAllreduceSum(float* data, size_t count) override;
  absl::Status Wait(Handle handle) override;
  absl::Status Synchronize() override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;

 private:
  NcclCommunicator() = default;
  absl::StatusOr<cudaEvent_t> AcquireEvent();
  // Makes the collective stream wait for the compute stream's work so far.
  absl::Status FollowComputeStream();

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  cudaStream_t compute_stream_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* scratch_ = nullptr;         // one float for Barrier
  std::vector<cudaEvent_t> events_;  // all events, for destruction
  std::vector<cudaEvent_t> free_events_;
  std::map<Handle, cudaEvent_t> in_flight_;
  Handle next_handle_ = 1;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_NCCL_COMMUNICATOR_H_
