#include "trainer/nccl_communicator.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/cuda_checks.h"

namespace ringmaster::trainer {

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    Communicator& bootstrap, cudaStream_t compute_stream) {
  if (bootstrap.memory() != MemoryKind::kHost) {
    return absl::InvalidArgumentError("NCCL's bootstrap must broadcast host memory (use MPI)");
  }
  std::unique_ptr<NcclCommunicator> nccl(new NcclCommunicator());
  nccl->rank_ = bootstrap.rank();
  nccl->size_ = bootstrap.size();
  nccl->compute_stream_ = compute_stream;
  ncclUniqueId id{};
  if (nccl->rank_ == 0) RM_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  RM_RETURN_IF_ERROR(bootstrap.Broadcast(&id, sizeof(id), 0));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&nccl->stream_, cudaStreamNonBlocking));
  void* scratch = nullptr;
  RM_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch, sizeof(float)));
  nccl->scratch_ = static_cast<float*>(scratch);
  RM_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&nccl->comm_, nccl->size_, id, nccl->rank_));
  return nccl;
}

NcclCommunicator::~NcclCommunicator() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  for (cudaEvent_t event : events_) cudaEventDestroy(event);
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::StatusOr<cudaEvent_t> NcclCommunicator::AcquireEvent() {
  if (!free_events_.empty()) {
    cudaEvent_t event = free_events_.back();
    free_events_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  RM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  events_.push_back(event);
  return event;
}

absl::Status NcclCommunicator::FollowComputeStream() {
  RM_ASSIGN_OR_RETURN(cudaEvent_t ready, AcquireEvent());
  RM_CUDA_RETURN_IF_ERROR(cudaEventRecord(ready, compute_stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, ready, 0));
  // Reusing a recorded event is safe: the wait above captured its current state.
  free_events_.push_back(ready);
  return absl::OkStatus();
}

absl::StatusOr<Communicator::Handle> NcclCommunicator::StartAllreduceSum(float* data,
                                                                         size_t count) {
  RM_RETURN_IF_ERROR(FollowComputeStream());
  RM_NCCL_RETURN_IF_ERROR(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_));
  RM_ASSIGN_OR_RETURN(cudaEvent_t done, AcquireEvent());
  RM_CUDA_RETURN_IF_ERROR(cudaEventRecord(done, stream_));
  const Handle handle = next_handle_++;
  in_flight_[handle] = done;
  return handle;
}

absl::Status NcclCommunicator::Wait(Handle handle) {
  auto it = in_flight_.find(handle);
  if (it == in_flight_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown allreduce handle ", handle));
  }
  cudaEvent_t done = it->second;
  in_flight_.erase(it);
  free_events_.push_back(done);
  RM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute_stream_, done, 0));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Synchronize() {
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Broadcast(void* data, size_t bytes, int root) {
  RM_RETURN_IF_ERROR(FollowComputeStream());
  RM_NCCL_RETURN_IF_ERROR(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
  RM_ASSIGN_OR_RETURN(cudaEvent_t done, AcquireEvent());
  RM_CUDA_RETURN_IF_ERROR(cudaEventRecord(done, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute_stream_, done, 0));
  free_events_.push_back(done);
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Barrier() {
  // NCCL has no barrier; a one-float allreduce that the host waits for is one.
  RM_NCCL_RETURN_IF_ERROR(ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, comm_, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
