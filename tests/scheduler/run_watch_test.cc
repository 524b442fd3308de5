#include "core/run_watch.h"

#include <gtest/gtest.h>

namespace ringmaster::scheduler {
namespace {

RankActivity Collectives(uint64_t entered, uint64_t completed) {
  RankActivity a;
  a.collectives_entered = entered;
  a.collectives_completed = completed;
  return a;
}

RankActivity Progress(uint64_t reports, double images_per_second) {
  RankActivity a;
  a.step = reports;
  a.progress_reports = reports;
  a.images_per_second = images_per_second;
  return a;
}

constexpr WatchLimits kFiveSeconds{5'000, 0};

TEST(RunWatchTest, JobWithoutAnySignOfLifeIsNeverJudgedHung) {
  RunWatch watch(2, 0);
  watch.OnReport(0, RankActivity{}, 100);
  EXPECT_FALSE(watch.showed_life());
  EXPECT_EQ(watch.Judge(kFiveSeconds, 3'600'000).kind, WatchVerdict::Kind::kFine);
}

TEST(RunWatchTest, NamesTheRankThatNeverJoinedTheAllreduce) {
  RunWatch watch(3, 0);
  for (int32_t r = 0; r < 3; ++r) watch.OnReport(r, Collectives(1, 1), 1'000);
  // Ranks 0 and 2 enter a second allreduce; rank 1 never does.
  watch.OnReport(0, Collectives(2, 1), 2'000);
  watch.OnReport(2, Collectives(2, 1), 2'000);
  EXPECT_EQ(watch.Judge(kFiveSeconds, 5'999).kind, WatchVerdict::Kind::kFine);
  WatchVerdict v = watch.Judge(kFiveSeconds, 6'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, std::vector<int32_t>{1});
  EXPECT_NE(v.reason.find("waiting for rank 1 (entered 1 collectives"), std::string::npos)
      << v.reason;
}

TEST(RunWatchTest, CompletedCollectivesKeepTheJobAlive) {
  RunWatch watch(2, 0);
  for (int64_t t = 1'000; t <= 60'000; t += 1'000) {
    const uint64_t n = static_cast<uint64_t>(t / 1'000);
    watch.OnReport(0, Collectives(n, n), t);
    watch.OnReport(1, Collectives(n, n), t);
    EXPECT_EQ(watch.Judge(kFiveSeconds, t + 4'000).kind, WatchVerdict::Kind::kFine);
  }
}

TEST(RunWatchTest, EnteringWithoutCompletingIsNotProgress) {
  RunWatch watch(2, 0);
  watch.OnReport(0, Collectives(1, 0), 1'000);
  watch.OnReport(1, Collectives(1, 0), 1'000);
  // Both stuck inside the same collective: neither is more to blame.
  WatchVerdict v = watch.Judge(kFiveSeconds, 6'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, (std::vector<int32_t>{0, 1}));
}

TEST(RunWatchTest, NamesTheRankThatStoppedReportingProgressFirst) {
  RunWatch watch(3, 0);
  for (uint64_t i = 1; i <= 3; ++i) {
    for (int32_t r = 0; r < 3; ++r) {
      if (r == 2 && i == 3) continue;  // rank 2 stops after its second report
      watch.OnReport(r, Progress(i, 10), static_cast<int64_t>(i) * 1'000);
    }
  }
  WatchVerdict v = watch.Judge(kFiveSeconds, 8'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, std::vector<int32_t>{2});
  EXPECT_NE(v.reason.find("stopped reporting progress first"), std::string::npos) << v.reason;
}

TEST(RunWatchTest, StoppedRankIsNamedEvenWhenCountsAreEqual) {
  RunWatch watch(2, 0);
  RankActivity stopped = Collectives(4, 3);
  stopped.stopped = true;
  watch.OnReport(0, Collectives(4, 3), 1'000);
  watch.OnReport(1, stopped, 1'200);
  WatchVerdict v = watch.Judge(kFiveSeconds, 6'200);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, std::vector<int32_t>{1});
  EXPECT_NE(v.reason.find("waiting for rank 1 (its program is stopped"), std::string::npos)
      << v.reason;
}

TEST(RunWatchTest, RankThatNeverReportedIsTheOneWaitedFor) {
  RunWatch watch(2, 0);
  watch.OnReport(0, Collectives(1, 0), 1'000);
  WatchVerdict v = watch.Judge(kFiveSeconds, 6'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, std::vector<int32_t>{1});
}

TEST(RunWatchTest, ZeroTimeoutTurnsHangDetectionOff) {
  RunWatch watch(2, 0);
  watch.OnReport(0, Collectives(1, 0), 1'000);
  EXPECT_EQ(watch.Judge(WatchLimits{0, 0}, 10'000'000).kind, WatchVerdict::Kind::kFine);
}

TEST(RunWatchTest, IdleAfterTimeoutWithoutNonZeroThroughput) {
  RunWatch watch(1, 1'000);
  const WatchLimits limits{0, 30'000};
  watch.OnReport(0, Progress(1, 0), 2'000);
  EXPECT_EQ(watch.Judge(limits, 30'999).kind, WatchVerdict::Kind::kFine);
  WatchVerdict v = watch.Judge(limits, 31'000);
  EXPECT_EQ(v.kind, WatchVerdict::Kind::kIdle);
  EXPECT_NE(v.reason.find("idle: no non-zero images/sec for 30 s"), std::string::npos) << v.reason;
}

TEST(RunWatchTest, NonZeroThroughputRestartsTheIdleClock) {
  RunWatch watch(1, 0);
  const WatchLimits limits{0, 30'000};
  watch.OnReport(0, Progress(1, 250.0), 20'000);
  EXPECT_EQ(watch.Judge(limits, 49'999).kind, WatchVerdict::Kind::kFine);
  EXPECT_EQ(watch.Judge(limits, 50'000).kind, WatchVerdict::Kind::kIdle);
}

TEST(RunWatchTest, ReportsOfRanksOutsideTheWorldAreIgnored) {
  RunWatch watch(2, 0);
  watch.OnReport(7, Collectives(5, 5), 1'000);
  watch.OnReport(-1, Collectives(5, 5), 1'000);
  EXPECT_FALSE(watch.showed_life());
}

}  // namespace
}  // namespace ringmaster::scheduler
