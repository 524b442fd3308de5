// Placement of GPU shares (core/share_placement.h): FGD's fragmentation measure on hand-worked
// nodes, and what each policy chooses where the choice is clear.
#include "scheduler/core/share_placement.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::ElementsAre;

ShareNode Node(std::string model, std::vector<int32_t> gpu_free, int64_t cpu = 64'000,
               int64_t memory = 262'144) {
  ShareNode n;
  n.model = std::move(model);
  n.cpu_total = n.cpu_free = cpu;
  n.memory_total = n.memory_free = memory;
  n.gpu_free = std::move(gpu_free);
  return n;
}

ShareTask Task(int32_t num_gpu, int32_t gpu_milli, std::vector<std::string> models = {},
               int64_t cpu = 4'000, int64_t memory = 8'192) {
  ShareTask t;
  t.num_gpu = num_gpu;
  t.gpu_milli = num_gpu == 1 ? gpu_milli : num_gpu == 0 ? 0 : kWholeGpu;
  t.models = std::move(models);
  t.cpu = cpu;
  t.memory = memory;
  return t;
}

TEST(SharePlacementTest, FragmentationIsTheFreeCapacityATaskCannotUse) {
  const ShareNode node = Node("T4", {1000, 500, 200, 0});
  EXPECT_EQ(Fragmentation(node, Task(1, 300)), 200) << "the GPU with 200 free is too small";
  EXPECT_EQ(Fragmentation(node, Task(1, 600)), 700) << "only the whole free GPU fits 600";
  EXPECT_EQ(Fragmentation(node, Task(1, 1000)), 700) << "partly used GPUs are fragments";
  EXPECT_EQ(Fragmentation(node, Task(2, 1000)), 1700) << "it does not fit: everything";
  EXPECT_EQ(Fragmentation(node, Task(0, 0)), 1700) << "a CPU task uses no GPU";
  EXPECT_EQ(Fragmentation(node, Task(1, 300, {"V100M16"})), 1700) << "another GPU type";
  EXPECT_EQ(Fragmentation(node, Task(1, 300, {}, 65'000)), 1700) << "not enough CPU";
  TaskMix mix = {{Task(1, 300), 0.5}, {Task(1, 1000), 0.5}};
  EXPECT_DOUBLE_EQ(ExpectedFragmentation(node, mix), 0.5 * 200 + 0.5 * 700);
}

TEST(SharePlacementTest, AMixHasOneShapePerGpuShareAndTypesWithMedianCpuAndMemory) {
  TaskMix mix = MixOf({Task(1, 500, {}, 1'000), Task(1, 500, {}, 3'000), Task(1, 500, {}, 2'000),
                       Task(1, 500, {"T4"}), Task(2, 1000)});
  ASSERT_EQ(mix.size(), 3u);
  double total = 0;
  for (const TaskShape& s : mix) {
    total += s.weight;
    if (s.task.num_gpu == 1 && s.task.models.empty()) {
      EXPECT_DOUBLE_EQ(s.weight, 0.6);
      EXPECT_EQ(s.task.cpu, 2'000);
    }
  }
  EXPECT_DOUBLE_EQ(total, 1.0);
}

TEST(SharePlacementTest, FgdFillsAGpuExactlyRatherThanSplitAWholeOne) {
  // Half-GPU tasks and whole-GPU tasks come alike: taking half of the whole GPU would leave two
  // halves no whole task can use; the half already free is used up instead.
  const std::vector<ShareNode> nodes = {Node("T4", {1000, 500})};
  const TaskMix mix = {{Task(1, 500), 0.5}, {Task(1, 1000), 0.5}};
  const std::vector<double> expected = {ExpectedFragmentation(nodes[0], mix)};
  const ShareContext context = PrepareShares(nodes, mix);
  std::mt19937_64 rng(1);
  ShareChoice c = ChooseShare(nodes, Task(1, 500), SharePolicy::kFgd, context, expected, rng);
  EXPECT_EQ(c.node, 0);
  EXPECT_THAT(c.gpus, ElementsAre(1));
}

TEST(SharePlacementTest, RingmasterKeepsAScarceGpuTypeForTheTasksThatCanRunOnlyThere) {
  // One T4 node and four G2 nodes; 30% of the tasks may run only on T4, 40% only on G2. To FGD
  // a G2-only task finds every free T4 a fragment, and there are more G2-only tasks: it puts a
  // task that may run anywhere on the T4. But T4s are scarce for the tasks that need them, and
  // G2s plenty: Ringmaster puts it on a G2.
  std::vector<ShareNode> nodes = {Node("T4", {1000, 1000})};
  for (int i = 0; i < 4; ++i) nodes.push_back(Node("G2", {1000, 1000}));
  const TaskMix mix = {
      {Task(1, 1000, {"T4"}), 0.3}, {Task(1, 1000, {"G2"}), 0.4}, {Task(1, 1000), 0.3}};
  std::vector<double> expected;
  for (const ShareNode& n : nodes) expected.push_back(ExpectedFragmentation(n, mix));
  const ShareContext context = PrepareShares(nodes, mix);
  std::mt19937_64 rng(1);
  EXPECT_EQ(ChooseShare(nodes, Task(1, 1000), SharePolicy::kFgd, context, expected, rng).node, 0);
  EXPECT_GE(
      ChooseShare(nodes, Task(1, 1000), SharePolicy::kRingmaster, context, expected, rng).node, 1);
  EXPECT_EQ(
      ChooseShare(nodes, Task(1, 1000, {"T4"}), SharePolicy::kRingmaster, context, expected, rng)
          .node,
      0)
      << "a T4-only task still gets the T4";
}

TEST(SharePlacementTest, BaselinesChooseAsTheirNamesSay) {
  const std::vector<ShareNode> nodes = {Node("T4", {1000, 1000, 1000, 1000}),
                                        Node("T4", {1000, 300, 1000, 1000}),
                                        Node("T4", {0, 0, 0, 1000})};
  const TaskMix mix;
  const std::vector<double> expected(nodes.size(), 0);
  const ShareContext context = PrepareShares(nodes, mix);
  std::mt19937_64 rng(1);
  ShareChoice packed =
      ChooseShare(nodes, Task(1, 250), SharePolicy::kGpuPacking, context, expected, rng);
  EXPECT_EQ(packed.node, 1) << "a shared GPU with room first";
  EXPECT_THAT(packed.gpus, ElementsAre(1));
  EXPECT_EQ(ChooseShare(nodes, Task(1, 1000), SharePolicy::kBestFit, context, expected, rng).node,
            2)
      << "the node left fullest";
  EXPECT_EQ(ChooseShare(nodes, Task(2, 1000), SharePolicy::kBestFit, context, expected, rng).node,
            1);
  for (int i = 0; i < 20; ++i) {
    ShareChoice r = ChooseShare(nodes, Task(3, 1000), SharePolicy::kRandom, context, expected, rng);
    EXPECT_TRUE(r.node == 0 || r.node == 1) << r.node;
    EXPECT_EQ(r.gpus.size(), 3u);
  }
  EXPECT_EQ(ChooseShare(nodes, Task(5, 1000), SharePolicy::kFgd, context, expected, rng).node, -1)
      << "no node has five GPUs";
}

TEST(SharePlacementTest, AllocateTakesTheShareFromTheChosenGpus) {
  ShareNode node = Node("T4", {1000, 1000});
  Allocate(node, Task(1, 300, {}, 1'000, 2'000), {1});
  EXPECT_THAT(node.gpu_free, ElementsAre(1000, 700));
  EXPECT_EQ(node.cpu_free, 63'000);
  EXPECT_EQ(node.memory_free, 262'144 - 2'000);
  EXPECT_FALSE(Fits(node, Task(2, 1000)));
  EXPECT_TRUE(Fits(node, Task(1, 700)));
}

TEST(SharePlacementTest, RecentDemandWeighsShapesByTheirRanksAndForgetsTheOldest) {
  RecentDemand demand(/*capacity=*/8);
  EXPECT_TRUE(demand.Mix().empty());
  demand.Add(Task(0, 0), 4);  // CPU ranks are not demand for GPUs
  EXPECT_EQ(demand.changes(), 0u);
  demand.Add(Task(1, 500), 2);
  demand.Add(Task(2, 0, {"t4"}), 2);  // two ranks of 2 whole t4s
  TaskMix mix = demand.Mix();
  ASSERT_EQ(mix.size(), 2u);
  EXPECT_EQ(mix[0].task.num_gpu, 1);
  EXPECT_EQ(mix[0].task.gpu_milli, 500);
  EXPECT_DOUBLE_EQ(mix[0].weight, 0.5);
  EXPECT_EQ(mix[1].task.num_gpu, 2);
  EXPECT_THAT(mix[1].task.models, ElementsAre("t4"));
  // 7 quarter ranks: 11 in all, so the oldest 3 go (the two halves and one of the t4 pair).
  demand.Add(Task(1, 250), 7);
  mix = demand.Mix();
  ASSERT_EQ(mix.size(), 2u);
  EXPECT_EQ(mix[0].task.gpu_milli, 250);
  EXPECT_DOUBLE_EQ(mix[0].weight, 7.0 / 8);
  EXPECT_EQ(mix[1].task.num_gpu, 2);
  EXPECT_DOUBLE_EQ(mix[1].weight, 1.0 / 8);
  // One job larger than the window fills it alone.
  demand.Add(Task(1, 100), 100);
  mix = demand.Mix();
  ASSERT_EQ(mix.size(), 1u);
  EXPECT_DOUBLE_EQ(mix[0].weight, 1.0);
  EXPECT_EQ(demand.changes(), 4u);
}

TEST(SharePlacementTest, TheLivePoliciesHaveFlagNames) {
  EXPECT_EQ(LiveSharePolicy("gpu-packing"), SharePolicy::kGpuPacking);
  EXPECT_EQ(LiveSharePolicy("fgd"), SharePolicy::kFgd);
  EXPECT_EQ(LiveSharePolicy("ringmaster"), SharePolicy::kRingmaster);
  EXPECT_EQ(LiveSharePolicy("random"), std::nullopt);
  EXPECT_EQ(LiveSharePolicy("FGD"), std::nullopt);
}

}  // namespace
}  // namespace ringmaster::scheduler
