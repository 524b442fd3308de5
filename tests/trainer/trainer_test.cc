#include "trainer/trainer.h"

#include <set>
#include <sstream>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/local_ranks.h"
#include "trainer/cpu_compute.h"
#include "trainer/local_communicator.h"
#include "trainer/synthetic_data.h"

namespace ringmaster::trainer {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using testing::RunOnLocalRanks;

TrainerConfig SmallConfig() {
  TrainerConfig config;
  config.model = ModelSpec{"test", 256, {64, 32}, 5};
  config.batch_size = 32;
  config.steps = 100;
  config.warmup_steps = 2;
  config.lr = 0.1;
  config.log_every = 10;
  config.data_batches = 100;      // unseen data every step: the loss falls by learning, not memory
  config.bucket_bytes = 8 << 10;  // several buckets
  return config;
}

TEST(TrainTest, LossFallsOnOneRankAndPrintsTheSummary) {
  CpuCompute compute(1);
  auto comm = LocalCommunicator::CreateGroup(1);
  std::ostringstream out;
  auto result = Train(SmallConfig(), compute, *comm[0], &out);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_LT(result->final_loss, 0.6 * result->initial_loss) << out.str();
  EXPECT_GT(result->images_per_sec, 0);
  EXPECT_EQ(result->ranks_differing, 0);
  EXPECT_GE(result->buckets, 2);
  EXPECT_THAT(out.str(), ContainsRegex("step 10/100 loss [0-9.]+ images/sec [0-9.]+"));
  EXPECT_THAT(out.str(), ContainsRegex("total images/sec: [0-9]+\\.[0-9][0-9]\n"));
  EXPECT_THAT(out.str(), ContainsRegex("final loss: [0-9.]+\n"));
  EXPECT_THAT(out.str(), ContainsRegex("weights checksum: [0-9a-f]{16}\n"));
  EXPECT_THAT(out.str(), HasSubstr("weights consistent across 1 ranks: yes"));
}

TEST(TrainTest, FourRanksEndWithBitwiseEqualWeightsAndAFallingLoss) {
  std::vector<TrainResult> results(4);
  auto statuses = RunOnLocalRanks(4, [&](LocalCommunicator& comm) -> absl::Status {
    CpuCompute compute;
    TrainerConfig config = SmallConfig();
    config.steps = 20;
    auto result = Train(config, compute, comm, nullptr);
    if (!result.ok()) return result.status();
    results[comm.rank()] = *result;
    return absl::OkStatus();
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  for (const TrainResult& result : results) {
    EXPECT_EQ(result.ranks_differing, 0);
    EXPECT_EQ(result.weights_fingerprint, results[0].weights_fingerprint);
    // The reported losses are global means: the same on every rank.
    EXPECT_EQ(result.initial_loss, results[0].initial_loss);
    EXPECT_LT(result.final_loss, result.initial_loss);
  }
}

TEST(TrainTest, SameSeedSameWeightsOtherSeedOtherWeights) {
  CpuCompute compute(1);
  auto comm = LocalCommunicator::CreateGroup(1);
  TrainerConfig config = SmallConfig();
  config.steps = 3;
  config.warmup_steps = 1;
  auto a = Train(config, compute, *comm[0], nullptr);
  auto b = Train(config, compute, *comm[0], nullptr);
  config.seed = 43;
  auto c = Train(config, compute, *comm[0], nullptr);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->weights_fingerprint, b->weights_fingerprint);
  EXPECT_NE(a->weights_fingerprint, c->weights_fingerprint);
}

TEST(SyntheticDataTest, LabelsAreDeterministicPerRankAndCoverTheClasses) {
  CpuCompute compute(1);
  auto labels_of = [&](uint64_t seed, int rank) {
    auto data = SyntheticDataset::Create(compute, 64, 10, 32, 8, seed, rank, 2);
    EXPECT_TRUE(data.ok()) << data.status();
    std::vector<float> labels;
    for (int b = 0; b < 8; ++b) labels.insert(labels.end(), data->labels(b), data->labels(b) + 32);
    return labels;
  };
  const std::vector<float> rank0 = labels_of(1, 0);
  EXPECT_EQ(rank0, labels_of(1, 0));
  EXPECT_NE(rank0, labels_of(1, 1));
  std::set<float> classes(rank0.begin(), rank0.end());
  EXPECT_GE(classes.size(), 8u);
  for (float label : classes) {
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 10);
  }
}

// What an elastic resize relies on: the global sample sequence does not depend on how many
// ranks share it. Rank r of 4 (8 per rank) reads what half of rank r / 2 of 2 (16) reads.
TEST(SyntheticDataTest, TheGlobalSampleSequenceIsTheSameAtEveryWorldSize) {
  CpuCompute compute(1);
  constexpr int kInputs = 48, kBatches = 3;
  auto global_batches = [&](int ranks) {
    const int per_rank = 16 / ranks;
    std::vector<std::vector<float>> inputs(kBatches), labels(kBatches);
    for (int rank = 0; rank < ranks; ++rank) {
      auto data = SyntheticDataset::Create(compute, kInputs, 7, per_rank, kBatches, 5, rank, ranks);
      EXPECT_TRUE(data.ok()) << data.status();
      for (int b = 0; b < kBatches; ++b) {
        inputs[b].insert(inputs[b].end(), data->inputs(b), data->inputs(b) + per_rank * kInputs);
        labels[b].insert(labels[b].end(), data->labels(b), data->labels(b) + per_rank);
      }
    }
    return std::make_pair(inputs, labels);
  };
  const auto one = global_batches(1);
  EXPECT_EQ(global_batches(2), one);
  EXPECT_EQ(global_batches(4), one);
  EXPECT_NE(one.first[0], one.first[1]);
}

TEST(SyntheticDataTest, ArgmaxRowsPicksEachRowsLargest) {
  EXPECT_EQ(ArgmaxRows({0, 5, 1, 9, -1, 2}, 2, 3), (std::vector<float>{1, 0}));
}

}  // namespace
}  // namespace ringmaster::trainer
