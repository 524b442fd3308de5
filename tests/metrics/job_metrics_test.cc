#include "metrics/core/job_metrics.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace ringmaster::metrics {
namespace {

SampleIn Sample(int rank, double ips, int world = 2) {
  SampleIn s;
  s.job_id = "j-00aa";
  s.rank = rank;
  s.world_size = world;
  s.queue = "default";
  s.model = "mlp";
  s.gpu_type = "t4";
  s.worker_id = "w1";
  s.step = 10;
  s.step_seconds = 0.02;
  s.samples_per_second = ips;
  s.loss = 1.5;
  return s;
}

TEST(JobMetricsTest, JobThroughputIsTheSumOfItsRanksLatest) {
  JobMetrics m(Limits{});
  EXPECT_EQ(m.Add(Sample(0, 100), 0), DropReason::kNone);
  EXPECT_EQ(m.Add(Sample(1, 120), 0), DropReason::kNone);
  EXPECT_EQ(m.Add(Sample(0, 110), 1), DropReason::kNone);
  auto jobs = m.Snapshot();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(jobs[0].samples_per_second, 230);
  EXPECT_EQ(jobs[0].ranks.size(), 2u);
  EXPECT_EQ(jobs[0].step_count, 3u);
  EXPECT_DOUBLE_EQ(jobs[0].loss, 1.5);
  EXPECT_EQ(m.accepted(), 3u);
}

TEST(JobMetricsTest, StepTimeBucketsAreCumulative) {
  JobMetrics m(Limits{});
  SampleIn s = Sample(0, 1);
  s.step_seconds = 0.03;  // above 0.025, within 0.05
  m.Add(s, 0);
  auto v = m.Snapshot()[0];
  EXPECT_EQ(v.step_buckets[4], 0u);  // le 0.025
  EXPECT_EQ(v.step_buckets[5], 1u);  // le 0.05
  EXPECT_EQ(v.step_buckets.back(), 1u);
}

TEST(JobMetricsTest, BusBandwidthFollowsNcclTests) {
  JobMetrics m(Limits{});
  SampleIn s = Sample(0, 1, 4);
  s.allreduce_bytes = 1e9;
  s.allreduce_seconds = 0.5;
  m.Add(s, 0);
  EXPECT_DOUBLE_EQ(m.Snapshot()[0].bus_bandwidth, 2e9 * 2 * 3 / 4);
}

TEST(JobMetricsTest, ScalingEfficiencyUsesDeclaredOrLearnedBaseline) {
  JobMetrics m(Limits{});
  m.Add(Sample(0, 90), 0);
  m.Add(Sample(1, 90), 0);
  EXPECT_LT(m.Snapshot()[0].scaling_efficiency, 0);  // no baseline yet
  SampleIn single = Sample(0, 100, 1);
  single.job_id = "j-00bb";
  m.Add(single, 0);
  auto jobs = m.Snapshot();  // sorted by job id
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_DOUBLE_EQ(jobs[0].scaling_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(jobs[1].scaling_efficiency, 1.0);
  EXPECT_TRUE(m.DeclareBaseline("mlp", "t4", 120));
  EXPECT_DOUBLE_EQ(m.Snapshot()[0].scaling_efficiency, 0.75);
  EXPECT_FALSE(m.DeclareBaseline("mlp", "t4", std::nan("")));
  EXPECT_FALSE(m.DeclareBaseline("", "t4", 1));
}

TEST(JobMetricsTest, DropsMalformedAndAbsurdSamples) {
  JobMetrics m(Limits{});
  auto with = [](auto mutate) {
    SampleIn s = Sample(0, 1);
    mutate(s);
    return s;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(m.Add(with([](SampleIn& s) { s.job_id = "x"; }), 0), DropReason::kBadId);
  // A task of an array is "<array id>-<index>"; nothing else with a dash is a job id.
  for (const char* bad :
       {"j-00aa-", "j-00aa-017", "j-00aa-1x", "j--1", "j-00aa-123456", "j-00aa-1-2"}) {
    EXPECT_EQ(m.Add(with([&](SampleIn& s) { s.job_id = bad; }), 0), DropReason::kBadId) << bad;
  }
  JobMetrics tasks(Limits{});
  EXPECT_EQ(tasks.Add(with([](SampleIn& s) { s.job_id = "j-00aa-17"; }), 0), DropReason::kNone);
  const std::string huge(1 << 20, 'a');  // outlives the sample, which only points at it
  EXPECT_EQ(m.Add(with([&](SampleIn& s) { s.queue = huge; }), 0), DropReason::kBadLabel);
  EXPECT_EQ(m.Add(with([](SampleIn& s) { s.model = "Bad\"Label"; }), 0), DropReason::kBadLabel);
  EXPECT_EQ(m.Add(with([&](SampleIn& s) { s.samples_per_second = nan; }), 0),
            DropReason::kBadNumber);
  EXPECT_EQ(m.Add(with([&](SampleIn& s) { s.step_seconds = inf; }), 0), DropReason::kBadNumber);
  EXPECT_EQ(m.Add(with([](SampleIn& s) { s.samples_per_second = -5; }), 0),
            DropReason::kBadNumber);
  EXPECT_EQ(m.Add(with([](SampleIn& s) { s.samples_per_second = 1e12; }), 0),
            DropReason::kBadNumber);
  EXPECT_EQ(m.Add(with([](SampleIn& s) { s.rank = 2; }), 0), DropReason::kBadNumber);
  EXPECT_EQ(m.Add(with([&](SampleIn& s) { s.loss = nan; }), 0), DropReason::kBadNumber);
  EXPECT_EQ(m.jobs(), 0u);
  EXPECT_EQ(m.dropped(DropReason::kBadNumber), 6u);
}

TEST(JobMetricsTest, ANewAttemptReplacesTheOldRanksAndStaleOnesAreDropped) {
  JobMetrics m(Limits{});
  m.Add(Sample(0, 100), 0);
  m.Add(Sample(1, 100), 0);
  SampleIn next = Sample(0, 50);
  next.attempt = 1;
  EXPECT_EQ(m.Add(next, 1), DropReason::kNone);
  EXPECT_DOUBLE_EQ(m.Snapshot()[0].samples_per_second, 50);
  EXPECT_EQ(m.ranks(), 1u);
  EXPECT_EQ(m.Add(Sample(1, 100), 2), DropReason::kStaleAttempt);
}

TEST(JobMetricsTest, SeriesExpireAfterTtlAndCapsRefuseTheRest) {
  JobMetrics m(Limits{1000, 2, 3});
  SampleIn a = Sample(0, 1, 4);
  m.Add(a, 0);
  SampleIn b = a;
  b.job_id = "j-00bb";
  m.Add(b, 500);
  SampleIn c = a;
  c.job_id = "j-00cc";
  EXPECT_EQ(m.Add(c, 500), DropReason::kTooManyJobs);
  SampleIn more = b;
  more.rank = 1;
  EXPECT_EQ(m.Add(more, 500), DropReason::kNone);
  more.rank = 2;
  EXPECT_EQ(m.Add(more, 500), DropReason::kTooManyRanks);
  m.Expire(1200);  // a is 1200 ms old, b 700 ms
  EXPECT_EQ(m.jobs(), 1u);
  EXPECT_EQ(m.ranks(), 2u);
  EXPECT_EQ(m.Add(c, 1200), DropReason::kNone);
}

}  // namespace
}  // namespace ringmaster::metrics
