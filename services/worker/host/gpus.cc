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
  // MIG: optional (older drivers lack it); without them every GPU is listed whole. The mode is
  // only read: the admin sets it, never the worker.
  auto mig_mode =
      NvmlSymbol<NvmlReturn (*)(NvmlDevice, unsigned*, unsigned*)>(lib, "nvmlDeviceGetMigMode");
  auto mig_count =
      NvmlSymbol<NvmlReturn (*)(NvmlDevice, unsigned*)>(lib, "nvmlDeviceGetMaxMigDeviceCount");
  auto mig_handle = NvmlSymbol<NvmlReturn (*)(NvmlDevice, unsigned, NvmlDevice*)>(
      lib, "nvmlDeviceGetMigDeviceHandleByIndex");
  auto uuid = NvmlSymbol<NvmlReturn (*)(NvmlDevice, char*, unsigned)>(lib, "nvmlDeviceGetUUID");
  const bool mig_known = mig_mode && mig_count && mig_handle && uuid;
  unsigned n = 0;
  if (NvmlReturn rc = count(&n); rc != kNvmlSuccess) {
    fail("device count", rc);
  }
  std::vector<Gpu> instances;  // MIG instances, numbered after the whole GPUs
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice device = nullptr;
    char device_name[96] = {0};
    NvmlMemory mem{};
    if (NvmlReturn rc = handle(i, &device); rc != kNvmlSuccess) {
      fail("device handle", rc);
      result.gpus.clear();
      instances.clear();
      break;
    }
    if (name(device, device_name, sizeof(device_name)) != kNvmlSuccess) device_name[0] = '\0';
    unsigned current = 0, pending = 0, slots = 0;
    if (mig_known && mig_mode(device, &current, &pending) == kNvmlSuccess &&
        current == kNvmlMigEnabled && mig_count(device, &slots) == kNvmlSuccess) {
      for (unsigned k = 0; k < slots; ++k) {
        NvmlDevice instance = nullptr;
        if (mig_handle(device, k, &instance) != kNvmlSuccess) continue;  // an empty slot
        char instance_name[96] = {0}, instance_uuid[96] = {0};
        NvmlMemory instance_mem{};
        if (name(instance, instance_name, sizeof(instance_name)) != kNvmlSuccess) {
          instance_name[0] = '\0';
        }
        if (uuid(instance, instance_uuid, sizeof(instance_uuid)) != kNvmlSuccess) continue;
        if (memory(instance, &instance_mem) != kNvmlSuccess) instance_mem.total = 0;
        instances.push_back(Gpu{0, MigGpuType(device_name, instance_name),
                                static_cast<int64_t>(instance_mem.total), false, instance_uuid});
      }
      continue;
    }
    if (memory(device, &mem) != kNvmlSuccess) mem.total = 0;
    result.gpus.push_back(Gpu{static_cast<int32_t>(i), GpuTypeFromName(device_name),
                              static_cast<int64_t>(mem.total), false, ""});
  }
  for (Gpu& gpu : instances) {
    gpu.index = static_cast<int32_t>(n + (&gpu - instances.data()));
    result.gpus.push_back(std::move(gpu));
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
