// The scheduler's side of the pre-run check: shapes, baselines, the plan, the job state
// machine's check inputs, and placement around an unhealthy worker. Pure, no I/O.
#include "scheduler/core/health_check.h"

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/core/job_state_machine.h"
#include "scheduler/core/placement.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::HasSubstr;

std::vector<RankPlacement> Ranks(std::vector<std::string> workers) {
  std::vector<RankPlacement> out;
  for (size_t i = 0; i < workers.size(); ++i) {
    out.push_back({static_cast<int32_t>(i), workers[i], workers[i] + "-addr", {}});
  }
  return out;
}

TEST(CheckShapeTest, CountsWorkersAndTheMostRanksOnOne) {
  CheckShape shape = ShapeOf(Ranks({"w1", "w1", "w2", "w2"}), "cpu");
  EXPECT_EQ(shape.workers, 2);
  EXPECT_EQ(shape.ranks_per_worker, 2);
  EXPECT_EQ(shape.Key(), "2x2/cpu");
  EXPECT_EQ(ShapeOf(Ranks({"w1", "w1", "w1", "w2"}), "cpu").Key(), "2x3/cpu");
  EXPECT_EQ(ShapeOf(Ranks({"w1"}), "cpu").Key(), "1x1/cpu");
}

// A check inside MPI_Init times fewer allreduces, wire-up still fresh, than ringmaster-check:
// each kind has baselines of its own.
TEST(CheckShapeTest, ChecksInsideMpiInitHaveBaselinesOfTheirOwn) {
  EXPECT_EQ(ShapeOf(Ranks({"w1", "w1", "w2", "w2"}), "cpu", true).Key(), "2x2/cpu/mpi_init");
  EXPECT_NE(ShapeOf(Ranks({"w1", "w2"}), "cpu", true), ShapeOf(Ranks({"w1", "w2"}), "cpu"));
}

// The scheduler's view of the worker's ChecksInSession: which baseline to send.
TEST(CheckShapeTest, TheSchedulerKnowsWhichChecksRunInsideMpiInit) {
  JobSpec trainer;
  trainer.trainer = TrainerWorkload{};
  EXPECT_TRUE(ChecksInSession(trainer, "cpu", false));
  EXPECT_FALSE(ChecksInSession(trainer, "gpu", false)) << "NCCL by ringmaster-check";
  EXPECT_FALSE(ChecksInSession(trainer, "cpu", true)) << "asked to check separately";
  JobSpec command;
  command.command = CommandWorkload{{"./a.out"}, {}, false};
  EXPECT_FALSE(ChecksInSession(command, "cpu", false));
  command.command->check_in_mpi_init = true;
  EXPECT_TRUE(ChecksInSession(command, "cpu", false));
}

TEST(CheckShapeTest, TheTransportIsTheGpusOnlyWhenEveryRankHasRealOnes) {
  const std::map<std::string, std::vector<Gpu>> workers = {
      {"real", {{0, "h100", 80, false}, {1, "h100", 80, false}}},
      {"sim", {{0, "t4", 16, true}}},
  };
  auto gpus_of = [&](const std::string& id) -> const std::vector<Gpu>* {
    auto w = workers.find(id);
    return w == workers.end() ? nullptr : &w->second;
  };
  std::vector<RankPlacement> ranks = Ranks({"real", "real"});
  ranks[0].gpu_indices = {0};
  ranks[1].gpu_indices = {1};
  EXPECT_EQ(ExpectedTransport(ranks, gpus_of), "gpu");
  EXPECT_EQ(ShapeOf(ranks, ExpectedTransport(ranks, gpus_of)).Key(), "1x2/gpu");

  ranks[1].gpu_indices = {};  // a CPU rank: NCCL cannot run on it
  EXPECT_EQ(ExpectedTransport(ranks, gpus_of), "cpu");
  ranks[1].gpu_indices = {7};  // a GPU the worker does not have
  EXPECT_EQ(ExpectedTransport(ranks, gpus_of), "cpu");

  std::vector<RankPlacement> simulated = Ranks({"sim"});
  simulated[0].gpu_indices = {0};
  EXPECT_EQ(ExpectedTransport(simulated, gpus_of), "cpu");
  std::vector<RankPlacement> unknown = Ranks({"gone"});
  unknown[0].gpu_indices = {0};
  EXPECT_EQ(ExpectedTransport(unknown, gpus_of), "cpu");
  EXPECT_EQ(ExpectedTransport({}, gpus_of), "cpu");
}

