#include "trainer/optimizer.h"

#include <vector>

#include "gtest/gtest.h"
#include "trainer/cpu_compute.h"

namespace ringmaster::trainer {
namespace {

TEST(SgdTest, PlainSgdKeepsNoStateAndStepsAlongTheMeanGradient) {
  CpuCompute compute(1);
  absl::StatusOr<Sgd> sgd = Sgd::Create(compute, 2, 0.5, 0.0f);
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  EXPECT_EQ(sgd->state_size(), 0u);
  EXPECT_TRUE(sgd->StateToHost()->empty());
  std::vector<float> w = {1.0f, -1.0f};
  const std::vector<float> summed = {4.0f, 2.0f};  // two ranks' gradients, summed
  ASSERT_TRUE(sgd->Step(summed.data(), 2, w.data()).ok());
  EXPECT_EQ(w, (std::vector<float>{0.0f, -1.5f}));
}

TEST(SgdTest, MomentumAccumulatesTheMeanGradient) {
  CpuCompute compute(1);
  absl::StatusOr<Sgd> sgd = Sgd::Create(compute, 2, 0.5, 0.5f);
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  EXPECT_EQ(*sgd->StateToHost(), (std::vector<float>{0.0f, 0.0f}));
  std::vector<float> w = {1.0f, -1.0f};
  const std::vector<float> summed = {4.0f, 2.0f};
  ASSERT_TRUE(sgd->Step(summed.data(), 2, w.data()).ok());  // v = (2, 1)
  EXPECT_EQ(w, (std::vector<float>{0.0f, -1.5f}));
  ASSERT_TRUE(sgd->Step(summed.data(), 2, w.data()).ok());  // v = (3, 1.5)
  EXPECT_EQ(*sgd->StateToHost(), (std::vector<float>{3.0f, 1.5f}));
  EXPECT_EQ(w, (std::vector<float>{-1.5f, -2.25f}));
}

// What lets a checkpoint of the state resume at another world size.
TEST(SgdTest, TheStateOfTheSameMeanGradientIsTheSameAtEveryWorldSize) {
  CpuCompute compute(1);
  std::vector<std::vector<float>> states;
  for (int ranks : {1, 2, 4}) {
    absl::StatusOr<Sgd> sgd = Sgd::Create(compute, 3, 0.1, 0.9f);
    ASSERT_TRUE(sgd.ok()) << sgd.status();
    std::vector<float> w = {0.0f, 0.0f, 0.0f};
    const std::vector<float> summed = {0.25f * ranks, -1.0f * ranks, 3.0f * ranks};
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(sgd->Step(summed.data(), ranks, w.data()).ok());
    }
    states.push_back(*sgd->StateToHost());
  }
  EXPECT_EQ(states[1], states[0]);
  EXPECT_EQ(states[2], states[0]);
}

TEST(SgdTest, StateOfTheWrongSizeIsInvalidArgument) {
  CpuCompute compute(1);
  absl::StatusOr<Sgd> sgd = Sgd::Create(compute, 3, 0.1, 0.9f);
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  EXPECT_EQ(sgd->SetState({1.0f}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(sgd->SetState({1.0f, 2.0f, 3.0f}).ok());
  EXPECT_EQ(*sgd->StateToHost(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

}  // namespace
}  // namespace ringmaster::trainer
