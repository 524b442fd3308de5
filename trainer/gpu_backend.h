// The GPU path (cuBLAS compute, NCCL collectives), compiled only where the build found the
// CUDA toolkit and NCCL. Elsewhere the same functions say there is no GPU, so main() has no
// conditional code.
#ifndef RINGMASTER_TRAINER_GPU_BACKEND_H_
#define RINGMASTER_TRAINER_GPU_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/communicator.h"
#include "trainer/compute.h"

namespace ringmaster::trainer {

// Whether this binary was built with the CUDA path.
bool GpuBuilt();

// GPUs this process may use (those CUDA_VISIBLE_DEVICES shows). 0, with `why_none` set, when
// there are none, including on a machine whose driver is missing or too old for the toolkit
// ("CUDA driver version is insufficient"): that means "no GPU", not an error.
int UsableGpuCount(std::string* why_none);

// The communicator uses the compute's stream: destroy it first (declaration order does).
struct GpuBackend {
  std::unique_ptr<Compute> compute;
  std::unique_ptr<Communicator> communicator;
};

// Uses device 0 of the visible ones (the worker sets CUDA_VISIBLE_DEVICES per rank) and forms
// the NCCL ring over every rank of `bootstrap`, which carries NCCL's unique id from rank 0.
// All ranks must call it together.
absl::StatusOr<GpuBackend> CreateGpuBackend(Communicator& bootstrap);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_GPU_BACKEND_H_