TEST(BaselineTest, FirstSampleIsTheBaseline) {
  std::deque<double> window;
  CheckBaseline b = UpdateBaseline(CheckBaseline{"2x1/cpu"}, window, 1.25, 1000);
  EXPECT_EQ(b.shape, "2x1/cpu");
  EXPECT_DOUBLE_EQ(b.busbw_gbps, 1.25);
  EXPECT_EQ(b.samples, 1);
  EXPECT_EQ(b.updated_at_ms, 1000);
  EXPECT_EQ(window, std::deque<double>({1.25}));
}

TEST(BaselineTest, ItIsTheMedianOfTheRecentSamplesTheLowerOneOfAnEvenCount) {
  std::deque<double> window;
  CheckBaseline b{"2x1/cpu"};
  b = UpdateBaseline(b, window, 3.0, 10);
  b = UpdateBaseline(b, window, 1.0, 20);
  EXPECT_DOUBLE_EQ(b.busbw_gbps, 1.0);
  b = UpdateBaseline(b, window, 2.0, 30);
  EXPECT_DOUBLE_EQ(b.busbw_gbps, 2.0);
  EXPECT_EQ(b.samples, 3);
  EXPECT_EQ(b.updated_at_ms, 30);
}

TEST(BaselineTest, OneOddRunMovesItNot) {
  std::deque<double> window;
  CheckBaseline b{"2x1/cpu"};
  for (int i = 0; i < 5; ++i) b = UpdateBaseline(b, window, 1.0, i);
  b = UpdateBaseline(b, window, 0.0, 10);
  EXPECT_DOUBLE_EQ(b.busbw_gbps, 1.0);
  b = UpdateBaseline(b, window, 1000.0, 11);
  EXPECT_DOUBLE_EQ(b.busbw_gbps, 1.0);
}

// Results from inside a job's MPI_Init are the job's own word: a job that forges them must
// outnumber the honest checks of the window to move the baseline, and once it stops, the
// honest ones take it back.
TEST(BaselineTest, ForgedSamplesMoveItOnlyAsAMajorityOfTheWindowAndNotForGood) {
  std::deque<double> window;
  CheckBaseline b{"2x1/cpu"};
  for (int i = 0; i < 8; ++i) b = UpdateBaseline(b, window, 1.0, i);
  for (int i = 0; i < 7; ++i) b = UpdateBaseline(b, window, 500.0, i);
  EXPECT_DOUBLE_EQ(b.busbw_gbps, 1.0) << "7 forged of 15";
  b = UpdateBaseline(b, window, 500.0, 20);
  EXPECT_DOUBLE_EQ(b.busbw_gbps, 500.0) << "8 of 15: a majority";
  EXPECT_EQ(window.size(), kBaselineWindow);
  // Honest checks fail against it, and are samples all the same.
  for (int i = 0; i < 8; ++i) b = UpdateBaseline(b, window, 1.0, 30 + i);
  EXPECT_DOUBLE_EQ(b.busbw_gbps, 1.0);
}

// After a scheduler restart only the stored baseline is known: it stands in for half a window.
TEST(BaselineTest, AfterARestartTheStoredBaselineHoldsUntilNewSamplesOutnumberIt) {
  std::deque<double> window;
  CheckBaseline b{"2x1/cpu", 2.0, 40, 0};
  for (size_t i = 0; i < kBaselineWindow / 2; ++i) {
    b = UpdateBaseline(b, window, 1.0, 1);
    EXPECT_DOUBLE_EQ(b.busbw_gbps, 2.0) << i + 1 << " new samples";
  }
  b = UpdateBaseline(b, window, 1.0, 2);
  EXPECT_DOUBLE_EQ(b.busbw_gbps, 1.0) << "8 new samples of 15";
  EXPECT_EQ(b.samples, 48);
}

TEST(CheckPlanTest, JobsAreCheckedUnlessTheyOrTheSchedulerOptOut) {
  JobSpec spec;
  EXPECT_TRUE(ChecksJob(spec, true));
  EXPECT_FALSE(ChecksJob(spec, false));
  spec.health_check = false;
  EXPECT_FALSE(ChecksJob(spec, true));
  spec.health_check = true;
  EXPECT_TRUE(ChecksJob(spec, true));
}

