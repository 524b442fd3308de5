#include "trainer/gradient_buckets.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/local_ranks.h"
#include "trainer/local_communicator.h"
#include "trainer/model.h"

namespace ringmaster::trainer {
namespace {

using testing::RunOnLocalRanks;

// Layers of 100, 200, 300 and 400 floats (weights + biases), forward order.
std::vector<LayerShape> FourLayers() {
  std::vector<LayerShape> layers;
  size_t offset = 0;
  for (int out : {100, 200, 300, 400}) {
    LayerShape layer{out - 1, 1, offset};  // (out-1) weights + 1 bias = `out` floats
    offset += layer.param_count();
    layers.push_back(layer);
  }
  return layers;
}

TEST(PlanBucketsTest, FillsBucketsFromTheOutputLayerDown) {
  // 700 floats fit: {3, 2} = 700 floats, then {1, 0} = 300 floats.
  std::vector<Bucket> plan = PlanBuckets(FourLayers(), 700 * sizeof(float));
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].first_layer, 2);
  EXPECT_EQ(plan[0].last_layer, 3);
  EXPECT_EQ(plan[0].offset, 300u);
  EXPECT_EQ(plan[0].count, 700u);
  EXPECT_EQ(plan[1].first_layer, 0);
  EXPECT_EQ(plan[1].last_layer, 1);
  EXPECT_EQ(plan[1].offset, 0u);
  EXPECT_EQ(plan[1].count, 300u);
}

TEST(PlanBucketsTest, LayerLargerThanTheBucketGetsOneOfItsOwn) {
  std::vector<Bucket> plan = PlanBuckets(FourLayers(), 150 * sizeof(float));
  ASSERT_EQ(plan.size(), 4u);
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(plan[b].first_layer, 3 - b);
    EXPECT_EQ(plan[b].last_layer, 3 - b);
  }
  EXPECT_EQ(plan[0].count, 400u);
  // Layer 0 (100 floats) fits 150 alone, but not beside layer 1's 200.
  EXPECT_EQ(plan[3].count, 100u);
}

TEST(PlanBucketsTest, HugeBucketHoldsTheWholeModel) {
  std::vector<Bucket> plan = PlanBuckets(FourLayers(), size_t{25} << 20);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].first_layer, 0);
  EXPECT_EQ(plan[0].last_layer, 3);
  EXPECT_EQ(plan[0].offset, 0u);
  EXPECT_EQ(plan[0].count, 1000u);
}

TEST(PlanBucketsTest, BucketsTileTheGradientBufferExactly) {
  for (const char* name : {"mlp-small", "mlp", "mlp-large"}) {
    auto spec = FindModel(name);
    ASSERT_TRUE(spec.ok());
    for (size_t mib : {1, 4, 25, 1000}) {
      std::vector<Bucket> plan = PlanBuckets(LayerShapes(*spec), mib << 20);
      size_t covered = 0;
      size_t next_end = ParameterCount(*spec);  // buckets come top-down
      for (const Bucket& bucket : plan) {
        EXPECT_EQ(bucket.offset + bucket.count, next_end) << name << " " << mib << " MiB";
        next_end = bucket.offset;
        covered += bucket.count;
      }
      EXPECT_EQ(next_end, 0u);
      EXPECT_EQ(covered, ParameterCount(*spec));
    }
  }
}

TEST(PlanBucketsTest, DefaultBucketsSplitTheNamedModelsAsDocumented) {
  const size_t kDefault = size_t{25} << 20;
  EXPECT_EQ(PlanBuckets(LayerShapes(*FindModel("mlp-small")), kDefault).size(), 1u);
  EXPECT_EQ(PlanBuckets(LayerShapes(*FindModel("mlp")), kDefault).size(), 2u);
  EXPECT_EQ(PlanBuckets(LayerShapes(*FindModel("mlp-large")), kDefault).size(), 4u);
}

TEST(GradientReducerTest, StartsEachBucketWhenItsLowestLayerIsReadyAndSumsAcrossRanks) {
  const std::vector<LayerShape> layers = FourLayers();
  std::vector<std::vector<float>> grads(2, std::vector<float>(1000));
  auto statuses = RunOnLocalRanks(2, [&](LocalCommunicator& comm) -> absl::Status {
    std::vector<float>& g = grads[comm.rank()];
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i) + 1000.0f * comm.rank();
    GradientReducer reducer(comm, g.data(), PlanBuckets(layers, 700 * sizeof(float)));
    for (int l = 3; l >= 0; --l) {
      if (absl::Status s = reducer.OnLayerReady(l); !s.ok()) return s;
    }
    return reducer.WaitAll();
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  for (size_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(grads[0][i], 2.0f * i + 1000.0f) << i;
    ASSERT_EQ(grads[1][i], grads[0][i]) << i;
  }
}

TEST(GradientReducerTest, WaitAllBeforeEveryBucketStartedIsFailedPrecondition) {
  auto group = LocalCommunicator::CreateGroup(1);
  std::vector<float> g(1000);
  GradientReducer reducer(*group[0], g.data(), PlanBuckets(FourLayers(), 700 * sizeof(float)));
  ASSERT_TRUE(reducer.OnLayerReady(3).ok());
  ASSERT_TRUE(reducer.OnLayerReady(2).ok());
  EXPECT_EQ(reducer.WaitAll().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringmaster::trainer
