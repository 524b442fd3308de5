#include "trainer/device_agreement.h"

#include <string>
#include <vector>

#include "common/log.h"
#include "common/status_macros.h"
#include "trainer/gpu_backend.h"
#include "trainer/host_collectives.h"

namespace ringmaster::trainer {

absl::StatusOr<DeviceKind> AgreeOnDevice(DeviceRequest request, CpuCompute& host_compute,
                                         MpiCommunicator& mpi) {
  std::string why_none;
  const bool have_gpu = request != DeviceRequest::kCpu && UsableGpuCount(&why_none) > 0;
  std::vector<float> ranks_with_gpu = {have_gpu ? 1.0f : 0.0f};
  RM_RETURN_IF_ERROR(AllreduceHostValues(host_compute, mpi, &ranks_with_gpu));
  const bool everyone = static_cast<int>(ranks_with_gpu[0]) == mpi.size();
  if (!everyone && why_none.empty() && request != DeviceRequest::kCpu) {
    why_none = "another rank has no usable GPU";
  }
  absl::StatusOr<DeviceKind> device = ResolveDevice(request, GpuBuilt(), everyone, why_none);
  if (device.ok() && *device == DeviceKind::kCpu && request == DeviceRequest::kAuto &&
      mpi.rank() == 0) {
    RM_LOG(kInfo) << "--device auto: using the CPU ("
                  << (why_none.empty() ? std::string("no GPU") : why_none) << ")";
  }
  return device;
}

}  // namespace ringmaster::trainer
