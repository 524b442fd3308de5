#include "trainer/memory_estimate.h"

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/cpu_compute.h"
#include "trainer/local_communicator.h"
#include "trainer/trainer.h"

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;

// CpuCompute that keeps count of the bytes it holds, and the most it held at once.
class CountingCompute : public CpuCompute {
 public:
  CountingCompute() : CpuCompute(1) {}
  absl::StatusOr<float*> Allocate(size_t count) override {
    absl::StatusOr<float*> data = CpuCompute::Allocate(count);
    if (data.ok()) {
      live_[*data] = static_cast<int64_t>(count * sizeof(float));
      held_ += live_[*data];
      peak_ = std::max(peak_, held_);
    }
    return data;
  }
  void Free(float* data) override {
    if (auto it = live_.find(data); it != live_.end()) {
      held_ -= it->second;
      live_.erase(it);
    }
    CpuCompute::Free(data);
  }
  int64_t peak() const { return peak_; }
  int64_t held() const { return held_; }

 private:
  std::map<float*, int64_t> live_;
  int64_t held_ = 0;
  int64_t peak_ = 0;
};

// 4 inputs -> 3 -> 2 classes: 23 parameters.
TrainerConfig TinyConfig() {
  TrainerConfig config;
  config.model = ModelSpec{"tiny", 4, {3}, 2};
  config.batch_size = 5;
  config.data_batches = 2;
  config.steps = 4;
  config.warmup_steps = 1;
  return config;
}

TEST(MemoryEstimateTest, CountsEveryBufferOfTheRunByHand) {
  TrainerConfig config = TinyConfig();
  MemoryEstimate m = EstimateDeviceMemory(config, 1);
  EXPECT_EQ(m.batch_per_rank, 5);
  EXPECT_EQ(m.parameters, 23 * 4);
  EXPECT_EQ(m.gradients, 23 * 4);
  EXPECT_EQ(m.optimizer, 0);  // plain SGD keeps no state
  // Outputs 3 + 2 per sample, two gradient buffers of the widest layer (4 inputs), one loss.
  EXPECT_EQ(m.activations, (5 * 5 + 2 * 5 * 4 + 5) * 4);
  EXPECT_EQ(m.data, 2 * (5 * 4 + 5) * 4);
  EXPECT_EQ(m.workspace, (2 + 1) * 4);
  EXPECT_EQ(m.total(), 92 + 92 + 280 + 200 + 12);

  config.momentum = 0.9;
  config.checkpoint_dir = "/ckpt";
  m = EstimateDeviceMemory(config, 1);
  EXPECT_EQ(m.optimizer, 23 * 4);
  EXPECT_EQ(m.workspace, (23 + 1) * 4);  // a resume broadcasts the parameters through a buffer
  EXPECT_EQ(m.total(), 92 * 3 + 280 + 200 + 96);
}

TEST(MemoryEstimateTest, TheBatchPerRankIsTheGlobalBatchSplit) {
  TrainerConfig config = TinyConfig();
  EXPECT_EQ(BatchPerRank(config, 4), 5);
  config.global_batch_size = 64;
  EXPECT_EQ(BatchPerRank(config, 4), 16);
  EXPECT_EQ(BatchPerRank(config, 3), 22);  // rounded up: never below what a rank would hold
  EXPECT_LT(EstimateDeviceMemory(config, 4).total(), EstimateDeviceMemory(config, 2).total());
}

// The estimate against what a real run allocates: on the CPU with an in-process communicator
// there is no NCCL scratch and the host values need no staging, so the peak is the rest.
TEST(MemoryEstimateTest, MatchesThePeakOfARealRun) {
  TrainerConfig config = TinyConfig();
  CountingCompute compute;
  auto comm = LocalCommunicator::CreateGroup(1);
  ASSERT_TRUE(Train(config, compute, *comm[0], nullptr).ok());
  const MemoryEstimate m = EstimateDeviceMemory(config, 1);
  EXPECT_EQ(compute.peak(), m.total() - m.workspace);
  EXPECT_EQ(compute.held(), 0);
}

TEST(MemoryEstimateTest, MatchesThePeakOfARunResumedWithMomentum) {
  const std::string dir = ::testing::TempDir() + "memory-estimate-ckpt";
  std::filesystem::remove_all(dir);
  TrainerConfig config = TinyConfig();
  config.momentum = 0.9;
  config.lr = 0.01;
  config.checkpoint_dir = dir;
  config.checkpoint_every = 2;
  auto comm = LocalCommunicator::CreateGroup(1);
  {
    CountingCompute first;
    ASSERT_TRUE(Train(config, first, *comm[0], nullptr).ok());
  }
  config.steps = 6;  // resumes after step 4: the parameters come through the staging buffer
  CountingCompute resumed;
  ASSERT_TRUE(Train(config, resumed, *comm[0], nullptr).ok());
  const MemoryEstimate m = EstimateDeviceMemory(config, 1);
  EXPECT_EQ(resumed.peak(), m.total() - 4);  // all of it but NCCL's scratch float
}

TEST(MemoryEstimateTest, RefusesPastTheLimitSayingWhatItNeedsAndWhatIsAllowed) {
  TrainerConfig config = TinyConfig();
  const int64_t needs = EstimateDeviceMemory(config, 1).total();
  EXPECT_TRUE(CheckDeviceMemory(config, 1, 0).ok());  // no limit
  EXPECT_TRUE(CheckDeviceMemory(config, 1, needs).ok());
  const absl::Status over = CheckDeviceMemory(config, 1, needs - 1);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.message(), absl::StrCat("needs ", needs,
                                         " bytes of GPU memory (model tiny, 5 samples per rank); "
                                         "RINGMASTER_GPU_MEMORY allows ",
                                         needs - 1));
}

TEST(MemoryEstimateTest, TheAllreduceBenchmarkNeedsItsLargestBuffer) {
  TrainerConfig config = TinyConfig();
  config.mode = Mode::kAllreduceBenchmark;
  config.min_bytes = 8;
  config.max_bytes = 1 << 20;
  EXPECT_EQ(EstimateDeviceMemory(config, 2).total(), (1 << 20) + 4);
  const absl::Status over = CheckDeviceMemory(config, 2, 1 << 19);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(), HasSubstr("allreduce benchmark up to 1048576 bytes"));
}

}  // namespace
}  // namespace ringmaster::trainer
