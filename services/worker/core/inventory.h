// Decisions about what a worker offers: GPU type names from device names, and the default
// number of CPU slots.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_INVENTORY_H_
#define RINGMASTER_SERVICES_WORKER_CORE_INVENTORY_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace ringmaster::worker {

// The platform's type name of a GPU from its device name: a known model ("Tesla T4" -> "t4",
// "NVIDIA A100-SXM4-80GB" -> "a100", "NVIDIA H100 80GB HBM3" -> "h100"), else the name
// lower-cased with runs of other characters as '-' and a leading "nvidia"/"tesla" dropped
// ("NVIDIA GeForce RTX 4090" -> "geforce-rtx-4090"), at most 32 characters ([a-z0-9-], as
// the scheduler requires). "gpu" when nothing is left.
std::string GpuTypeFromName(std::string_view device_name);

// The type of a MIG instance: its GPU's type and the instance's profile from its NVML name
// ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "h100-1g.10gb"; a '+' of a
// profile such as "1g.10gb+me" becomes '-'). "<type>-mig" when the name shows no profile.
std::string MigGpuType(std::string_view gpu_name, std::string_view instance_name);

// CPU slots offered: `flag` when >= 0; else (auto) one per core on a machine without GPUs and
// none beside GPUs (their ranks need the cores).
int32_t CpuSlots(int64_t flag, int32_t cores, int32_t gpus);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_INVENTORY_H_
