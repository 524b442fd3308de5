#include "worker/core/progress.h"

#include <gtest/gtest.h>

namespace ringmaster::worker {
namespace {

RankProgress Entered(uint64_t n) {
  RankProgress p;
  p.collectives_entered = n;
  return p;
}

TEST(ProgressForwarderTest, ForwardsTheFirstReportOfEachRank) {
  ProgressForwarder f(500);
  EXPECT_TRUE(f.ShouldForward(0, Entered(1), 0));
  EXPECT_TRUE(f.ShouldForward(1, Entered(1), 0));
}

TEST(ProgressForwarderTest, DropsReportsThatChangedNothing) {
  ProgressForwarder f(500);
  EXPECT_TRUE(f.ShouldForward(0, Entered(1), 0));
  EXPECT_FALSE(f.ShouldForward(0, Entered(1), 10'000));
}

TEST(ProgressForwarderTest, ForwardsAChangeOnlyAfterTheMinimumInterval) {
  ProgressForwarder f(500);
  EXPECT_TRUE(f.ShouldForward(0, Entered(1), 1'000));
  EXPECT_FALSE(f.ShouldForward(0, Entered(2), 1'499));
  EXPECT_TRUE(f.ShouldForward(0, Entered(3), 1'500));
}

TEST(ProgressForwarderTest, ThroughputAloneIsAChange) {
  ProgressForwarder f(0);
  RankProgress p = Entered(1);
  EXPECT_TRUE(f.ShouldForward(0, p, 0));
  p.images_per_second = 12.5;
  EXPECT_TRUE(f.ShouldForward(0, p, 1));
}

}  // namespace
}  // namespace ringmaster::worker