TEST(CheckPlanTest, AOneRankJobIsNotCheckedUnlessItAsksForMpirun) {
  JobSpec spec;
  spec.replicas = 1;
  EXPECT_TRUE(StartsDirectly(spec));
  EXPECT_FALSE(ChecksJob(spec, true)) << "no ring to check";
  spec.health_check = true;
  EXPECT_FALSE(ChecksJob(spec, true));
  spec.use_mpirun = true;
  EXPECT_FALSE(StartsDirectly(spec));
  EXPECT_TRUE(ChecksJob(spec, true));
  spec.use_mpirun = false;
  spec.replicas = 2;
  EXPECT_FALSE(StartsDirectly(spec)) << "more than one rank always starts under mpirun";
  EXPECT_TRUE(ChecksJob(spec, true));
}

TEST(CheckEventTest, SaysResultBandwidthBaselineAndShape) {
  CheckOutcome passed{"j-1", 0, true, true, 1.5, 0.42, "cpu", "", "", false};
  EXPECT_EQ(CheckEventText(passed, ShapeOf(Ranks({"a", "b"}), "cpu"), 1.6),
            "pre-run check passed: busbw 1.500 GB/s (baseline 1.600 GB/s, shape 2x1/cpu) in "
            "0.420 s");
  CheckOutcome failed{"j-1", 0, true, false, 0.1, 1.1, "cpu", "w4", "w4 was late", false};
  EXPECT_EQ(CheckEventText(failed, ShapeOf(Ranks({"a", "b"}), "cpu"), 0),
            "pre-run check failed: busbw 0.100 GB/s (no baseline yet, shape 2x1/cpu) in 1.100 s: "
            "w4 was late");
  CheckOutcome in_session{"j-1", 0, true, true, 1.5, 0.04, "cpu", "", "", true};
  EXPECT_EQ(CheckEventText(in_session, ShapeOf(Ranks({"a", "b"}), "cpu"), 1.6),
            "pre-run check passed: busbw 1.500 GB/s (baseline 1.600 GB/s, shape 2x1/cpu) in "
            "0.040 s inside the job's MPI_Init");
  CheckOutcome error{"j-1", 0, false, false, 0, 10, "cpu", "", "timed out", false};
  EXPECT_THAT(CheckEventText(error, ShapeOf(Ranks({"a"}), "cpu"), 0), HasSubstr("could not run"));
}

Job StartingJob(int32_t backoff) {
  Job job;
  job.id = "j-1";
  job.spec.replicas = 2;
  job.spec.restart_policy = RestartPolicy::kOnFailure;
  job.spec.backoff_limit = backoff;
  EXPECT_TRUE(ApplyInput(job, {JobInput::Kind::kPlaced, "", 0, Ranks({"w1", "w2"}), "t"}, 1).ok());
  return job;
}

