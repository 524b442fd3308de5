// The pure authorization rule (services/scheduler/core/authz.h) over every action and role, and
// the INTERNAL error ids of common/grpc_status.h.
#include "common/grpc_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/core/authz.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr Action kAll[] = {Action::kSubmitJob,   Action::kGetJob,      Action::kListJobs,
                           Action::kCancelJob,   Action::kWatchJob,    Action::kListWorkers,
                           Action::kGetQueue,    Action::kListQueues,  Action::kCreateQueue,
                           Action::kUpdateQueue, Action::kDeleteQueue, Action::kCreateToken,
                           Action::kListTokens,  Action::kRevokeToken, Action::kListAudit,
                           Action::kClearWorkerHealth, Action::kReadJobLogs};

bool IsRead(Action a) {
  return a == Action::kGetJob || a == Action::kListJobs || a == Action::kWatchJob ||
         a == Action::kListWorkers || a == Action::kGetQueue || a == Action::kListQueues;
}
// Reading a rank's log is granted as writing is: to members and admins, not to viewers.
bool IsWrite(Action a) {
  return a == Action::kSubmitJob || a == Action::kCancelJob || a == Action::kReadJobLogs;
}

TEST(AuthorizeTest, AdminsMayDoEverythingOnEveryTeam) {
  const Principal admin{"t1", "ops", Role::kAdmin};
  for (Action a : kAll) {
    EXPECT_TRUE(Authorize(admin, a, "vision").ok()) << ActionName(a);
    EXPECT_TRUE(Authorize(admin, a).ok()) << ActionName(a);
  }
}

TEST(AuthorizeTest, MembersReadAndWriteTheirTeamOnlyAndAdministerNothing) {
  const Principal member{"t2", "vision", Role::kMember};
  for (Action a : kAll) {
    absl::Status own = Authorize(member, a, "vision");
    if (IsRead(a) || IsWrite(a)) {
      EXPECT_TRUE(own.ok()) << ActionName(a) << ": " << own;
      absl::Status other = Authorize(member, a, "speech");
      EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied) << ActionName(a);
      EXPECT_THAT(other.message(), HasSubstr(RequiredRight(a)));
    } else {
      EXPECT_EQ(own.code(), absl::StatusCode::kPermissionDenied) << ActionName(a);
      EXPECT_THAT(own.message(), HasSubstr(RequiredRight(a)));
      EXPECT_THAT(own.message(), HasSubstr("needs role admin"));
    }
  }
}

TEST(AuthorizeTest, ViewersOnlyRead) {
  const Principal viewer{"t3", "vision", Role::kViewer};
  for (Action a : kAll) {
    absl::Status s = Authorize(viewer, a, "vision");
    EXPECT_EQ(s.ok(), IsRead(a)) << ActionName(a) << ": " << s;
    if (IsWrite(a)) {
      EXPECT_THAT(s.message(), HasSubstr("needs role member or admin"));
    }
  }
}

TEST(AuthorizeTest, RankLogsNeedTheirOwnRightWhichViewersLack) {
  EXPECT_STREQ(RequiredRight(Action::kReadJobLogs), "jobs.logs");
  absl::Status viewer = Authorize({"t3", "vision", Role::kViewer}, Action::kReadJobLogs, "vision");
  EXPECT_EQ(viewer.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(viewer.message(), HasSubstr("missing right jobs.logs for ReadJobLogs"));
  EXPECT_TRUE(Authorize({"t2", "vision", Role::kMember}, Action::kReadJobLogs, "vision").ok());
}

TEST(AuthorizeTest, TeamsAndQueues) {
  const Principal member{"t2", "vision", Role::kMember};
  EXPECT_TRUE(SeesTeam(member, "vision"));
  EXPECT_FALSE(SeesTeam(member, "speech"));
  EXPECT_FALSE(SeesTeam(member, ""));  // jobs from before tokens: admins only
  EXPECT_TRUE(SeesTeam({"a", "ops", Role::kAdmin}, "speech"));
  EXPECT_TRUE(MaySubmitToQueue(member, {}));
  EXPECT_TRUE(MaySubmitToQueue(member, {"speech", "vision"}));
  EXPECT_FALSE(MaySubmitToQueue(member, {"speech"}));
}

TEST(AuthorizeTest, RolesTeamNamesAndLifetimesAreParsedStrictly) {
  EXPECT_EQ(ParseRole("member"), Role::kMember);
  EXPECT_EQ(ParseRole("Member"), std::nullopt);
  EXPECT_TRUE(ValidateTeamName("team-a1", "team").ok());
  for (const char* bad : {"", "-a", "Team", "a b", "a_b"}) {
    absl::Status s = ValidateTeamName(bad, "team");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("team:"));
  }
  int64_t ms = 0;
  ASSERT_TRUE(ParseTokenLifetime("30d", "expires_in", &ms).ok());
  EXPECT_EQ(ms, int64_t{30} * 24 * 3600 * 1000);
  ASSERT_TRUE(ParseTokenLifetime("90m", "expires_in", &ms).ok());
  EXPECT_EQ(ms, 90 * 60 * 1000);
  for (const char* bad : {"", "30", "d", "0d", "-1h", "3651d", "1w", "1.5h"}) {
    absl::Status s = ParseTokenLifetime(bad, "expires_in", &ms);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("expires_in:"));
  }
}

TEST(GrpcStatusTest, InternalErrorsReachClientsAsAnIdWithoutTheirDetails) {
  for (absl::Status s : {absl::InternalError("ERROR: relation \"jobs\" at db.internal:5432"),
                         absl::UnknownError("pqxx: broken connection to 10.0.0.7"),
                         absl::DataLossError("job j-1: bad spec json")}) {
    grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(g.error_code(), grpc::StatusCode::INTERNAL);
    EXPECT_THAT(g.error_message(), MatchesRegex("internal error e-[0-9a-f]{12} .*"));
    EXPECT_THAT(g.error_message(), Not(HasSubstr("5432")));
    EXPECT_THAT(g.error_message(), Not(HasSubstr("10.0.0.7")));
    EXPECT_THAT(g.error_message(), Not(HasSubstr("json")));
  }
  EXPECT_NE(ToGrpcStatus(absl::InternalError("x")).error_message(),
            ToGrpcStatus(absl::InternalError("x")).error_message());
  grpc::Status invalid = ToGrpcStatus(absl::InvalidArgumentError("spec.replicas: must be > 0"));
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(invalid.error_message(), "spec.replicas: must be > 0");
}

}  // namespace
}  // namespace ringmaster::scheduler
