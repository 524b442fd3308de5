#include "scheduler/core/placement.h"

#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::ElementsAre;
using Kind = PlacementDecision::Kind;

Worker MakeWorker(const std::string& id, int gpus, const std::string& type, int cpu_slots = 0) {
  Worker w;
  w.id = id;
  w.address = "10.0.0." + id.substr(1);
  w.port = 7071;
  w.cpu_slots = cpu_slots;
  for (int i = 0; i < gpus; ++i) w.gpus.push_back(Gpu{i, type, 16LL << 30, false});
  return w;
}

std::set<std::string> WorkersOf(const PlacementDecision& d) {
  std::set<std::string> out;
  for (const auto& r : d.ranks) out.insert(r.worker_id);
  return out;
}

TEST(PlacementTest, PlacesWholeGangOrNothing) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 3, "t4"));
  cluster.UpsertWorker(MakeWorker("w2", 3, "t4"));
  PlacementDecision d = cluster.Place({3, 2, "t4"});  // 6 of 6 GPUs, but only 2 ranks fit
  EXPECT_EQ(d.kind, Kind::kWait);
  EXPECT_TRUE(d.ranks.empty());
  EXPECT_EQ(cluster.GpuTotals()["t4"].allocated, 0);
}

TEST(PlacementTest, PacksGangOntoFewestWorkers) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 2, "t4"));
  cluster.UpsertWorker(MakeWorker("w2", 8, "t4"));
  cluster.UpsertWorker(MakeWorker("w3", 4, "t4"));
  PlacementDecision d = cluster.Place({8, 1, "t4"});
  ASSERT_EQ(d.kind, Kind::kPlaced);
  EXPECT_EQ(WorkersOf(d), std::set<std::string>{"w2"});
  d = cluster.Place({10, 1, "t4"});
  ASSERT_EQ(d.kind, Kind::kPlaced);
  EXPECT_EQ(WorkersOf(d), (std::set<std::string>{"w1", "w2"}));  // 8 + best fit 2
}

TEST(PlacementTest, SingleWorkerGangPicksTightestFit) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 8, "t4"));
  cluster.UpsertWorker(MakeWorker("w2", 2, "t4"));
  cluster.UpsertWorker(MakeWorker("w3", 4, "t4"));
  PlacementDecision d = cluster.Place({2, 1, "t4"});
  ASSERT_EQ(d.kind, Kind::kPlaced);
  EXPECT_EQ(WorkersOf(d), std::set<std::string>{"w2"});
}

TEST(PlacementTest, RanksAreNumberedFromTheFirstWorkerWithDistinctGpus) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 4, "v100"));
  PlacementDecision d = cluster.Place({2, 2, "v100"});
  ASSERT_EQ(d.kind, Kind::kPlaced);
  ASSERT_EQ(d.ranks.size(), 2u);
  EXPECT_EQ(d.ranks[0].rank, 0);
  EXPECT_THAT(d.ranks[0].gpu_indices, ElementsAre(0, 1));
  EXPECT_THAT(d.ranks[1].gpu_indices, ElementsAre(2, 3));
  EXPECT_EQ(d.ranks[0].worker_address, "10.0.0.1");
}

TEST(PlacementTest, HonoursGpuType) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 8, "t4"));
  cluster.UpsertWorker(MakeWorker("w2", 2, "v100"));
  PlacementDecision d = cluster.Place({2, 1, "v100"});
  ASSERT_EQ(d.kind, Kind::kPlaced);
  EXPECT_EQ(WorkersOf(d), std::set<std::string>{"w2"});
  d = cluster.Place({4, 1, "v100"});
  EXPECT_EQ(d.kind, Kind::kInfeasible);
  EXPECT_EQ(d.reason, "needs 4 x v100, the cluster has 2");
}

TEST(PlacementTest, MixedTypesOnOneWorkerAreNotConfused) {
  ClusterState cluster;
  Worker w = MakeWorker("w1", 2, "t4");
  w.gpus.push_back(Gpu{2, "a100", 0, false});
  w.gpus.push_back(Gpu{3, "a100", 0, false});
  cluster.UpsertWorker(w);
  PlacementDecision d = cluster.Place({1, 2, "a100"});
  ASSERT_EQ(d.kind, Kind::kPlaced);
  EXPECT_THAT(d.ranks[0].gpu_indices, ElementsAre(2, 3));
}

TEST(PlacementTest, AnyTypeKeepsAllRanksOnOneType) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 3, "t4"));
  cluster.UpsertWorker(MakeWorker("w2", 3, "v100"));
  cluster.UpsertWorker(MakeWorker("w3", 3, "v100"));
  PlacementDecision d = cluster.Place({4, 1, ""});
  ASSERT_EQ(d.kind, Kind::kPlaced);
  EXPECT_EQ(WorkersOf(d), (std::set<std::string>{"w2", "w3"}));
  d = cluster.Place({7, 1, ""});
  EXPECT_EQ(d.kind, Kind::kInfeasible);
  EXPECT_EQ(d.reason, "needs 7 x GPU of one type, the cluster has at most 6 of one type");
}

TEST(PlacementTest, PendingReasonCountsFreeGpus) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 4, "t4"));
  cluster.UpsertWorker(MakeWorker("w2", 4, "t4"));
  PlacementDecision first = cluster.Place({4, 1, "t4"});
  ASSERT_EQ(first.kind, Kind::kPlaced);
  ASSERT_TRUE(cluster.Allocate(first.ranks).ok());
  PlacementDecision d = cluster.Place({8, 1, "t4"});
  EXPECT_EQ(d.kind, Kind::kWait);
  EXPECT_EQ(d.reason, "needs 8 x t4, 4 free");
}

