#include "worker/core/assignment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/core/auth.h"

namespace ringmaster::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Assignment Placed(const std::string& job_id, int32_t attempt,
                  const std::vector<std::string>& worker_of_rank) {
  Assignment a;
  a.job_id = job_id;
  a.attempt = attempt;
  for (size_t r = 0; r < worker_of_rank.size(); ++r) {
    a.placement.push_back(RankPlacement{static_cast<int32_t>(r),
                                        worker_of_rank[r],
                                        "10.0.0." + worker_of_rank[r].substr(1),
                                        7071,
                                        {}});
  }
  return a;
}

TEST(AssignmentPlanTest, TheWorkerHoldingRankZeroIsTheLauncher) {
  const Assignment a = Placed("j", 0, {"w1", "w1", "w2"});
  AssignmentPlan here = PlanAssignment(a, "w1", {});
  EXPECT_THAT(here.local_ranks, ElementsAre(0, 1));
  EXPECT_TRUE(here.launcher);
  AssignmentPlan peer = PlanAssignment(a, "w2", {});
  EXPECT_THAT(peer.local_ranks, ElementsAre(2));
  EXPECT_FALSE(peer.launcher);
}

TEST(AssignmentPlanTest, AnAssignmentPlacingNothingHereHasNoLocalRanks) {
  AssignmentPlan plan = PlanAssignment(Placed("j", 0, {"w1"}), "w9", {});
  EXPECT_THAT(plan.local_ranks, IsEmpty());
  EXPECT_FALSE(plan.launcher);
}

TEST(AssignmentPlanTest, ARepeatChangesNothing) {
  AssignmentPlan plan =
      PlanAssignment(Placed("j", 1, {"w1"}), "w1", {{"j", 0, false}, {"j", 1, false}});
  EXPECT_TRUE(plan.repeat);
  EXPECT_THAT(plan.superseded, IsEmpty());
}

TEST(AssignmentPlanTest, ANewAttemptSupersedesTheJobsOtherLiveAttemptsOnly) {
  AssignmentPlan plan = PlanAssignment(Placed("j", 2, {"w1"}), "w1",
                                       {{"j", 0, true}, {"j", 1, false}, {"other", 1, false}});
  EXPECT_FALSE(plan.repeat);
  EXPECT_THAT(plan.superseded, ElementsAre(1));
}

TEST(AssignmentPlanTest, SupersedingIsDecidedEvenWhenNothingIsPlacedHere) {
  AssignmentPlan plan = PlanAssignment(Placed("j", 2, {"w2"}), "w1", {{"j", 1, false}});
  EXPECT_THAT(plan.local_ranks, IsEmpty());
  EXPECT_THAT(plan.superseded, ElementsAre(1));
}

TEST(UserOfAttemptTest, WithoutTeamUsersEveryAttemptRunsAsTheWorker) {
  absl::StatusOr<std::optional<int>> user = UserOfAttempt<int>({}, std::nullopt, "a", "w1");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_FALSE(user->has_value());
}

TEST(UserOfAttemptTest, ATeamsOwnEntryWinsOverTheDefault) {
  const std::map<std::string, int> teams = {{"a", 1001}};
  EXPECT_EQ(**UserOfAttempt<int>(teams, 2000, "a", "w1"), 1001);
  EXPECT_EQ(**UserOfAttempt<int>(teams, 2000, "b", "w1"), 2000);
  EXPECT_EQ(**UserOfAttempt<int>({}, 2000, "b", "w1"), 2000);
}

TEST(UserOfAttemptTest, ATeamWithNeitherEntryNorDefaultIsNotFoundNamingIt) {
  absl::StatusOr<std::optional<int>> user =
      UserOfAttempt<int>({{"a", 1001}}, std::nullopt, "b", "w1");
  EXPECT_EQ(user.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(user.status().message(), HasSubstr("'b'"));
}

TEST(TokenRoleTest, TheJobsTokenIsTheJobs) {
  EXPECT_EQ(RoleOfToken("job", "job", "check", false), TokenRole::kJob);
  EXPECT_EQ(RoleOfToken("job", "job", "check", true), TokenRole::kJob);
}

TEST(TokenRoleTest, TheChecksTokenIsTakenOnlyUntilTheCheckIsOver) {
  EXPECT_EQ(RoleOfToken("check", "job", "check", false), TokenRole::kCheck);
  EXPECT_EQ(RoleOfToken("check", "job", "check", true), TokenRole::kNone);
}

TEST(TokenRoleTest, AnEmptyTokenIsNeverTaken) {
  EXPECT_EQ(RoleOfToken("", "job", "", false), TokenRole::kNone);
  EXPECT_EQ(RoleOfToken("", "", "", false), TokenRole::kNone);
}

TEST(TokenRoleTest, AWrongTokenIsNeither) {
  EXPECT_EQ(RoleOfToken("jo", "job", "check", false), TokenRole::kNone);
  EXPECT_EQ(RoleOfToken("checkx", "job", "check", false), TokenRole::kNone);
}

}  // namespace
}  // namespace ringmaster::worker
