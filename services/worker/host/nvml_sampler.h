// Reads utilisation, memory and temperature of every GPU through NVML, loaded with dlopen (as
// discovery does, host/gpus.h), so the worker builds and runs where there is no NVIDIA driver:
// Open() then fails with UNAVAILABLE and the caller exports nothing. Thread-compatible: one
// owner calls Read().
#ifndef RINGMASTER_SERVICES_WORKER_HOST_NVML_SAMPLER_H_
#define RINGMASTER_SERVICES_WORKER_HOST_NVML_SAMPLER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/core/gpu_metrics.h"

namespace ringmaster::worker {

class NvmlSampler {
 public:
  static absl::StatusOr<std::unique_ptr<NvmlSampler>> Open();
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  // One reading per GPU, in NVML's index order; a value NVML refuses is left unset.
  absl::StatusOr<std::vector<GpuReading>> Read();

 private:
  struct Api;
  explicit NvmlSampler(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_NVML_SAMPLER_H_
