#include <cuda_runtime.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/cuda_compute.h"
#include "trainer/gpu_backend.h"
#include "trainer/nccl_communicator.h"

namespace ringmaster::trainer {

bool GpuBuilt() { return true; }

int UsableGpuCount(std::string* why_none) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // The runtime keeps the error as "last error"; clear it so it does not surface later.
    cudaGetLastError();
    *why_none = absl::StrCat(cudaGetErrorString(error), " (", cudaGetErrorName(error), ")");
    return 0;
  }
  if (count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    *why_none = absl::StrCat("no CUDA device visible (CUDA_VISIBLE_DEVICES=",
                             visible == nullptr ? "<unset>" : visible, ")");
  }
  return count;
}

absl::StatusOr<GpuBackend> CreateGpuBackend(Communicator& bootstrap) {
  GpuBackend backend;
  RM_ASSIGN_OR_RETURN(std::unique_ptr<CudaCompute> compute, CudaCompute::Create(/*device=*/0));
  RM_ASSIGN_OR_RETURN(backend.communicator, NcclCommunicator::Create(bootstrap, compute->stream()));
  backend.compute = std::move(compute);
  return backend;
}

}  // namespace ringmaster::trainer
