// The launcher's side of the pre-run check: parsing ringmaster-check's result, choosing the
// culprit, the verdict. Pure functions, no I/O.
#include "worker/core/health_check.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

using ::testing::HasSubstr;

constexpr const char* kBalanced =
    "transport cpu\nbusbw_gbps 1.500000\nelapsed_seconds 0.100000\nwrong 0\n"
    "rank 0 w2 0.050000\nrank 1 w2 0.052000\nrank 2 w3 0.048000\nrank 3 w3 0.051000\n";

// w4's ranks come late to every allreduce: they wait almost nothing, the others wait for them.
constexpr const char* kStraggler =
    "transport cpu\nbusbw_gbps 0.100000\nelapsed_seconds 0.900000\nwrong 0\n"
    "rank 0 w2 0.800000\nrank 1 w4 0.010000\n";

TEST(CheckResultTest, ParsesEveryField) {
  absl::StatusOr<CheckReport> r = ParseCheckResult(kBalanced);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->completed);
  EXPECT_DOUBLE_EQ(r->busbw_gbps, 1.5);
  EXPECT_DOUBLE_EQ(r->seconds, 0.1);
  EXPECT_EQ(r->transport, "cpu");
  ASSERT_EQ(r->ranks.size(), 4u);
  EXPECT_EQ(r->ranks[2].worker_id, "w3");
  EXPECT_DOUBLE_EQ(r->ranks[2].wait_seconds, 0.048);
}

TEST(CheckResultTest, MalformedLineIsInvalidArgumentNamingTheLine) {
  absl::StatusOr<CheckReport> r = ParseCheckResult("transport cpu\nbusbw_gbps fast\n");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("line 2"));
}

TEST(CheckResultTest, RanksOutOfOrderAreRejected) {
  EXPECT_EQ(ParseCheckResult("busbw_gbps 1\nwrong 0\nrank 1 w2 0.1\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The in-session check's result is written by the job's own processes: a worker id that is
// not valid UTF-8 would break the worker's stream to the scheduler (protobuf strings).
TEST(CheckResultTest, AWorkerIdThatIsNotUtf8OrTooLongIsRejected) {
  absl::StatusOr<CheckReport> bad = ParseCheckResult("busbw_gbps 1\nwrong 0\nrank 0 w\xff 0.1\n");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("line 3"));
  const std::string long_id(129, 'w');
  EXPECT_EQ(ParseCheckResult("busbw_gbps 1\nwrong 0\nrank 0 " + long_id + " 0.1\n").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseCheckResult("busbw_gbps 1\nwrong 0\nrank 0 w\xc3\xa9 0.1\n").ok());
}

TEST(CheckResultTest, MissingFieldsAreRejected) {
  EXPECT_EQ(ParseCheckResult("transport cpu\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckResultTest, WrongSumsMakeAnIncompleteCheck) {
  absl::StatusOr<CheckReport> r =
      ParseCheckResult("busbw_gbps 1\nwrong 3\nrank 0 w2 0.1\nrank 1 w3 0.1\n");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->completed);
  EXPECT_THAT(r->message, HasSubstr("3 wrong elements"));
}

TEST(CulpritTest, TheWorkerThatWaitsLeastIsTheStraggler) {
  CheckReport r = *ParseCheckResult(kStraggler);
  EXPECT_EQ(ChooseCulprit(r, CheckPolicy{}), "w4");
}

TEST(CulpritTest, BalancedWaitsNameNoOne) {
  EXPECT_EQ(ChooseCulprit(*ParseCheckResult(kBalanced), CheckPolicy{}), "");
}

TEST(CulpritTest, OneWorkerCannotBeToldFromItsRing) {
  CheckReport r = *ParseCheckResult("busbw_gbps 1\nwrong 0\nrank 0 w2 0.8\nrank 1 w2 0.01\n");
  EXPECT_EQ(ChooseCulprit(r, CheckPolicy{}), "");
}

TEST(CulpritTest, MeansPerWorkerDecideNotSingleRanks) {
  // w3 has one fast and one slow rank: its mean is not far below w2's.
  CheckReport r = *ParseCheckResult(
      "busbw_gbps 1\nwrong 0\nrank 0 w2 0.5\nrank 1 w2 0.5\nrank 2 w3 0.01\nrank 3 w3 0.5\n");
  EXPECT_EQ(ChooseCulprit(r, CheckPolicy{}), "");
}

TEST(VerdictTest, BalancedRingAtBaselinePasses) {
  CheckReport r = *ParseCheckResult(kBalanced);
  JudgeCheck(r, CheckPolicy{.baseline_gbps = 1.6, .min_ratio = 0.5});
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.culprit_worker_id, "");
  EXPECT_EQ(r.message, "");
}

TEST(VerdictTest, FirstCheckWithoutBaselinePassesWhenBalanced) {
  CheckReport r = *ParseCheckResult(kBalanced);
  JudgeCheck(r, CheckPolicy{});
  EXPECT_TRUE(r.passed);
}

TEST(VerdictTest, FarBelowBaselineFailsNamingTheStraggler) {
  CheckReport r = *ParseCheckResult(kStraggler);
  JudgeCheck(r, CheckPolicy{.baseline_gbps = 1.0, .min_ratio = 0.5});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.culprit_worker_id, "w4");
  EXPECT_THAT(r.message, HasSubstr("below 50% of the baseline 1.000 GB/s"));
  EXPECT_THAT(r.message, HasSubstr("worker w4 was the last"));
}

TEST(VerdictTest, StragglerThatIdlesTheRingFailsWithoutABaseline) {
  CheckReport r = *ParseCheckResult(kStraggler);
  JudgeCheck(r, CheckPolicy{});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.culprit_worker_id, "w4");
  EXPECT_THAT(r.message, HasSubstr("waited 89% of the check for worker w4"));
}

TEST(VerdictTest, BelowBaselineWithoutStragglerFailsWithNoCulprit) {
  CheckReport r = *ParseCheckResult(kBalanced);
  JudgeCheck(r, CheckPolicy{.baseline_gbps = 10, .min_ratio = 0.5});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.culprit_worker_id, "");
}

TEST(VerdictTest, IncompleteCheckFailsWithNoCulprit) {
  CheckReport r;
  r.completed = false;
  JudgeCheck(r, CheckPolicy{});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.culprit_worker_id, "");
  EXPECT_THAT(r.message, HasSubstr("did not complete"));
}

}  // namespace
}  // namespace ringmaster::worker
