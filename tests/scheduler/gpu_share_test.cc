// Shares of one GPU (JobSpec.gpu_share) in placement, the quota ledger and validation.
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/core/placement.h"
#include "scheduler/core/quota_ledger.h"
#include "scheduler/core/validation.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::HasSubstr;
using Kind = PlacementDecision::Kind;

constexpr int64_t kGiB = int64_t{1} << 30;

Worker MakeWorker(const std::string& id, int gpus, int64_t memory = 16 * kGiB) {
  Worker w;
  w.id = id;
  w.address = "10.0.0.1";
  w.port = 7071;
  for (int i = 0; i < gpus; ++i) w.gpus.push_back(Gpu{i, "t4", memory, true});
  return w;
}

GangRequest Share(int32_t thousandths, int64_t memory = 0, int32_t replicas = 1) {
  GangRequest r{replicas, 1, "t4"};
  r.gpu_share = thousandths;
  r.gpu_memory = memory;
  return r;
}

// Places and allocates; the decision's ranks.
std::vector<RankPlacement> Take(ClusterState& cluster, const GangRequest& request) {
  PlacementDecision d = cluster.Place(request);
  EXPECT_EQ(d.kind, Kind::kPlaced) << d.reason;
  EXPECT_TRUE(cluster.Allocate(d.ranks).ok());
  return d.ranks;
}

TEST(GpuShareTest, SixteenQuarterSharesFillFourDevicesAndTheNextWaits) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 2));
  cluster.UpsertWorker(MakeWorker("w2", 2));
  std::map<std::pair<std::string, int32_t>, int> per_device;
  for (int i = 0; i < 16; ++i) {
    auto ranks = Take(cluster, Share(250));
    ASSERT_EQ(ranks.size(), 1u);
    EXPECT_EQ(ranks[0].gpu_share, 250);
    ASSERT_EQ(ranks[0].gpu_indices.size(), 1u);
    ++per_device[{ranks[0].worker_id, ranks[0].gpu_indices[0]}];
  }
  EXPECT_EQ(per_device.size(), 4u);
  for (const auto& [device, n] : per_device) EXPECT_EQ(n, 4);
  PlacementDecision next = cluster.Place(Share(250));
  EXPECT_EQ(next.kind, Kind::kWait);
  EXPECT_THAT(next.reason, HasSubstr("needs 1 x 0.25 of a t4"));
  EXPECT_EQ(cluster.GpuTotals()["t4"].allocated, 4);
  EXPECT_EQ(cluster.ShareTotalsByType()["t4"].devices, 4);
  EXPECT_EQ(cluster.ShareTotalsByType()["t4"].held, 4000);
}

TEST(GpuShareTest, SharesPackOntoSharedDevicesAndKeepFreeOnesWhole) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 4));
  auto a = Take(cluster, Share(250));
  auto b = Take(cluster, Share(500));
  EXPECT_EQ(a[0].gpu_indices, b[0].gpu_indices);  // the fullest device that still fits
  auto c = Take(cluster, Share(500));             // 0.75 held: does not fit there
  EXPECT_NE(c[0].gpu_indices, a[0].gpu_indices);
  // Whole ranks take only devices no share holds: 2 of 4 are left.
  EXPECT_EQ(cluster.Place({1, 3, "t4"}).kind, Kind::kWait);
  auto whole = Take(cluster, {1, 2, "t4"});
  for (int32_t g : whole[0].gpu_indices) {
    EXPECT_NE(g, a[0].gpu_indices[0]);
    EXPECT_NE(g, c[0].gpu_indices[0]);
  }
  // ... and no share goes onto a device a whole rank holds: the 0.25 left on a's device only.
  auto d = Take(cluster, Share(250));
  EXPECT_EQ(d[0].gpu_indices, a[0].gpu_indices);
  EXPECT_EQ(cluster.Place(Share(600)).kind, Kind::kWait);
}

TEST(GpuShareTest, AWholeRankWaitsForADeviceWithNoSharesThenTakesIt) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 2));
  auto a = Take(cluster, Share(100));
  auto b = Take(cluster, Share(100));
  auto c = Take(cluster, {1, 1, "t4"});  // the other device
  EXPECT_EQ(cluster.Place({1, 1, "t4"}).kind, Kind::kWait);
  cluster.Release(a);
  EXPECT_EQ(cluster.Place({1, 1, "t4"}).kind, Kind::kWait);  // b still holds 0.1 of it
  cluster.Release(b);
  auto d = Take(cluster, {1, 1, "t4"});
  EXPECT_EQ(d[0].gpu_indices, a[0].gpu_indices);
  EXPECT_EQ(cluster.GpuTotals()["t4"].allocated, 2);
}

