// ringmaster-sim's replay on a slice of the Philly trace: the policy's invariants hold.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/sim/baselines.h"
#include "scheduler/sim/replay.h"
#include "scheduler/sim/share_experiment.h"

namespace ringmaster::scheduler::sim {
namespace {

using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  return std::string(RINGMASTER_TESTDATA_DIR) + "/" + name;
}

struct Slice {
  std::vector<TraceJob> jobs;
  std::map<std::string, int32_t> vcs;
};

// The slice on a cluster `shrink` times smaller (each VC's nodes / shrink, at least 1; jobs
// larger than their VC are left out) with arrivals sped up `speedup` times, so queues contend.
Slice Load(double speedup, int shrink) {
  std::ifstream trace(TestData("philly_slice.csv")), vcs(TestData("helios_qssf_philly_vc.csv"));
  auto jobs = ParsePhillyCsv(trace);
  auto sizes = ParseVcSizes(vcs);
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_TRUE(sizes.ok()) << sizes.status();
  Slice s;
  for (auto& [vc, nodes] : *sizes) s.vcs[vc] = std::max(1, nodes / shrink);
  const int64_t t0 = jobs->front().submit_s;
  for (TraceJob j : *jobs) {
    if (j.gpus > s.vcs[j.vc] * 8) continue;
    j.submit_s = t0 + static_cast<int64_t>((j.submit_s - t0) / speedup);
    s.jobs.push_back(j);
  }
  return s;
}

constexpr double kSpeedup = 10;
constexpr int kShrink = 4;

// One replay of each policy (they take seconds): the invariants, and the point of sharing.
TEST(SimTest, FairShareKeepsItsPromisesUnderContentionAndBeatsFifoPerVc) {
  Slice s = Load(kSpeedup, kShrink);
  ASSERT_GT(s.jobs.size(), 2900u);
  SimOptions options;
  SimReport r = Replay(s.jobs, s.vcs, options);
  EXPECT_EQ(r.jobs, static_cast<int64_t>(s.jobs.size()));
  EXPECT_EQ(r.over_allocations, 0);
  EXPECT_EQ(r.partial_gangs, 0);
  EXPECT_GT(r.preemptions, 0) << "no queue ever reclaimed: the slice does not contend";
  // A job that fits its queue's unused nominal waits at most for its victims' grace period.
  EXPECT_LE(r.longest_refused_s, options.grace_s + 1);
  for (const auto& [vc, q] : r.queues) EXPECT_GT(q.nominal_gpus, 0) << vc;

  SimOptions fifo;
  fifo.sharing = false;
  fifo.policy.strict_fifo = true;
  fifo.policy.preemption = false;
  fifo.policy.backfill = false;
  SimReport base = Replay(s.jobs, s.vcs, fifo);
  EXPECT_EQ(base.jobs, r.jobs);
  EXPECT_EQ(base.over_allocations, 0);
  EXPECT_EQ(base.preemptions, 0);
  EXPECT_GT(base.avg_queue_s, 0);
  EXPECT_LT(r.avg_queue_s, base.avg_queue_s);
  std::printf(
      "slice: %lld jobs; avg queueing FIFO per VC %.0f s, fair share %.0f s; %lld "
      "preemptions; longest refused %lld s\n",
      static_cast<long long>(r.jobs), base.avg_queue_s, r.avg_queue_s,
      static_cast<long long>(r.preemptions), static_cast<long long>(r.longest_refused_s));
}

// Elastic jobs on the slice: the same arrivals as without (every queue gets the same jobs and
// asks the same work), every job ends, no gang is placed outside its range or over another.
TEST(SimTest, ElasticAndRigidReplaysSeeTheSameArrivals) {
  Slice s = Load(kSpeedup, kShrink);
  SimOptions rigid;
  SimOptions elastic;
  elastic.elastic = true;
  SimReport a = Replay(s.jobs, s.vcs, rigid);
  SimReport b = Replay(s.jobs, s.vcs, elastic);
  EXPECT_EQ(a.jobs, static_cast<int64_t>(s.jobs.size()));
  EXPECT_EQ(b.jobs, a.jobs);
  ASSERT_EQ(a.queues.size(), b.queues.size());
  for (const auto& [vc, q] : a.queues) {
    EXPECT_EQ(b.queues[vc].jobs, q.jobs) << vc;
    EXPECT_EQ(b.queues[vc].demand_gpu_seconds, q.demand_gpu_seconds) << vc;
  }
  EXPECT_EQ(a.elastic_jobs, 0);
  EXPECT_EQ(a.resizes, 0);
  int64_t multi_gpu = 0;
  for (const TraceJob& j : s.jobs) multi_gpu += j.gpus >= 2;
  EXPECT_EQ(b.elastic_jobs, multi_gpu);
  EXPECT_GT(b.resizes, 0) << "no elastic job was ever resized on the slice";
  EXPECT_GT(b.resize_lost_gpu_seconds, 0);
  EXPECT_EQ(b.over_allocations, 0);
  EXPECT_EQ(b.partial_gangs, 0);
  std::printf(
      "slice: avg JCT %.0f s rigid, %.0f s elastic; %lld resizes of %lld elastic jobs; longest "
      "refused %lld s, %lld s\n",
      a.avg_jct_s, b.avg_jct_s, static_cast<long long>(b.resizes),
      static_cast<long long>(b.elastic_jobs), static_cast<long long>(a.longest_refused_s),
      static_cast<long long>(b.longest_refused_s));
}

TEST(SimTest, ElasticShapeRunsFromHalfToDoubleInWholeRanks) {
  int32_t replicas = 0, per = 0;
  ElasticShape(8, 8, &replicas, &per);
  EXPECT_EQ(replicas, 2);
  EXPECT_EQ(per, 4);
  ElasticShape(2, 8, &replicas, &per);
  EXPECT_EQ(replicas, 2);
  EXPECT_EQ(per, 1);
  ElasticShape(32, 8, &replicas, &per);
  EXPECT_EQ(replicas, 4);
  EXPECT_EQ(per, 8);
  ElasticShape(24, 8, &replicas, &per);
  EXPECT_EQ(replicas, 4);
  EXPECT_EQ(per, 6);
  // The families scale below linear, VGG-like the least of the published ones.
  for (int f = 0; f < kModelFamilies; ++f) {
    EXPECT_DOUBLE_EQ(FamilyThroughput(f, 1), 1.0) << FamilyName(f);
    EXPECT_LT(FamilyThroughput(f, 64), 64.0) << FamilyName(f);
  }
  EXPECT_NEAR(FamilyThroughput(0, 512) / 512, 0.90, 1e-9);
  EXPECT_NEAR(FamilyThroughput(1, 512) / 512, 0.68, 1e-9);
  EXPECT_NEAR(FamilyThroughput(2, 4) / 4, 0.894, 1e-9);
}

// The research baselines on the same slice: every job ends, nothing is over-allocated, SRTF
// preempts and loses work to it, pooling helps it, and 2D-LAS demotes (and so preempts) jobs.
TEST(SimTest, BaselinesFinishEveryJobAndPoolingHelpsSrtf) {
  Slice s = Load(kSpeedup, kShrink);
  BaselineOptions o;
  SimReport vc = ReplayBaseline(s.jobs, s.vcs, o);
  o.pooled = true;
  SimReport pooled = ReplayBaseline(s.jobs, s.vcs, o);
  o.policy = Baseline::kLas;
  SimReport las = ReplayBaseline(s.jobs, s.vcs, o);
  for (const SimReport* r : {&vc, &pooled, &las}) {
    EXPECT_EQ(r->jobs, static_cast<int64_t>(s.jobs.size()));
    EXPECT_EQ(r->over_allocations, 0);
    EXPECT_GT(r->preemptions, 0);
    EXPECT_GT(r->lost_gpu_seconds, 0);
    EXPECT_GT(r->utilisation, 0);
    EXPECT_LE(r->utilisation, 1.0);
    int64_t preempted = 0;
    for (const auto& [name, q] : r->queues) preempted += q.preempted;
    EXPECT_EQ(preempted, r->preemptions);
  }
  EXPECT_LT(pooled.avg_queue_s, vc.avg_queue_s);
  std::printf("slice: avg queueing SRTF per VC %.0f s, pooled %.0f s, 2D-LAS pooled %.0f s\n",
              vc.avg_queue_s, pooled.avg_queue_s, las.avg_queue_s);
}

// With a checkpoint every second a preemption loses nothing; with none, it loses everything the
// preempted run did.
TEST(SimTest, LostWorkFollowsTheCheckpointInterval) {
  Slice s = Load(kSpeedup, kShrink);
  BaselineOptions o;
  o.checkpoint_interval_s = 1;
  SimReport often = ReplayBaseline(s.jobs, s.vcs, o);
  o.checkpoint_interval_s = 0;
  SimReport never = ReplayBaseline(s.jobs, s.vcs, o);
  EXPECT_EQ(often.lost_gpu_seconds, 0);
  EXPECT_GT(never.lost_gpu_seconds, 0);
  EXPECT_GT(never.avg_jct_s, often.avg_jct_s);
}

TEST(SimTest, TraceErrorsNameTheLineAndColumn) {
  std::istringstream bad_gpus(
      "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,60,0,0,vc\n");
  auto r = ParsePhillyCsv(bad_gpus);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("line 2: num_gpus"));
  std::istringstream bad_time(
      "timestamp,duration,num_gpus,gpu_time,cluster\n2017-13-01 00:00:00,60,1,60,vc\n");
  EXPECT_THAT(ParsePhillyCsv(bad_time).status().message(), HasSubstr("line 2: timestamp"));
  std::istringstream bad_header("a,b\n");
  EXPECT_THAT(ParsePhillyCsv(bad_header).status().message(), HasSubstr("line 1"));
}

