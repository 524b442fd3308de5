#include "trainer/mlp.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/local_ranks.h"
#include "trainer/cpu_compute.h"
#include "trainer/gradient_buckets.h"
#include "trainer/local_communicator.h"
#include "trainer/synthetic_data.h"

namespace ringmaster::trainer {
namespace {

using testing::RunOnLocalRanks;

ModelSpec TinySpec() { return ModelSpec{"tiny", 6, {5, 4}, 3}; }

struct Batch {
  std::vector<float> inputs;
  std::vector<float> labels;
};

Batch RandomBatch(const ModelSpec& spec, int batch, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  b.inputs.resize(static_cast<size_t>(batch) * spec.input_dim);
  for (float& x : b.inputs) x = rng.Normal();
  for (int i = 0; i < batch; ++i) b.labels.push_back(static_cast<float>(i % spec.num_classes));
  return b;
}

// Gradient of the batch's mean loss, with the backward pass reporting through a reducer over
// `comm` (a no-op sum for one rank).
absl::StatusOr<std::vector<float>> Gradient(Mlp& mlp, Communicator& comm, const Batch& batch) {
  if (absl::Status s = mlp.Forward(batch.inputs.data(), batch.labels.data()); !s.ok()) return s;
  GradientReducer reducer(comm, mlp.gradients(), PlanBuckets(mlp.layers(), 40 * sizeof(float)));
  if (absl::Status s = mlp.Backward([&](int l) { return reducer.OnLayerReady(l); }); !s.ok()) {
    return s;
  }
  if (absl::Status s = reducer.WaitAll(); !s.ok()) return s;
  return mlp.GradientsToHost();
}

TEST(MlpTest, GradientMatchesFiniteDifferences) {
  CpuCompute compute(1);
  auto comm = LocalCommunicator::CreateGroup(1);
  const ModelSpec spec = TinySpec();
  auto mlp = Mlp::Create(compute, spec, 4);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  ASSERT_TRUE(mlp->InitParameters(7).ok());
  const Batch batch = RandomBatch(spec, 4, 11);
  auto analytic = Gradient(*mlp, *comm[0], batch);
  ASSERT_TRUE(analytic.ok()) << analytic.status();
  auto params = mlp->ParametersToHost();
  ASSERT_TRUE(params.ok());

  const float eps = 1e-2f;
  auto loss_at = [&](const std::vector<float>& p) {
    EXPECT_TRUE(mlp->SetParameters(p).ok());
    EXPECT_TRUE(mlp->Forward(batch.inputs.data(), batch.labels.data()).ok());
    return *mlp->Loss();
  };
  ASSERT_EQ(analytic->size(), params->size());
  int nonzero = 0;
  for (size_t i = 0; i < params->size(); ++i) {
    std::vector<float> plus = *params, minus = *params;
    plus[i] += eps;
    minus[i] -= eps;
    const double numeric = (loss_at(plus) - loss_at(minus)) / (2 * eps);
    EXPECT_NEAR((*analytic)[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << "parameter " << i;
    if (std::abs(numeric) > 1e-4) ++nonzero;
  }
  // The check means something only if most gradients are not zero.
  EXPECT_GT(nonzero, static_cast<int>(params->size()) / 2);
}

TEST(MlpTest, SummedGradientsOfTwoRanksAreTwiceTheFullBatchGradient) {
  const ModelSpec spec = TinySpec();
  const Batch full = RandomBatch(spec, 8, 21);
  std::vector<std::vector<float>> per_rank(2);
  auto statuses = RunOnLocalRanks(2, [&](LocalCommunicator& comm) -> absl::Status {
    CpuCompute compute;
    auto mlp = Mlp::Create(compute, spec, 4);
    if (!mlp.ok()) return mlp.status();
    if (absl::Status s = mlp->InitParameters(3); !s.ok()) return s;
    // Rank r takes samples [4r, 4r + 4).
    Batch half;
    const std::ptrdiff_t first = comm.rank() * 4;
    half.inputs.assign(full.inputs.begin() + first * spec.input_dim,
                       full.inputs.begin() + (first + 4) * spec.input_dim);
    half.labels.assign(full.labels.begin() + first, full.labels.begin() + first + 4);
    auto gradient = Gradient(*mlp, comm, half);
    if (!gradient.ok()) return gradient.status();
    per_rank[comm.rank()] = *gradient;
    return absl::OkStatus();
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;

  CpuCompute compute(1);
  auto single = LocalCommunicator::CreateGroup(1);
  auto mlp = Mlp::Create(compute, spec, 8);
  ASSERT_TRUE(mlp.ok());
  ASSERT_TRUE(mlp->InitParameters(3).ok());
  auto whole = Gradient(*mlp, *single[0], full);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(per_rank[0], per_rank[1]);
  for (size_t i = 0; i < whole->size(); ++i) {
    EXPECT_NEAR(per_rank[0][i] / 2, (*whole)[i], 1e-6 + 1e-5 * std::abs((*whole)[i])) << i;
  }
}

TEST(MlpTest, InitialisationDependsOnTheSeedAlone) {
  CpuCompute compute(1);
  auto a = Mlp::Create(compute, TinySpec(), 2);
  auto b = Mlp::Create(compute, TinySpec(), 5);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->InitParameters(9).ok());
  ASSERT_TRUE(b->InitParameters(9).ok());
  EXPECT_EQ(*a->ParametersToHost(), *b->ParametersToHost());
  ASSERT_TRUE(b->InitParameters(10).ok());
  EXPECT_NE(*a->ParametersToHost(), *b->ParametersToHost());
}

TEST(MlpTest, BackwardBeforeForwardIsFailedPrecondition) {
  CpuCompute compute(1);
  auto mlp = Mlp::Create(compute, TinySpec(), 2);
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(mlp->Backward([](int) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(MlpTest, BadShapeIsInvalidArgument) {
  CpuCompute compute(1);
  EXPECT_EQ(Mlp::Create(compute, TinySpec(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::trainer
