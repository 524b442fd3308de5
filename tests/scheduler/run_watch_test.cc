#include "scheduler/core/run_watch.h"

#include <gtest/gtest.h>

#include <string>

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

// `a` with its wrapper's MPI position.
RankActivity InMpi(RankActivity a, bool inside, const std::string& call, int64_t for_ms,
                   uint64_t calls_entered) {
  a.mpi =
      MpiPosition{.inside = inside, .call = call, .for_ms = for_ms, .calls_entered = calls_entered};
  return a;
}

constexpr WatchLimits kFiveSeconds{5'000, 0};
constexpr WatchLimits kTwentySeconds{20'000, 0};

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

// The case: rank 1 sleeps after the first allreduce; rank 0 waits on it in the
// point-to-point calls of mpi4py's object allreduce, ranks 2 and 3 in the next collective. The
// collective counts alone named ranks 0 and 1.
TEST(RunWatchTest, NamesTheRankOutsideMpiWhileTheOthersWaitInside) {
  RunWatch watch(4, 0);
  watch.OnReport(0, InMpi(Collectives(2, 2), true, "MPI_Recv", 0, 7), 1'000);
  watch.OnReport(1, InMpi(Collectives(2, 2), false, "MPI_Allreduce", 0, 6), 1'000);
  watch.OnReport(2, InMpi(Collectives(3, 2), true, "MPI_Allreduce", 0, 5), 1'000);
  watch.OnReport(3, InMpi(Collectives(3, 2), true, "MPI_Allreduce", 500, 5), 1'500);
  EXPECT_EQ(watch.Judge(kTwentySeconds, 20'999).kind, WatchVerdict::Kind::kFine);
  WatchVerdict v = watch.Judge(kTwentySeconds, 22'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, std::vector<int32_t>{1});
  EXPECT_EQ(v.reason,
            "hung: no collective or MPI call completed and no progress reported for 20 s "
            "(progress_timeout_seconds 20); waiting for rank 1 (not in MPI: left MPI_Allreduce "
            "21 s ago); waiting in MPI: rank 0 in MPI_Recv for 21 s, ranks 2,3 in MPI_Allreduce "
            "for 21 s");
}

TEST(RunWatchTest, WithoutMpiPositionsTheCollectiveCountsDecideAsBefore) {
  RunWatch watch(4, 0);
  for (int32_t r = 0; r < 4; ++r) watch.OnReport(r, Collectives(r < 2 ? 2 : 3, 2), 1'000);
  WatchVerdict v = watch.Judge(kTwentySeconds, 22'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_NE(v.reason.find("waiting for ranks 0,1 (entered 2 collectives; the others entered up "
                          "to 3)"),
            std::string::npos)
      << v.reason;
  EXPECT_EQ(v.reason.find("in MPI"), std::string::npos) << v.reason;
}

TEST(RunWatchTest, APositionMissingFromOneRankLeavesTheCountsToDecideButSaysWhereOthersWait) {
  RunWatch watch(3, 0);
  watch.OnReport(0, InMpi(Collectives(2, 1), true, "MPI_Barrier", 0, 2), 1'000);
  watch.OnReport(1, Collectives(1, 1), 1'000);  // an older wrapper: no position
  watch.OnReport(2, InMpi(Collectives(2, 1), true, "MPI_Barrier", 0, 2), 1'000);
  WatchVerdict v = watch.Judge(kFiveSeconds, 6'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, std::vector<int32_t>{1});
  EXPECT_NE(v.reason.find("waiting for rank 1 (entered 1 collectives; the others entered up to "
                          "2); waiting in MPI: ranks 0,2 in MPI_Barrier for 5 s"),
            std::string::npos)
      << v.reason;
}

TEST(RunWatchTest, RanksAllBlockedInMpiAreNamedWithTheCallsTheyWaitIn) {
  // A receive cycle: every rank waits in MPI_Recv for another; nobody is out of MPI.
  RunWatch watch(2, 0);
  watch.OnReport(0, InMpi(Collectives(1, 1), true, "MPI_Recv", 0, 3), 1'000);
  watch.OnReport(1, InMpi(Collectives(1, 1), true, "MPI_Recv", 1'000, 3), 1'000);
  WatchVerdict v = watch.Judge(kFiveSeconds, 6'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_NE(v.reason.find("waiting in MPI: ranks 0,1 in MPI_Recv for 5-6 s"), std::string::npos)
      << v.reason;
}

TEST(RunWatchTest, RanksOutOfMpiForDifferentCallsAreEachNamed) {
  RunWatch watch(4, 0);
  watch.OnReport(0, InMpi(Collectives(1, 1), true, "MPI_Recv", 0, 2), 1'000);
  watch.OnReport(1, InMpi(Collectives(1, 1), false, "MPI_Allreduce", 0, 1), 1'000);
  watch.OnReport(2, InMpi(Collectives(1, 1), true, "MPI_Recv", 0, 2), 1'000);
  watch.OnReport(3, InMpi(RankActivity{}, false, "", 0, 0), 1'000);
  WatchVerdict v = watch.Judge(kFiveSeconds, 7'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, (std::vector<int32_t>{1, 3}));
  EXPECT_NE(v.reason.find("waiting for ranks 1,3 (not in MPI: rank 1 left MPI_Allreduce 6 s ago, "
                          "rank 3 no blocking MPI call yet)"),
            std::string::npos)
      << v.reason;
}

TEST(RunWatchTest, AStoppedProgramIsNamedBeforeRanksOutOfMpi) {
  RunWatch watch(2, 0);
  RankActivity stopped = InMpi(Collectives(1, 1), false, "MPI_Allreduce", 0, 1);
  stopped.stopped = true;
  watch.OnReport(0, InMpi(Collectives(2, 1), true, "MPI_Allreduce", 0, 2), 1'000);
  watch.OnReport(1, stopped, 1'000);
  WatchVerdict v = watch.Judge(kFiveSeconds, 6'000);
  ASSERT_EQ(v.kind, WatchVerdict::Kind::kHung);
  EXPECT_EQ(v.stalled_ranks, std::vector<int32_t>{1});
  EXPECT_NE(v.reason.find("waiting for rank 1 (its program is stopped: SIGSTOP or a debugger); "
                          "waiting in MPI: rank 0 in MPI_Allreduce for 5 s"),
            std::string::npos)
      << v.reason;
}

// A program that talks only point to point (after one collective, or none at all) advances
// with every blocking call it enters, though no collective completes.
TEST(RunWatchTest, BlockingPointToPointCallsShowLifeAndKeepTheJobAlive) {
  RunWatch watch(2, 0);
  for (int64_t t = 1'000; t <= 60'000; t += 1'000) {
    const uint64_t calls = static_cast<uint64_t>(t / 10);
    watch.OnReport(0, InMpi(RankActivity{}, true, "MPI_Send", 0, calls), t);
    watch.OnReport(1, InMpi(RankActivity{}, false, "MPI_Recv", 0, calls), t);
    EXPECT_TRUE(watch.showed_life());
    EXPECT_EQ(watch.Judge(kFiveSeconds, t + 4'000).kind, WatchVerdict::Kind::kFine);
  }
  EXPECT_EQ(watch.Judge(kFiveSeconds, 65'000).kind, WatchVerdict::Kind::kHung);
}

TEST(RunWatchTest, ReportsOfRanksOutsideTheWorldAreIgnored) {
  RunWatch watch(2, 0);
  watch.OnReport(7, Collectives(5, 5), 1'000);
  watch.OnReport(-1, Collectives(5, 5), 1'000);
  EXPECT_FALSE(watch.showed_life());
}

}  // namespace
}  // namespace ringmaster::scheduler
