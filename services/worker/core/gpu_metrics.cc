#include "worker/core/gpu_metrics.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::worker {

std::vector<MetricSample> DcgmSamples(const std::vector<GpuReading>& readings,
                                      const std::string& hostname) {
  constexpr double kMiB = 1024.0 * 1024.0;
  std::vector<MetricSample> out;
  for (const GpuReading& r : readings) {
    const std::map<std::string, std::string> labels = {{"gpu", absl::StrCat(r.index)},
                                                       {"UUID", r.uuid},
                                                       {"device", absl::StrCat("nvidia", r.index)},
                                                       {"modelName", r.model},
                                                       {"Hostname", hostname}};
    if (r.utilization_percent) {
      out.push_back({kDcgmGpuUtil, labels, static_cast<double>(*r.utilization_percent)});
    }
    // dcgm-exporter reports framebuffer memory in whole MiB.
    if (r.memory_used_bytes) {
      out.push_back({kDcgmFbUsed, labels,
                     static_cast<double>(static_cast<uint64_t>(*r.memory_used_bytes / kMiB))});
    }
    if (r.memory_free_bytes) {
      out.push_back({kDcgmFbFree, labels,
                     static_cast<double>(static_cast<uint64_t>(*r.memory_free_bytes / kMiB))});
    }
    if (r.temperature_celsius) {
      out.push_back({kDcgmGpuTemp, labels, static_cast<double>(*r.temperature_celsius)});
    }
  }
  return out;
}

}  // namespace ringmaster::worker