// FGD's experiment on a slice of the openb trace: what is left only shrinks as tasks arrive,
// and while nothing failed, no more is left than what has not been asked for.
TEST(ShareExperimentTest, EveryPolicySeesTheSameArrivalsAndCountsWhatIsLeft) {
  auto nodes = ReadOpenbNodes(TestData("openb_nodes_slice.csv"));
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  auto tasks = ReadOpenbTasks(TestData("openb_pods_slice.csv"));
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(nodes->size(), 12u);
  ASSERT_EQ(tasks->size(), 203u);
  ShareExperimentOptions options;
  options.loads = {0.05, 0.5, 1.0, 1.5};
  options.seeds = 2;
  const std::vector<SharePolicy> policies = {SharePolicy::kRandom, SharePolicy::kBestFit,
                                             SharePolicy::kFgd, SharePolicy::kRingmaster};
  std::vector<ShareCurve> curves = RunShareExperiment(*nodes, *tasks, policies, options);
  ASSERT_EQ(curves.size(), 4u);
  // The same arrivals: where nothing failed yet, every policy has allocated the same.
  std::vector<double> placed_all;
  for (const ShareCurve& c : curves) {
    if (c.failed[0] == 0) placed_all.push_back(c.unallocated[0]);
  }
  ASSERT_GE(placed_all.size(), 2u) << "at 5% of demand, most policies place every task";
  for (double u : placed_all) EXPECT_DOUBLE_EQ(u, placed_all[0]);
  for (const ShareCurve& c : curves) {
    SCOPED_TRACE(SharePolicyName(c.policy));
    ASSERT_EQ(c.unallocated.size(), 4u);
    for (size_t l = 0; l < 4; ++l) {
      // What arrived and was placed is allocated: never more than the capacity, never less
      // than what arrived minus what failed.
      EXPECT_GE(c.unallocated[l], 0.0);
      EXPECT_LE(c.unallocated[l], 1.0);
      if (l > 0) {
        EXPECT_LE(c.unallocated[l], c.unallocated[l - 1] + 1e-9);
      }
    }
    if (c.failed[0] == 0) {
      EXPECT_LE(c.unallocated[0], 0.95 + 1e-9) << "5% arrived, all of it placed";
    }
  }
}

TEST(ShareExperimentTest, ABadRowIsRefusedNamingTheFile) {
  const std::string path = testing::TempDir() + "/bad_nodes.csv";
  std::ofstream(path) << "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,two,T4\n";
  auto nodes = ReadOpenbNodes(path);
  EXPECT_EQ(nodes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(nodes.status().message(), HasSubstr("bad_nodes.csv"));
  EXPECT_EQ(ReadOpenbNodes(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ringmaster::scheduler::sim