TEST(GpuShareTest, MemoryIsPromisedPerDeviceAndBoundsWhatFits) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 2));
  auto a = Take(cluster, Share(250, 10 * kGiB));
  auto b = Take(cluster, Share(250, 10 * kGiB));  // 20 GiB would not fit a's 16 GiB device
  EXPECT_NE(a[0].gpu_indices, b[0].gpu_indices);
  auto c = Take(cluster, Share(250, 6 * kGiB));  // fits beside either
  EXPECT_EQ(cluster.Place(Share(250, 7 * kGiB)).kind, Kind::kWait);
  PlacementDecision big = cluster.Place(Share(250, 17 * kGiB));
  EXPECT_EQ(big.kind, Kind::kInfeasible);
  EXPECT_THAT(big.reason, HasSubstr("the largest t4 has 17179869184 bytes of memory"));
  const auto uses = cluster.GpuUses("w1");
  ASSERT_EQ(uses.size(), 2u);
  int64_t promised = 0;
  for (const auto& u : uses) {
    EXPECT_FALSE(u.whole);
    promised += u.memory;
  }
  EXPECT_EQ(promised, 26 * kGiB);
  // A worker re-registering keeps what its devices hold.
  cluster.UpsertWorker(MakeWorker("w1", 2));
  EXPECT_EQ(cluster.GpuUses("w1").size(), 2u);
  EXPECT_EQ(cluster.Place(Share(250, 7 * kGiB)).kind, Kind::kWait);
  cluster.Release(c);
  EXPECT_EQ(cluster.Place(Share(250, 6 * kGiB)).kind, Kind::kPlaced);
}

TEST(GpuShareTest, AGangOfSharesIsPlacedWholeOrNotAtAll) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 1));
  PlacementDecision d = cluster.Place(Share(300, 0, 3));
  ASSERT_EQ(d.kind, Kind::kPlaced);  // three ranks of 0.3 on the one device
  EXPECT_EQ(d.ranks.size(), 3u);
  EXPECT_EQ(cluster.Place(Share(300, 0, 4)).kind, Kind::kInfeasible);  // 1.2 of one device
  ASSERT_TRUE(cluster.Allocate(d.ranks).ok());
  EXPECT_EQ(cluster.Place(Share(200, 0, 1)).kind, Kind::kWait);
  EXPECT_EQ(cluster.Place(Share(100, 0, 1)).kind, Kind::kPlaced);
  // Allocate refuses more than a device holds, and changes nothing then.
  RankPlacement extra = d.ranks[0];
  extra.gpu_share = 200;
  EXPECT_EQ(cluster.Allocate({extra}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cluster.GpuUses("w1")[0].share, 900);
}

TEST(GpuShareTest, TheLedgerCountsSharesAgainstQuotasInWholeGpus) {
  Queue a;
  a.name = "a";
  a.quotas["t4"] = ResourceQuota{4, std::nullopt, std::nullopt};
  QuotaLedger ledger({{"a", a}});
  JobSpec quarter;
  quarter.replicas = 1;
  quarter.gpus_per_replica = 1;
  quarter.gpu_share = 250;
  EXPECT_EQ(UnitsPerRank(quarter), 250);
  for (int i = 0; i < 16; ++i) {
    const Demand d{"t4", UnitsPerRank(quarter)};
    ASSERT_EQ(ledger.CanAdmit("a", d).fit, Fit::kWithinNominal) << i;
    ledger.Add("a", d);
  }
  QuotaLedger::Check no = ledger.CanAdmit("a", {"t4", 250});
  EXPECT_EQ(no.fit, Fit::kNo);
  EXPECT_THAT(no.reason, HasSubstr("queue a: needs 0.25 x t4, nominal 4, in use 4"));
  JobSpec whole = quarter;
  whole.gpu_share = 0;
  whole.gpus_per_replica = 2;
  EXPECT_EQ(UnitsPerRank(whole), 2000);
  EXPECT_EQ(DescribeUnits("t4", 2750), "2.75 x t4");
  EXPECT_EQ(DescribeUnits("cpu", 3), "3 CPU slots");
}

GangRequest TeamShare(const std::string& team, int32_t thousandths = 250) {
  GangRequest r = Share(thousandths);
  r.team = team;
  return r;
}

Worker OneTeamWorker(const std::string& id, int gpus) {
  Worker w = MakeWorker(id, gpus);
  w.shares_one_team = true;
  return w;
}

