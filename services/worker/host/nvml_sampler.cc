#include "worker/host/nvml_sampler.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "worker/host/nvml.h"

namespace ringmaster::worker {

struct NvmlSampler::Api {
  void* lib = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*count)(unsigned*) = nullptr;
  NvmlReturn (*handle)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
};

absl::StatusOr<std::unique_ptr<NvmlSampler>> NvmlSampler::Open() {
  auto api = std::make_unique<Api>();
  api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->lib == nullptr) {
    return absl::UnavailableError("libnvidia-ml.so.1 not found (no NVIDIA driver)");
  }
  void* lib = api->lib;
  api->init = NvmlSymbol<decltype(api->init)>(lib, "nvmlInit_v2");
  api->shutdown = NvmlSymbol<decltype(api->shutdown)>(lib, "nvmlShutdown");
  api->error_string = NvmlSymbol<decltype(api->error_string)>(lib, "nvmlErrorString");
  api->count = NvmlSymbol<decltype(api->count)>(lib, "nvmlDeviceGetCount_v2");
  api->handle = NvmlSymbol<decltype(api->handle)>(lib, "nvmlDeviceGetHandleByIndex_v2");
  api->name = NvmlSymbol<decltype(api->name)>(lib, "nvmlDeviceGetName");
  api->uuid = NvmlSymbol<decltype(api->uuid)>(lib, "nvmlDeviceGetUUID");
  api->memory = NvmlSymbol<decltype(api->memory)>(lib, "nvmlDeviceGetMemoryInfo");
  api->utilization = NvmlSymbol<decltype(api->utilization)>(lib, "nvmlDeviceGetUtilizationRates");
  api->temperature = NvmlSymbol<decltype(api->temperature)>(lib, "nvmlDeviceGetTemperature");
  if (!api->init || !api->shutdown || !api->error_string || !api->count || !api->handle ||
      !api->name || !api->uuid || !api->memory || !api->utilization || !api->temperature) {
    dlclose(lib);
    return absl::UnavailableError("libnvidia-ml.so.1 lacks the NVML functions we need");
  }
  if (NvmlReturn rc = api->init(); rc != kNvmlSuccess) {
    const std::string why = api->error_string(rc);
    dlclose(lib);
    return absl::UnavailableError(absl::StrCat("NVML init: ", why));
  }
  return std::unique_ptr<NvmlSampler>(new NvmlSampler(std::move(api)));
}

NvmlSampler::NvmlSampler(std::unique_ptr<Api> api) : api_(std::move(api)) {}

NvmlSampler::~NvmlSampler() {
  api_->shutdown();
  dlclose(api_->lib);
}

absl::StatusOr<std::vector<GpuReading>> NvmlSampler::Read() {
  unsigned n = 0;
  if (NvmlReturn rc = api_->count(&n); rc != kNvmlSuccess) {
    return absl::UnavailableError(absl::StrCat("NVML device count: ", api_->error_string(rc)));
  }
  std::vector<GpuReading> out;
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice device = nullptr;
    if (NvmlReturn rc = api_->handle(i, &device); rc != kNvmlSuccess) {
      return absl::UnavailableError(
          absl::StrCat("NVML handle of GPU ", i, ": ", api_->error_string(rc)));
    }
    GpuReading r;
    r.index = static_cast<int32_t>(i);
    char text[96] = {0};
    if (api_->uuid(device, text, sizeof(text)) == kNvmlSuccess) r.uuid = text;
    text[0] = '\0';
    if (api_->name(device, text, sizeof(text)) == kNvmlSuccess) r.model = text;
    NvmlMemory mem{};
    if (api_->memory(device, &mem) == kNvmlSuccess) {
      r.memory_used_bytes = mem.used;
      r.memory_free_bytes = mem.free;
    }
    NvmlUtilization util{};
    if (api_->utilization(device, &util) == kNvmlSuccess) r.utilization_percent = util.gpu;
    unsigned temp = 0;
    if (api_->temperature(device, kNvmlTemperatureGpu, &temp) == kNvmlSuccess) {
      r.temperature_celsius = temp;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ringmaster::worker
