// Exports per-GPU utilisation, memory and temperature in /metrics under dcgm-exporter's names
// (core/gpu_metrics.h). Readings are taken at scrape time from a source (NvmlSampler::Read on
// a machine with GPUs); a scrape whose reading fails exports no GPU series and logs once per
// failure streak. Thread-safe: scrapes may come from several exposer threads.
#ifndef RINGMASTER_SERVICES_WORKER_GPU_METRICS_COLLECTOR_H_
#define RINGMASTER_SERVICES_WORKER_GPU_METRICS_COLLECTOR_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "core/gpu_metrics.h"

namespace ringmaster::worker {

class GpuMetricsCollector : public prometheus::Collectable {
 public:
  using Source = std::function<absl::StatusOr<std::vector<GpuReading>>()>;
  GpuMetricsCollector(Source source, std::string hostname)
      : source_(std::move(source)), hostname_(std::move(hostname)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  mutable Mutex mu_;  // one NVML reading at a time
  mutable bool failing_ ABSL_GUARDED_BY(mu_) = false;
  Source source_;
  std::string hostname_;
};

// The families (one per metric name, gauges) for `samples`, in a stable order.
std::vector<prometheus::MetricFamily> ToMetricFamilies(const std::vector<MetricSample>& samples);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_GPU_METRICS_COLLECTOR_H_