TEST(PlacementTest, PendingReasonNamesFragmentation) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 3, "t4"));
  cluster.UpsertWorker(MakeWorker("w2", 3, "t4"));
  PlacementDecision d = cluster.Place({3, 2, "t4"});
  EXPECT_EQ(d.kind, Kind::kWait);
  EXPECT_EQ(d.reason, "needs 3 ranks of 2 x t4 on one worker each, 2 fit");
}

TEST(PlacementTest, CpuJobsUseCpuSlotsOnly) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 8, "t4", 0));
  cluster.UpsertWorker(MakeWorker("w2", 0, "", 2));
  cluster.UpsertWorker(MakeWorker("w3", 0, "", 2));
  PlacementDecision d = cluster.Place({4, 0, ""});
  ASSERT_EQ(d.kind, Kind::kPlaced);
  EXPECT_EQ(WorkersOf(d), (std::set<std::string>{"w2", "w3"}));
  for (const auto& r : d.ranks) EXPECT_TRUE(r.gpu_indices.empty());
  ASSERT_TRUE(cluster.Allocate(d.ranks).ok());
  EXPECT_EQ(cluster.CpuTotals().allocated, 4);
  EXPECT_EQ(cluster.GpuTotals()["t4"].allocated, 0);
  d = cluster.Place({1, 0, ""});
  EXPECT_EQ(d.kind, Kind::kWait);
  EXPECT_EQ(d.reason, "needs 1 CPU slots, 0 free");
}

TEST(PlacementTest, LostWorkersOfferNothing) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 4, "t4"));
  cluster.SetWorkerState("w1", WorkerState::kLost);
  EXPECT_EQ(cluster.Place({1, 1, "t4"}).kind, Kind::kInfeasible);
  cluster.SetWorkerState("w1", WorkerState::kReady);
  EXPECT_EQ(cluster.Place({1, 1, "t4"}).kind, Kind::kPlaced);
}

TEST(PlacementTest, AllocateRefusesDoubleBookingAndChangesNothing) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 2, "t4"));
  ASSERT_TRUE(cluster.Allocate({{0, "w1", "", {0}}}).ok());
  absl::Status s = cluster.Allocate({{0, "w1", "", {1}}, {1, "w1", "", {0}}});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(cluster.AllocatedGpus("w1"), ElementsAre(0));
  EXPECT_EQ(cluster.Allocate({{0, "nope", "", {0}}}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PlacementTest, ReleaseReturnsCapacity) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 4, "t4"));
  PlacementDecision d = cluster.Place({4, 1, "t4"});
  ASSERT_TRUE(cluster.Allocate(d.ranks).ok());
  EXPECT_EQ(cluster.Place({1, 1, "t4"}).kind, Kind::kWait);
  cluster.Release(d.ranks);
  EXPECT_EQ(cluster.Place({4, 1, "t4"}).kind, Kind::kPlaced);
  EXPECT_EQ(cluster.GpuTotals()["t4"].allocated, 0);
}

TEST(PlacementTest, ReRegistrationKeepsAllocations) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 2, "t4"));
  ASSERT_TRUE(cluster.Allocate({{0, "w1", "", {1}}}).ok());
  cluster.UpsertWorker(MakeWorker("w1", 2, "t4"));
  EXPECT_THAT(cluster.AllocatedGpus("w1"), ElementsAre(1));
  PlacementDecision d = cluster.Place({1, 1, "t4"});
  ASSERT_EQ(d.kind, Kind::kPlaced);
  EXPECT_THAT(d.ranks[0].gpu_indices, ElementsAre(0));
}

// Fits is the fast answer a reservation's search asks many times: it must agree with Place
// on every state, through allocations, releases, lost and probation workers, any-type and CPU
// requests.
TEST(PlacementTest, FitsAgreesWithPlaceOnRandomStates) {
  std::mt19937 rng(7);
  ClusterState cluster;
  for (int i = 1; i <= 12; ++i) {
    cluster.UpsertWorker(
        MakeWorker("w" + std::to_string(i), i % 3 == 0 ? 4 : 8, i % 4 == 0 ? "a100" : "t4", i % 5));
  }
  std::vector<std::vector<RankPlacement>> held;
  int compared = 0, placed = 0;
  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    const std::string worker = "w" + std::to_string(1 + rng() % 12);
    if (op == 0 && !held.empty()) {
      const size_t k = rng() % held.size();
      cluster.Release(held[k]);
      held.erase(held.begin() + static_cast<long>(k));
    } else if (op == 1) {
      cluster.SetWorkerHealthy(worker, rng() % 3 != 0);
      cluster.SetWorkerProbation(worker, rng() % 2 == 0);
    } else if (op == 2) {
      cluster.SetWorkerState(worker, rng() % 4 == 0 ? WorkerState::kLost : WorkerState::kReady);
    }
    const char* types[] = {"t4", "a100", "", "v100"};
    GangRequest request{static_cast<int32_t>(1 + rng() % 6), static_cast<int32_t>(rng() % 9),
                        types[rng() % 4], rng() % 2 == 0};
    PlacementDecision d = cluster.Place(request);
    ASSERT_EQ(cluster.Fits(request), d.kind == Kind::kPlaced)
        << "step " << step << ": " << request.replicas << " x " << request.gpus_per_replica << " '"
        << request.gpu_type << "' checked " << request.checked << ": " << d.reason;
    ++compared;
    if (d.kind == Kind::kPlaced && rng() % 2 == 0) {
      ASSERT_TRUE(cluster.Allocate(d.ranks).ok());
      held.push_back(d.ranks);
      ++placed;
    }
  }
  EXPECT_GT(placed, 100) << "the states never filled up: the test compares little";
  EXPECT_EQ(compared, 3000);
}

}  // namespace
}  // namespace ringmaster::scheduler
