// NVML's C ABI, the part the worker uses (GPU discovery, gpus.cc; samples, nvml_sampler.cc):
// libnvidia-ml.so.1 is opened with dlopen, so nvml.h is not needed to build and a host without
// the driver still runs the worker.
#ifndef RINGMASTER_SERVICES_WORKER_HOST_NVML_H_
#define RINGMASTER_SERVICES_WORKER_HOST_NVML_H_

#include <dlfcn.h>

namespace ringmaster::worker {

using NvmlReturn = int;
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
inline constexpr NvmlReturn kNvmlSuccess = 0;
inline constexpr int kNvmlTemperatureGpu = 0;
inline constexpr unsigned kNvmlMigEnabled = 1;  // NVML_DEVICE_MIG_ENABLE

// The entry point `name` of the opened library, as a function pointer of type Fn; null when
// the library lacks it.
template <typename Fn>
Fn NvmlSymbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_NVML_H_
