// The GPU path of a build without the CUDA toolkit: there is never a GPU.
#include "trainer/gpu_backend.h"

namespace ringmaster::trainer {

bool GpuBuilt() { return false; }

int UsableGpuCount(std::string* why_none) {
  *why_none = "this ringmaster-train was built without CUDA";
  return 0;
}

absl::StatusOr<GpuBackend> CreateGpuBackend(Communicator& /*bootstrap*/) {
  return absl::FailedPreconditionError("this ringmaster-train was built without CUDA");
}

}  // namespace ringmaster::trainer
