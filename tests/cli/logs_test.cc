// ringctl logs against a fake scheduler: what it asks the scheduler (JobService.ReadJobLogs; no
// worker is dialled any more) and how the scheduler's answers become output and exit codes.
#include "logs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "app.h"
#include "args.h"
#include "fake_scheduler.h"

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;

class LogsTest : public ::testing::Test {
 protected:
  // Every read gets the log a test scripted and ends OK unless the test says otherwise.
  LogsTest() { scheduler_.log_end = absl::OkStatus(); }

  // Runs the real command line through RunCli with the fake.
  int Run(const std::vector<std::string>& args) {
    Runtime runtime;
    runtime.getenv = [](const char*) -> const char* { return nullptr; };
    runtime.now_ms = [] { return int64_t{0}; };
    runtime.sleep = [](std::chrono::milliseconds) {};
    runtime.new_request_id = [] { return std::string("id"); };
    runtime.connect = [this](const std::string&, std::shared_ptr<grpc::ChannelCredentials>,
                             const std::string&) -> std::unique_ptr<SchedulerClient> {
      return std::make_unique<ForwardingClient>(&scheduler_);
    };
    out_.str("");
    err_.str("");
    return RunCli(args, runtime, out_, err_);
  }

  FakeScheduler scheduler_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(LogsTest, PrintsTheLogTheSchedulerRelays) {
  scheduler_.log_pieces = {"rank 2 on w3\n", "total images/sec: 812.4\n"};
  EXPECT_EQ(Run({"logs", "j-1", "--rank", "2"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "rank 2 on w3\ntotal images/sec: 812.4\n");
  ASSERT_EQ(scheduler_.log_reads.size(), 1u);
  const v1::ReadJobLogsRequest& req = scheduler_.log_reads[0];
  EXPECT_EQ(req.job_id(), "j-1");
  EXPECT_EQ(req.rank(), 2);
  EXPECT_FALSE(req.has_attempt());  // the scheduler resolves the current one
  EXPECT_FALSE(req.follow());
}

TEST_F(LogsTest, RankZeroByDefaultAndFollowWithDashF) {
  scheduler_.log_pieces = {"hello\n"};
  EXPECT_EQ(Run({"logs", "j-1", "-f"}), 0) << err_.str();
  ASSERT_EQ(scheduler_.log_reads.size(), 1u);
  EXPECT_EQ(scheduler_.log_reads[0].rank(), 0);
  EXPECT_TRUE(scheduler_.log_reads[0].follow());
  EXPECT_EQ(Run({"logs", "--follow", "j-1"}), 0) << err_.str();
  EXPECT_TRUE(scheduler_.log_reads[1].follow());
}

TEST_F(LogsTest, AnEarlierAttemptIsAskedFor) {
  scheduler_.log_pieces = {"attempt 0 output\n"};
  EXPECT_EQ(Run({"logs", "j-1", "--attempt", "0"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "attempt 0 output\n");
  ASSERT_TRUE(scheduler_.log_reads.back().has_attempt());
  EXPECT_EQ(scheduler_.log_reads.back().attempt(), 0);
}

TEST_F(LogsTest, NoLogAnywhereIsNotFound) {
  scheduler_.log_end = absl::NotFoundError("no worker has a log of job j-1 rank 0 attempt 1");
  EXPECT_EQ(Run({"logs", "j-1"}), kExitNotFound);
  EXPECT_EQ(err_.str(), "ringctl: no worker has a log of job j-1 rank 0 attempt 1\n");
}

TEST_F(LogsTest, ARankOutsideTheJobIsAUsageErrorNamingTheFlag) {
  scheduler_.log_end = absl::InvalidArgumentError("rank: job j-1 has 4 ranks (0..3), got 4");
  EXPECT_EQ(Run({"logs", "j-1", "--rank", "4"}), kExitUsage);
  EXPECT_EQ(err_.str(), "ringctl: --rank: job j-1 has 4 ranks (0..3), got 4\n");
  scheduler_.log_end = absl::InvalidArgumentError("attempt: job j-1 has attempts 0..1, got 5");
  EXPECT_EQ(Run({"logs", "j-1", "--attempt", "5"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--attempt: job j-1 has attempts 0..1"));
}

TEST_F(LogsTest, AnUnknownJobIsNotFound) {
  scheduler_.log_end = absl::NotFoundError("no job j-2");
  EXPECT_EQ(Run({"logs", "j-2"}), kExitNotFound);
  EXPECT_EQ(err_.str(), "ringctl: job j-2 not found\n");
}

TEST_F(LogsTest, AWorkerThatFailsMidStreamFailsTheCommand) {
  scheduler_.log_pieces = {"partial\n"};
  scheduler_.log_end = absl::UnavailableError(
      "reading the log of job j-1 rank 0 attempt 1 from worker w2 at 127.0.0.2:7071: "
      "connection reset");
  EXPECT_EQ(Run({"logs", "j-1"}), kExitUnreachable);
  EXPECT_EQ(out_.str(), "partial\n");
  EXPECT_THAT(err_.str(), HasSubstr("from worker w2 at 127.0.0.2:7071: connection reset"));
}

TEST_F(LogsTest, AnUnreachableSchedulerSaysSo) {
  scheduler_.log_end = absl::UnavailableError("failed to connect to all addresses");
  EXPECT_EQ(Run({"logs", "j-1", "--scheduler", "h:1"}), kExitUnreachable);
  EXPECT_EQ(err_.str(), "ringctl: scheduler unreachable at h:1: failed to connect to all addresses\n");
}

TEST_F(LogsTest, AMissingRightIsReported) {
  scheduler_.log_end = absl::PermissionDeniedError("missing right jobs.logs for ReadJobLogs");
  EXPECT_EQ(Run({"logs", "j-1"}), kExitError);
  EXPECT_THAT(err_.str(), HasSubstr("missing right jobs.logs"));
}

TEST(LogsArgsTest, ParsesRankAttemptAndFollowAndKeepsSubmitsDashF) {
  auto getenv = [](const char*) -> const char* { return nullptr; };
  absl::StatusOr<Command> cmd =
      ParseArgs({"logs", "j-1", "--rank", "2", "--attempt=1", "-f"}, getenv);
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(cmd->verb, Verb::kLogs);
  EXPECT_EQ(cmd->job_id, "j-1");
  EXPECT_EQ(cmd->rank, 2);
  EXPECT_EQ(cmd->attempt, 1);
  EXPECT_TRUE(cmd->follow);
  absl::StatusOr<Command> submit = ParseArgs({"submit", "-f", "job.yaml"}, getenv);
  ASSERT_TRUE(submit.ok()) << submit.status();
  EXPECT_EQ(submit->spec_file, "job.yaml");
  EXPECT_FALSE(ParseArgs({"logs"}, getenv).ok());
  EXPECT_FALSE(ParseArgs({"logs", "j-1", "--rank", "-1"}, getenv).ok());
  EXPECT_FALSE(ParseArgs({"get", "j-1", "-f"}, getenv).ok());
  EXPECT_FALSE(ParseArgs({"logs", "j-1", "--follow=yes"}, getenv).ok());
  EXPECT_THAT(Usage(Verb::kLogs), HasSubstr("logs ID [--index I] [--rank R] [--attempt N] [-f]"));
}

}  // namespace
}  // namespace ringmaster::cli
