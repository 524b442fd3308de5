#include "trainer/cpu_compute.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ringmaster::trainer {
namespace {

// Row-major reference: c = op(a) * op(b).
std::vector<float> NaiveGemm(bool ta, bool tb, int m, int n, int k, const std::vector<float>& a,
                             const std::vector<float>& b) {
  std::vector<float> c(static_cast<size_t>(m) * n, 0.0f);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      float sum = 0;
      for (int p = 0; p < k; ++p) {
        const float av = ta ? a[p * m + i] : a[i * k + p];
        const float bv = tb ? b[j * k + p] : b[p * n + j];
        sum += av * bv;
      }
      c[i * n + j] = sum;
    }
  }
  return c;
}

TEST(CpuComputeTest, GemmMatchesTheReferenceForEveryTransposition) {
  CpuCompute compute(1);
  const int m = 3;
  const int n = 4;
  const int k = 5;
  std::vector<float> a(static_cast<size_t>(m) * k);
  std::vector<float> b(static_cast<size_t>(k) * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> c(static_cast<size_t>(m) * n,
                           100.0f);  // beta = 0 must ignore what was there
      ASSERT_TRUE(compute.Gemm(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data()).ok());
      EXPECT_EQ(c, NaiveGemm(ta, tb, m, n, k, a, b)) << "ta=" << ta << " tb=" << tb;
    }
  }
}

TEST(CpuComputeTest, SoftmaxCrossEntropyOfEqualLogitsIsLogClasses) {
  CpuCompute compute(1);
  std::vector<float> logits(2 * 4, 3.0f), labels = {1, 3}, loss(2), grad(8);
  ASSERT_TRUE(
      compute.SoftmaxCrossEntropy(logits.data(), labels.data(), 2, 4, loss.data(), grad.data())
          .ok());
  EXPECT_NEAR(loss[0], std::log(4.0f), 1e-6);
  EXPECT_NEAR(loss[1], std::log(4.0f), 1e-6);
  // (softmax - onehot) / rows.
  EXPECT_NEAR(grad[0], 0.25f / 2, 1e-7);
  EXPECT_NEAR(grad[1], -0.75f / 2, 1e-7);
  EXPECT_NEAR(grad[7], -0.75f / 2, 1e-7);
}

TEST(CpuComputeTest, SoftmaxCrossEntropyStaysFiniteForHugeLogits) {
  CpuCompute compute(1);
  std::vector<float> logits = {1000.0f, -1000.0f}, labels = {1}, loss(1), grad(2);
  ASSERT_TRUE(
      compute.SoftmaxCrossEntropy(logits.data(), labels.data(), 1, 2, loss.data(), grad.data())
          .ok());
  EXPECT_NEAR(loss[0], 2000.0f, 1e-2);
  EXPECT_TRUE(std::isfinite(grad[0]) && std::isfinite(grad[1]));
}

TEST(CpuComputeTest, LabelOutsideTheClassesIsInvalidArgument) {
  CpuCompute compute(1);
  std::vector<float> logits(3), labels = {3}, loss(1), grad(3);
  EXPECT_EQ(
      compute.SoftmaxCrossEntropy(logits.data(), labels.data(), 1, 3, loss.data(), grad.data())
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(CpuComputeTest, BiasReluColumnSumsAndAxpy) {
  CpuCompute compute(1);
  std::vector<float> y = {-1, 2, 3, -4}, bias = {0.5f, -2.5f};
  ASSERT_TRUE(compute.AddBias(bias.data(), 2, 2, /*relu=*/true, y.data()).ok());
  EXPECT_EQ(y, (std::vector<float>{0, 0, 3.5f, 0}));
  std::vector<float> dy = {1, 1, 1, 1};
  ASSERT_TRUE(compute.ReluBackward(y.data(), 4, dy.data()).ok());
  EXPECT_EQ(dy, (std::vector<float>{0, 0, 1, 0}));
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, sums(3);
  ASSERT_TRUE(compute.ColumnSums(x.data(), 2, 3, sums.data()).ok());
  EXPECT_EQ(sums, (std::vector<float>{5, 7, 9}));
  std::vector<float> w = {1, 1};
  ASSERT_TRUE(compute.Axpy(-0.5f, sums.data(), 2, w.data()).ok());
  EXPECT_EQ(w, (std::vector<float>{-1.5f, -2.5f}));
}

}  // namespace
}  // namespace ringmaster::trainer