TEST(GpuShareTest, AWorkerOfOneTeamAtATimeTakesAnotherTeamsShareOnlyOnceTheFirstsHaveEnded) {
  RecentDemand demand;
  JobSpec quarter;
  quarter.gpus_per_replica = 1;
  quarter.gpu_share = 250;
  demand.Add(ShareTaskOf(quarter), 10);
  const auto mix = std::make_shared<const TaskMix>(demand.Mix());
  for (SharePolicy policy :
       {SharePolicy::kGpuPacking, SharePolicy::kFgd, SharePolicy::kRingmaster}) {
    SCOPED_TRACE(SharePolicyName(policy));
    ClusterState cluster;
    cluster.SetSharePolicy(policy, mix);
    cluster.UpsertWorker(OneTeamWorker("w1", 2));
    auto a1 = Take(cluster, TeamShare("a"));
    EXPECT_EQ(a1[0].team, "a");
    auto a2 = Take(cluster, TeamShare("a"));
    EXPECT_EQ(a2[0].worker_id, "w1");
    // Room for six more quarters, but not for team b's while team a's run.
    PlacementDecision b = cluster.Place(TeamShare("b"));
    EXPECT_EQ(b.kind, Kind::kWait);
    EXPECT_THAT(b.reason, HasSubstr("hold one team's shares at a time"));
    EXPECT_FALSE(cluster.Fits(TeamShare("b")));
    // Re-registering keeps whose shares the worker holds.
    cluster.UpsertWorker(OneTeamWorker("w1", 2));
    EXPECT_EQ(cluster.Place(TeamShare("b")).kind, Kind::kWait);
    cluster.Release(a1);
    EXPECT_EQ(cluster.Place(TeamShare("b")).kind, Kind::kWait);  // a2 still runs
    cluster.Release(a2);
    EXPECT_EQ(Take(cluster, TeamShare("b"))[0].worker_id, "w1");
    EXPECT_EQ(cluster.Place(TeamShare("a")).kind, Kind::kWait);
  }
}

TEST(GpuShareTest, AnotherTeamsShareGoesToAWorkerWithoutShares) {
  ClusterState cluster;
  cluster.UpsertWorker(OneTeamWorker("w1", 2));
  cluster.UpsertWorker(OneTeamWorker("w2", 2));
  auto a = Take(cluster, TeamShare("a"));
  // Packing would fill a's device; it goes to the worker that holds no other team's shares.
  auto b = Take(cluster, TeamShare("b"));
  EXPECT_NE(b[0].worker_id, a[0].worker_id);
  // Whole-GPU ranks of any team still take the free devices beside a team's shares.
  EXPECT_EQ(Take(cluster, {1, 1, "t4"}).size(), 1u);
}

TEST(GpuShareTest, OtherWorkersShareDevicesAcrossTeams) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 2));
  auto a = Take(cluster, TeamShare("a"));
  auto b = Take(cluster, TeamShare("b"));
  EXPECT_EQ(b[0].gpu_indices, a[0].gpu_indices);
}

TEST(GpuShareTest, AJobsRequestCarriesItsTeamForSharesOnly) {
  Job job;
  job.team = "vision";
  job.spec.replicas = 2;
  job.spec.gpus_per_replica = 1;
  EXPECT_EQ(RequestOf(job).team, "");
  job.spec.gpu_share = 500;
  EXPECT_EQ(RequestOf(job).team, "vision");
  EXPECT_EQ(RequestOf(job.spec).team, "");
}

// Two devices, one with 0.4 held and one with 0.3; the recent demand is half-GPU ranks. A 0.2
// share: packing fills the fuller device (0.6 held, 0.4 left: no room for a half), FGD and
// Ringmaster's the other (0.5 held, 0.5 left), so two halves still fit after it.
ClusterState TwoPartlySharedDevices(SharePolicy policy) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 1));
  cluster.UpsertWorker(MakeWorker("w2", 1));
  EXPECT_TRUE(cluster.Allocate({RankPlacement{0, "w1", "10.0.0.1", {0}, 7071, 400}}).ok());
  EXPECT_TRUE(cluster.Allocate({RankPlacement{0, "w2", "10.0.0.1", {0}, 7071, 300}}).ok());
  RecentDemand demand;
  demand.Add(ShareTaskOf([] {
               JobSpec spec;
               spec.gpus_per_replica = 1;
               spec.gpu_share = 500;
               return spec;
             }()),
             10);
  cluster.SetSharePolicy(policy, std::make_shared<const TaskMix>(demand.Mix()));
  return cluster;
}

TEST(GpuShareTest, FgdAndRingmasterLeaveRoomForTheDemandWherePackingDoesNot) {
  for (SharePolicy policy : {SharePolicy::kFgd, SharePolicy::kRingmaster}) {
    SCOPED_TRACE(SharePolicyName(policy));
    ClusterState cluster = TwoPartlySharedDevices(policy);
    auto small = Take(cluster, Share(200));
    EXPECT_EQ(small[0].worker_id, "w2");
    Take(cluster, Share(500));
    Take(cluster, Share(500));
    EXPECT_EQ(cluster.Place(Share(200)).kind, Kind::kWait);  // 0.1 left, on w1's device
  }
  ClusterState packed = TwoPartlySharedDevices(SharePolicy::kGpuPacking);
  auto small = Take(packed, Share(200));
  EXPECT_EQ(small[0].worker_id, "w1");
  Take(packed, Share(500));
  EXPECT_EQ(packed.Place(Share(500)).kind, Kind::kWait);  // 0.4 and 0.2 left apart
}

