// GPU discovery through NVML, loaded with dlopen so that the worker builds and runs on
// machines without the NVIDIA driver (it then simply finds no GPU).
#ifndef RINGMASTER_SERVICES_WORKER_HOST_GPUS_H_
#define RINGMASTER_SERVICES_WORKER_HOST_GPUS_H_

#include <string>
#include <vector>

#include "worker/core/types.h"

namespace ringmaster::worker {

struct GpuDiscovery {
  // In NVML's (PCI bus) order; `index` is what CUDA_VISIBLE_DEVICES names when
  // CUDA_DEVICE_ORDER=PCI_BUS_ID, which every rank gets. A GPU in MIG mode is not listed:
  // each of its MIG instances is, after the whole GPUs (index from the GPU count on), typed
  // by its profile (MigGpuType) and named by its UUID.
  std::vector<Gpu> gpus;
  // Why there are none ("libnvidia-ml.so.1 not found", "NVML: Driver Not Loaded"), for the log.
  std::string why_none;
};

GpuDiscovery DiscoverGpus();

// What a container needs of the NVIDIA driver beside its GPUs' /dev/nvidiaN: the control device
// nodes present here, and the driver's user-space libraries (libcuda, libnvidia-*), which must
// match the kernel module and so come from the host, never from an image.
struct GpuDriverFiles {
  std::vector<std::string> control_devices;
  std::vector<std::string> libraries;
};
GpuDriverFiles FindGpuDriverFiles();

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_GPUS_H_
