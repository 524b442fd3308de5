#include "trainer/memory_estimate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "trainer/allreduce_benchmark.h"
#include "trainer/model.h"

namespace ringmaster::trainer {
namespace {

constexpr int64_t kFloat = sizeof(float);
// BroadcastHostValue's two floats, the largest staging buffer besides the parameters'.
constexpr int64_t kSmallStagingFloats = 2;
// NcclCommunicator's scratch: one float, held for the whole run.
constexpr int64_t kCommunicatorScratchFloats = 1;

}  // namespace

int BatchPerRank(const TrainerConfig& config, int world_size) {
  const int ranks = std::max(1, world_size);
  if (config.global_batch_size > 0) return (config.global_batch_size + ranks - 1) / ranks;
  return config.batch_size;
}

MemoryEstimate EstimateDeviceMemory(const TrainerConfig& config, int world_size) {
  MemoryEstimate m;
  if (config.mode == Mode::kAllreduceBenchmark) {
    const std::vector<size_t> sizes = SweepSizes(config.min_bytes, config.max_bytes);
    const int64_t largest = sizes.empty() ? 0 : static_cast<int64_t>(sizes.back());
    m.workspace = largest + kCommunicatorScratchFloats * kFloat;
    return m;
  }
  const int64_t batch = BatchPerRank(config, world_size);
  m.batch_per_rank = static_cast<int>(batch);
  const int64_t params = static_cast<int64_t>(ParameterCount(config.model));
  m.parameters = params * kFloat;
  m.gradients = params * kFloat;
  m.optimizer = config.momentum != 0 ? params * kFloat : 0;
  int64_t outputs = 0;
  int64_t widest = 0;
  for (const LayerShape& layer : LayerShapes(config.model)) {
    outputs += layer.out;
    widest = std::max<int64_t>({widest, layer.in, layer.out});
  }
  m.activations = (batch * outputs + 2 * batch * widest + batch) * kFloat;
  m.data = int64_t{config.data_batches} * (batch * config.model.input_dim + batch) * kFloat;
  const int64_t staging =
      config.checkpoint_dir.empty() ? kSmallStagingFloats : std::max(params, kSmallStagingFloats);
  m.workspace = (staging + kCommunicatorScratchFloats) * kFloat;
  return m;
}

absl::Status CheckDeviceMemory(const TrainerConfig& config, int world_size, int64_t limit_bytes) {
  if (limit_bytes <= 0) return absl::OkStatus();
  const MemoryEstimate m = EstimateDeviceMemory(config, world_size);
  if (m.total() <= limit_bytes) return absl::OkStatus();
  const std::string what =
      config.mode == Mode::kAllreduceBenchmark
          ? absl::StrCat("allreduce benchmark up to ", config.max_bytes, " bytes")
          : absl::StrCat("model ", config.model.name, ", ", m.batch_per_rank, " samples per rank");
  return absl::ResourceExhaustedError(absl::StrCat("needs ", m.total(), " bytes of GPU memory (",
                                                   what, "); RINGMASTER_GPU_MEMORY allows ",
                                                   limit_bytes));
}

}  // namespace ringmaster::trainer
