#include "worker/core/teardown.h"

#include <gtest/gtest.h>

#include <csignal>

namespace ringmaster::worker {
namespace {

using std::chrono::milliseconds;
using Step = TeardownStep;
constexpr milliseconds kGrace{2000};

Teardown::TimePoint At(int64_t ms) { return Teardown::TimePoint{} + milliseconds(ms); }

TEST(TeardownTest, WithoutACleanExitWaitSigtermGoesAtOnceAndSigkillAfterTheGrace) {
  Teardown t = StartTeardown(At(1000), milliseconds(0));
  Step step = NextTeardownStep(t, At(1000), kGrace);
  EXPECT_EQ(step.target, Step::Target::kAll);
  EXPECT_EQ(step.signal, SIGTERM);
  EXPECT_FALSE(step.after_clean_exit_wait);
  EXPECT_EQ(NextTeardownStep(t, At(2999), kGrace).signal, 0);
  EXPECT_EQ(NextTeardownStep(t, At(3000), kGrace).signal, SIGKILL);
  // Whatever is left keeps getting SIGKILL.
  EXPECT_EQ(NextTeardownStep(t, At(3200), kGrace).signal, SIGKILL);
}

TEST(TeardownTest, TheCleanExitWaitHoldsEverySignalBack) {
  Teardown t = StartTeardown(At(0), milliseconds(30'000));
  EXPECT_EQ(NextTeardownStep(t, At(0), kGrace).signal, 0);
  EXPECT_EQ(NextTeardownStep(t, At(29'999), kGrace).signal, 0);
  EXPECT_FALSE(t.term_sent);
  Step step = NextTeardownStep(t, At(30'000), kGrace);
  EXPECT_EQ(step.signal, SIGTERM);
  EXPECT_TRUE(step.after_clean_exit_wait);
  EXPECT_EQ(NextTeardownStep(t, At(31'999), kGrace).signal, 0);
  EXPECT_EQ(NextTeardownStep(t, At(32'000), kGrace).signal, SIGKILL);
}

TEST(TeardownTest, HasteningEndsTheCleanExitWaitButNeverDelaysASignal) {
  Teardown t = StartTeardown(At(0), milliseconds(30'000));
  HastenTeardown(t, At(500));
  EXPECT_EQ(NextTeardownStep(t, At(500), kGrace).signal, SIGTERM);
  HastenTeardown(t, At(900));  // later than signal_at: no change
  EXPECT_EQ(NextTeardownStep(t, At(2499), kGrace).signal, 0);
  EXPECT_EQ(NextTeardownStep(t, At(2500), kGrace).signal, SIGKILL);
}

TEST(TeardownTest, APreemptionsGraceTermsTheWorkloadsAloneFirst) {
  Teardown t = StartTeardown(At(0), milliseconds(0));
  t.workload_grace = milliseconds(10'000);
  Step first = NextTeardownStep(t, At(0), kGrace);
  EXPECT_EQ(first.target, Step::Target::kWorkloads);
  EXPECT_EQ(first.signal, SIGTERM);
  Step waiting = NextTeardownStep(t, At(9'999), kGrace);
  EXPECT_EQ(waiting.target, Step::Target::kWorkloads);
  EXPECT_EQ(waiting.signal, 0);
  EXPECT_FALSE(t.term_sent);
  // The grace ran out: the rest of the teardown in the same pass.
  Step rest = NextTeardownStep(t, At(10'000), kGrace);
  EXPECT_EQ(rest.target, Step::Target::kAll);
  EXPECT_EQ(rest.signal, SIGTERM);
  EXPECT_TRUE(t.workloads_done);
}

TEST(TeardownTest, WorkloadsGoneEarlyEndTheirGrace) {
  Teardown t = StartTeardown(At(0), milliseconds(0));
  t.workload_grace = milliseconds(10'000);
  EXPECT_EQ(NextTeardownStep(t, At(0), kGrace).target, Step::Target::kWorkloads);
  WorkloadsGone(t);
  Step step = NextTeardownStep(t, At(100), kGrace);
  EXPECT_EQ(step.target, Step::Target::kAll);
  EXPECT_EQ(step.signal, SIGTERM);
}

TEST(TeardownTest, APreemptionsGraceStartsAfterTheCleanExitWait) {
  Teardown t = StartTeardown(At(0), milliseconds(5'000));
  t.workload_grace = milliseconds(10'000);
  Step looking = NextTeardownStep(t, At(100), kGrace);
  EXPECT_EQ(looking.target, Step::Target::kAll);
  EXPECT_EQ(looking.signal, 0);
  EXPECT_EQ(NextTeardownStep(t, At(5'000), kGrace).target, Step::Target::kWorkloads);
}

TEST(TeardownTest, TheStrongestSignalSentNamesHowAnUnreportedRankDied) {
  Teardown t = StartTeardown(At(0), milliseconds(5'000));
  EXPECT_EQ(StrongestSignalSent(t), 0);
  t.workload_grace = milliseconds(10'000);
  (void)NextTeardownStep(t, At(5'000), kGrace);
  EXPECT_EQ(StrongestSignalSent(t), SIGTERM);  // the workloads' SIGTERM counts
  WorkloadsGone(t);
  (void)NextTeardownStep(t, At(5'100), kGrace);
  EXPECT_EQ(StrongestSignalSent(t), SIGTERM);
  (void)NextTeardownStep(t, At(7'100), kGrace);
  EXPECT_EQ(StrongestSignalSent(t), SIGKILL);
}

}  // namespace
}  // namespace ringmaster::worker
