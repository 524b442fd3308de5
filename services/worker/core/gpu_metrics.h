// GPU readings (from NVML) turned into the samples dcgm-exporter publishes, so dashboards built
// for dcgm-exporter work on Ringmaster workers unchanged. Names, units and labels as
// dcgm-exporter's defaults: DCGM_FI_DEV_GPU_UTIL (%), DCGM_FI_DEV_FB_USED and
// DCGM_FI_DEV_FB_FREE (MiB), DCGM_FI_DEV_GPU_TEMP (degrees C); labels gpu (the index), UUID,
// device ("nvidiaN"), modelName and Hostname. A reading NVML could not give is left out rather
// than exported as 0. Pure functions.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_GPU_METRICS_H_
#define RINGMASTER_SERVICES_WORKER_CORE_GPU_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster::worker {

struct GpuReading {
  int32_t index = 0;
  std::string uuid;   // "GPU-6f1c..."
  std::string model;  // "NVIDIA H100 80GB HBM3"
  std::optional<uint32_t> utilization_percent;
  std::optional<uint64_t> memory_used_bytes;
  std::optional<uint64_t> memory_free_bytes;
  std::optional<uint32_t> temperature_celsius;
};

struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
  bool operator==(const MetricSample&) const = default;
};

inline constexpr char kDcgmGpuUtil[] = "DCGM_FI_DEV_GPU_UTIL";
inline constexpr char kDcgmFbUsed[] = "DCGM_FI_DEV_FB_USED";
inline constexpr char kDcgmFbFree[] = "DCGM_FI_DEV_FB_FREE";
inline constexpr char kDcgmGpuTemp[] = "DCGM_FI_DEV_GPU_TEMP";

std::vector<MetricSample> DcgmSamples(const std::vector<GpuReading>& readings,
                                      const std::string& hostname);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_GPU_METRICS_H_