TEST(GpuShareTest, WithoutAMixEveryPolicyPacks) {
  ClusterState cluster = TwoPartlySharedDevices(SharePolicy::kRingmaster);
  cluster.SetSharePolicy(SharePolicy::kRingmaster, std::make_shared<const TaskMix>());
  EXPECT_EQ(Take(cluster, Share(200))[0].worker_id, "w1");
}

TEST(GpuShareTest, FgdChoosesAmongDevicesWithTheMemoryARankAsks) {
  ClusterState cluster = TwoPartlySharedDevices(SharePolicy::kFgd);
  // w2's device has 0.7 free but only 4 GiB of memory left to promise: the rank goes to w1.
  ASSERT_TRUE(
      cluster.Allocate({RankPlacement{0, "w2", "10.0.0.1", {0}, 7071, 100, 12 * kGiB}}).ok());
  auto ranks = Take(cluster, Share(200, 8 * kGiB));
  EXPECT_EQ(ranks[0].worker_id, "w1");
  // A gang of two such ranks: only w1's device has the memory, and only for one.
  EXPECT_EQ(cluster.Place(Share(100, 5 * kGiB, 2)).kind, Kind::kWait);
}

TEST(GpuShareTest, RingmasterTriesTheLeastPressuredTypeFirstForAnyTypeShares) {
  ClusterState cluster;
  cluster.UpsertWorker(MakeWorker("w1", 2));  // t4
  Worker v100 = MakeWorker("w2", 2);
  for (Gpu& g : v100.gpus) g.type = "v100";
  cluster.UpsertWorker(v100);
  // Recent demand: whole t4 ranks, which only t4s can run.
  RecentDemand demand;
  JobSpec t4_only;
  t4_only.gpus_per_replica = 1;
  t4_only.gpu_type = "t4";
  demand.Add(ShareTaskOf(t4_only), 10);
  GangRequest any{1, 1, ""};
  any.gpu_share = 250;
  // By name t4 comes first; Ringmaster's leaves the t4s to the demand that needs them.
  cluster.SetSharePolicy(SharePolicy::kFgd, std::make_shared<const TaskMix>(demand.Mix()));
  EXPECT_EQ(cluster.Place(any).ranks.at(0).worker_id, "w1");
  cluster.SetSharePolicy(SharePolicy::kRingmaster, std::make_shared<const TaskMix>(demand.Mix()));
  EXPECT_EQ(cluster.Place(any).ranks.at(0).worker_id, "w2");
}

JobSpec Valid() {
  JobSpec spec;
  spec.name = "eval";
  spec.replicas = 1;
  spec.gpus_per_replica = 1;
  spec.command = CommandWorkload{{"true"}, {}};
  return spec;
}

TEST(GpuShareTest, BadSharesAreRefusedNamingTheField) {
  JobSpec spec = Valid();
  spec.gpu_share = 250;
  spec.gpu_memory = 10 * kGiB;
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  auto refused = [](JobSpec s, const std::string& field) {
    absl::StatusOr<JobSpec> v = ValidateJobSpec(s);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(field));
  };
  spec.gpu_share = -1;
  refused(spec, "gpu_share: must be 1..1000, got -1");
  spec.gpu_share = 1001;
  refused(spec, "gpu_share: must be 1..1000, got 1001");
  spec.gpu_share = 250;
  spec.gpus_per_replica = 2;
  refused(spec, "gpu_share: needs gpus_per_replica 1");
  spec.gpus_per_replica = 1;
  spec.gpu_memory = 1000;
  refused(spec, "gpu_memory: must be 1048576..1099511627776");
  spec.gpu_memory = 10 * kGiB;
  spec.gpu_share = 0;
  refused(spec, "gpu_memory: is only allowed with gpu_share");
  // Above every device of the type the cluster has: refused at submit.
  spec.gpu_share = 250;
  spec.gpu_memory = 17 * kGiB;
  spec.gpu_type = "t4";
  const Worker w1 = MakeWorker("w1", 2);
  absl::Status s = CheckGpuMemoryFits(spec, {&w1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("gpu_memory: must be at most 17179869184 bytes, the memory of the "
                        "largest t4 in the cluster"));
  EXPECT_TRUE(CheckGpuMemoryFits(spec, {}).ok());  // no such GPUs yet: it waits
  spec.gpu_memory = 16 * kGiB;
  EXPECT_TRUE(CheckGpuMemoryFits(spec, {&w1}).ok());
}

}  // namespace
}  // namespace ringmaster::scheduler
