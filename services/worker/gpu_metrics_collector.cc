#include "gpu_metrics_collector.h"

#include <map>

#include "common/log.h"

namespace ringmaster::worker {

std::vector<prometheus::MetricFamily> ToMetricFamilies(const std::vector<MetricSample>& samples) {
  static const std::map<std::string, std::string> kHelp = {
      {kDcgmGpuUtil, "GPU utilization (in %)."},
      {kDcgmFbUsed, "Framebuffer memory used (in MiB)."},
      {kDcgmFbFree, "Framebuffer memory free (in MiB)."},
      {kDcgmGpuTemp, "GPU temperature (in C)."}};
  std::map<std::string, prometheus::MetricFamily> families;
  for (const MetricSample& s : samples) {
    prometheus::MetricFamily& f = families[s.name];
    if (f.name.empty()) {
      f.name = s.name;
      auto help = kHelp.find(s.name);
      f.help = help == kHelp.end() ? "" : help->second;
      f.type = prometheus::MetricType::Gauge;
    }
    prometheus::ClientMetric m;
    for (const auto& [k, v] : s.labels) m.label.push_back({k, v});
    m.gauge.value = s.value;
    f.metric.push_back(std::move(m));
  }
  std::vector<prometheus::MetricFamily> out;
  for (auto& [name, f] : families) out.push_back(std::move(f));
  return out;
}

std::vector<prometheus::MetricFamily> GpuMetricsCollector::Collect() const {
  MutexLock lock(&mu_);
  absl::StatusOr<std::vector<GpuReading>> readings = source_();
  if (!readings.ok()) {
    if (!failing_) RM_LOG(kWarning) << "GPU metrics not exported: " << readings.status();
    failing_ = true;
    return {};
  }
  failing_ = false;
  return ToMetricFamilies(DcgmSamples(*readings, hostname_));
}

}  // namespace ringmaster::worker