TEST(CheckStateTest, ACheckIsAnEventWithoutAStateChange) {
  Job job = StartingJob(0);
  auto t = ApplyInput(job, {JobInput::Kind::kChecked, "pre-run check passed"}, 2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(job.state, JobState::kStarting);
  EXPECT_EQ(job.placement.size(), 2u);
  EXPECT_EQ(job.token, "t");
  EXPECT_TRUE(t->released.empty());
  EXPECT_FALSE(t->stop_ranks);
  EXPECT_EQ(t->event.state, JobState::kStarting);
  EXPECT_EQ(t->event.reason, "pre-run check passed");
}

TEST(CheckStateTest, AFailedCheckRePlacesWithoutUsingTheBackoffLimit) {
  Job job = StartingJob(0);  // no restart allowed for failures of the job itself
  auto t = ApplyInput(job, {JobInput::Kind::kCheckFailed, "re-placing without w2"}, 2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.attempt, 1);
  EXPECT_EQ(job.preemptions, 1);
  EXPECT_TRUE(t->stop_ranks);
  EXPECT_EQ(t->released.size(), 2u);
  EXPECT_EQ(job.message, "re-placing without w2");
  // The next real failure still gets its full backoff_limit (here: none, so FAILED).
  ASSERT_TRUE(ApplyInput(job, {JobInput::Kind::kPlaced, "", 0, Ranks({"w1", "w3"}), "u"}, 3).ok());
  ASSERT_TRUE(ApplyInput(job, {JobInput::Kind::kFailed, "rank 1 exited 1", 1}, 4).ok());
  EXPECT_EQ(job.state, JobState::kFailed);
}

TEST(CheckStateTest, EndedJobsTakeNoCheck) {
  Job job = StartingJob(0);
  ASSERT_TRUE(ApplyInput(job, {JobInput::Kind::kCancel, "bye"}, 2).ok());
  EXPECT_EQ(ApplyInput(job, {JobInput::Kind::kChecked, "late"}, 3).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ApplyInput(job, {JobInput::Kind::kCheckFailed, "late"}, 3).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

Worker CpuWorker(const std::string& id, int slots) {
  Worker w;
  w.id = id;
  w.address = id + "-addr";
  w.port = 7071;
  w.cpu_slots = slots;
  return w;
}

TEST(UnhealthyPlacementTest, AnUnhealthyWorkerTakesNoNewPlacementUntilCleared) {
  ClusterState cluster;
  cluster.UpsertWorker(CpuWorker("w1", 1));
  cluster.UpsertWorker(CpuWorker("w2", 1));
  cluster.UpsertWorker(CpuWorker("w3", 1));
  cluster.SetWorkerHealthy("w2", false);
  GangRequest two{2, 0, ""};
  PlacementDecision d = cluster.Place(two);
  ASSERT_EQ(d.kind, PlacementDecision::Kind::kPlaced);
  for (const auto& r : d.ranks) EXPECT_NE(r.worker_id, "w2");
  EXPECT_EQ(cluster.CpuTotals().total, 2);
  GangRequest three{3, 0, ""};
  EXPECT_NE(cluster.Place(three).kind, PlacementDecision::Kind::kPlaced);
  cluster.SetWorkerHealthy("w2", true);
  EXPECT_EQ(cluster.Place(three).kind, PlacementDecision::Kind::kPlaced);
  EXPECT_EQ(cluster.CpuTotals().total, 3);
}

TEST(UnhealthyPlacementTest, AWorkerOnProbationTakesOnlyGangsThatRunACheck) {
  ClusterState cluster;
  cluster.UpsertWorker(CpuWorker("w1", 2));
  cluster.UpsertWorker(CpuWorker("w2", 2));
  cluster.SetWorkerHealthy("w2", false);
  const GangRequest unchecked{4, 0, "", false};
  const GangRequest checked{4, 0, "", true};
  EXPECT_EQ(cluster.Place(checked).kind, PlacementDecision::Kind::kInfeasible)
      << "unhealthy and not on probation: nobody's";

  cluster.SetWorkerProbation("w2", true);
  PlacementDecision plain = cluster.Place(unchecked);
  EXPECT_EQ(plain.kind, PlacementDecision::Kind::kInfeasible);
  EXPECT_EQ(plain.reason, "needs 4 CPU slots, the cluster has 2");
  PlacementDecision d = cluster.Place(checked);
  ASSERT_EQ(d.kind, PlacementDecision::Kind::kPlaced) << d.reason;
  std::set<std::string> workers;
  for (const auto& r : d.ranks) workers.insert(r.worker_id);
  EXPECT_EQ(workers, (std::set<std::string>{"w1", "w2"}));
  EXPECT_EQ(cluster.CpuTotals().total, 2) << "probation capacity is no capacity in the totals";

  // Its used slots are its own: a second checked gang finds nothing free there.
  ASSERT_TRUE(cluster.Allocate(d.ranks).ok());
  EXPECT_EQ(cluster.Place({1, 0, "", true}).kind, PlacementDecision::Kind::kWait);
  cluster.Release(d.ranks);

  // Cleared (passed its check): a worker like any other.
  cluster.SetWorkerProbation("w2", false);
  cluster.SetWorkerHealthy("w2", true);
  EXPECT_EQ(cluster.Place(unchecked).kind, PlacementDecision::Kind::kPlaced);
  EXPECT_EQ(cluster.CpuTotals().total, 4);
  EXPECT_EQ(cluster.CpuTotals().allocated, 0);
}

}  // namespace
}  // namespace ringmaster::scheduler
