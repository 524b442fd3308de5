#include "worker/host/gpus.h"

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/core/inventory.h"
#include "worker/host/nvml.h"

namespace ringmaster::worker {

GpuDiscovery DiscoverGpus() {
  GpuDiscovery result;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    result.why_none = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
    return result;
  }
  auto init = NvmlSymbol<NvmlReturn (*)()>(lib, "nvmlInit_v2");
  auto shutdown = NvmlSymbol<NvmlReturn (*)()>(lib, "nvmlShutdown");
  auto error_string = NvmlSymbol<const char* (*)(NvmlReturn)>(lib, "nvmlErrorString");
  auto count = NvmlSymbol<NvmlReturn (*)(unsigned*)>(lib, "nvmlDeviceGetCount_v2");
  auto handle =
      NvmlSymbol<NvmlReturn (*)(unsigned, NvmlDevice*)>(lib, "nvmlDeviceGetHandleByIndex_v2");
  auto name = NvmlSymbol<NvmlReturn (*)(NvmlDevice, char*, unsigned)>(lib, "nvmlDeviceGetName");
  auto memory = NvmlSymbol<NvmlReturn (*)(NvmlDevice, NvmlMemory*)>(lib, "nvmlDeviceGetMemoryInfo");
  if (!init || !shutdown || !error_string || !count || !handle || !name || !memory) {
    result.why_none = "libnvidia-ml.so.1 lacks the NVML functions we need";
    dlclose(lib);
    return result;
  }
  auto fail = [&](const char* what, NvmlReturn rc) {
    result.why_none = absl::StrCat("NVML ", what, ": ", error_string(rc));
  };
  if (NvmlReturn rc = init(); rc != kNvmlSuccess) {
    fail("init", rc);
    dlclose(lib);
    return result;
  }
  unsigned n = 0;
  if (NvmlReturn rc = count(&n); rc != kNvmlSuccess) {
    fail("device count", rc);
  }
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice device = nullptr;
    char device_name[96] = {0};
    NvmlMemory mem{};
    if (NvmlReturn rc = handle(i, &device); rc != kNvmlSuccess) {
      fail("device handle", rc);
      result.gpus.clear();
      break;
    }
    if (name(device, device_name, sizeof(device_name)) != kNvmlSuccess) device_name[0] = '\0';
    if (memory(device, &mem) != kNvmlSuccess) mem.total = 0;
    result.gpus.push_back(Gpu{static_cast<int32_t>(i), GpuTypeFromName(device_name),
                              static_cast<int64_t>(mem.total), false});
  }
  if (result.gpus.empty() && result.why_none.empty()) result.why_none = "NVML reports no GPU";
  shutdown();
  dlclose(lib);
  return result;
}

GpuDriverFiles FindGpuDriverFiles() {
  GpuDriverFiles files;
  for (const char* device : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                             "/dev/nvidia-modeset"}) {
    if (access(device, F_OK) == 0) files.control_devices.push_back(device);
  }
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu"}) {
    DIR* d = opendir(dir);
    if (d == nullptr) continue;
    while (dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      const bool driver = name.rfind("libcuda.so", 0) == 0 || name.rfind("libnvidia-", 0) == 0;
      if (driver && name.find(".so") != std::string::npos) {
        files.libraries.push_back(std::string(dir) + "/" + name);
      }
    }
    closedir(d);
  }
  std::sort(files.libraries.begin(), files.libraries.end());
  return files;
}

}  // namespace ringmaster::worker
