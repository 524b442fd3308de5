// ringmaster-sim's replay on a slice of the Philly trace: the policy's invariants hold.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/replay.h"

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

}  // namespace
}  // namespace ringmaster::scheduler::sim
