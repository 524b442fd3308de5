#include "app.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "fake_scheduler.h"

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::JobEvent Event(int64_t seq, v1::JobState state, const std::string& reason = "") {
  v1::JobEvent event;
  event.set_job_id("j-1");
  event.set_seq(seq);
  event.set_state(state);
  event.set_reason(reason);
  return event;
}

v1::SubmitJobResponse Submitted(const std::string& id) {
  v1::SubmitJobResponse response;
  response.mutable_job()->set_id(id);
  return response;
}

class AppTest : public ::testing::Test {
 protected:
  AppTest() {
    runtime_.getenv = [](const char*) -> const char* { return nullptr; };
    runtime_.now_ms = [] { return int64_t{1714564800000}; };
    runtime_.sleep = [this](std::chrono::milliseconds d) { sleeps_.push_back(d); };
    runtime_.new_request_id = [] { return std::string("generated-id"); };
    runtime_.connect = [this](const std::string& address, std::shared_ptr<grpc::ChannelCredentials>,
                              const std::string&) -> std::unique_ptr<SchedulerClient> {
      connected_to_ = address;
      return std::make_unique<ForwardingClient>(&fake_);
    };
  }

  int Run(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return RunCli(args, runtime_, out_, err_);
  }

  FakeScheduler fake_;
  Runtime runtime_;
  std::vector<std::chrono::milliseconds> sleeps_;
  std::string connected_to_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(AppTest, SubmitPrintsTheJobIdAndSendsTheGeneratedRequestId) {
  fake_.submit_results.push_back(Submitted("j-42"));
  EXPECT_EQ(Run({"submit", "--name", "smoke", "--replicas", "2"}), kExitOk);
  EXPECT_EQ(out_.str(), "j-42\n");
  EXPECT_EQ(err_.str(), "");
  ASSERT_EQ(fake_.submits.size(), 1u);
  EXPECT_EQ(fake_.submits[0].request_id(), "generated-id");
  EXPECT_EQ(fake_.submits[0].spec().name(), "smoke");
  EXPECT_EQ(fake_.submits[0].spec().replicas(), 2);
  EXPECT_TRUE(fake_.submits[0].spec().has_trainer());
  EXPECT_EQ(connected_to_, "localhost:7070");
}

// The quickstart's hint `ringctl submit --replicas 2 ... --follow` has no --name; the scheduler
// requires one, so ringctl gives a plain one.
TEST_F(AppTest, SubmitWithoutANameGivesTheJobOne) {
  fake_.submit_results.push_back(Submitted("j-1"));
  fake_.submit_results.push_back(Submitted("j-2"));
  EXPECT_EQ(Run({"submit", "--replicas", "2"}), kExitOk);
  EXPECT_EQ(Run({"submit", "--replicas", "2", "--", "/usr/bin/Python3.11", "x.py"}), kExitOk);
  ASSERT_EQ(fake_.submits.size(), 2u);
  EXPECT_EQ(fake_.submits[0].spec().name(), "train");
  EXPECT_EQ(fake_.submits[1].spec().name(), "python3-11");
}

// `ringctl submit --wait -- true` once went out with replicas 0 and came back "replicas: must
// be 1..4096, got 0": from flags alone a job has one rank, as sbatch runs one task.
TEST_F(AppTest, SubmitFromFlagsAloneHasOneReplicaUnlessTold) {
  for (const char* id : {"j-1", "j-2", "j-3", "j-4"}) fake_.submit_results.push_back(Submitted(id));
  EXPECT_EQ(Run({"submit", "--", "true"}), kExitOk);
  EXPECT_EQ(Run({"submit", "--replicas", "3", "--", "true"}), kExitOk);
  // An explicit 0 is the user's, and the scheduler names the field.
  EXPECT_EQ(Run({"submit", "--replicas", "0", "--", "true"}), kExitOk);
  // A file is sent as it is.
  const std::string path = ::testing::TempDir() + "/app-no-replicas.yaml";
  std::ofstream(path) << "name: no-replicas\ncommand: {argv: [\"true\"]}\n";
  EXPECT_EQ(Run({"submit", "-f", path}), kExitOk);
  ASSERT_EQ(fake_.submits.size(), 4u);
  EXPECT_EQ(fake_.submits[0].spec().replicas(), 1);
  EXPECT_EQ(fake_.submits[1].spec().replicas(), 3);
  EXPECT_EQ(fake_.submits[2].spec().replicas(), 0);
  EXPECT_EQ(fake_.submits[3].spec().replicas(), 0);
}

TEST_F(AppTest, SubmitRetriesUnavailableWithTheSameRequestId) {
  fake_.submit_results.push_back(absl::UnavailableError("connection reset"));
  fake_.submit_results.push_back(absl::DeadlineExceededError("deadline"));
  fake_.submit_results.push_back(Submitted("j-7"));
  EXPECT_EQ(Run({"submit", "--name", "x", "--request-id", "script-1"}), kExitOk);
  EXPECT_EQ(out_.str(), "j-7\n");
  ASSERT_EQ(fake_.submits.size(), 3u);
  for (const auto& request : fake_.submits) {
    EXPECT_EQ(request.request_id(), "script-1");
    EXPECT_EQ(request.spec().SerializeAsString(), fake_.submits[0].spec().SerializeAsString());
  }
  EXPECT_EQ(sleeps_,
            (std::vector<std::chrono::milliseconds>{
                std::chrono::milliseconds(250),
                std::chrono::milliseconds(
                    500)}));  // One line when the retrying starts; none for each retry after it.
  EXPECT_EQ(err_.str(),
            "ringctl: scheduler unreachable at localhost:7070: connection reset; retrying for up "
            "to 30 s with request id script-1\n");
}

// The default rides out a scheduler failover: a crashed leader's lease (10 s) passes on, then
// the standby starts. Waits of 0.25, 0.5, 1 and then 2 s fit 18 calls into 30 s.
TEST_F(AppTest, SubmitKeepsRetryingForThirtySecondsByDefault) {
  for (int i = 0; i < 40; ++i) fake_.submit_results.push_back(absl::UnavailableError("refused"));
  EXPECT_EQ(Run({"submit", "--name", "x", "--scheduler", "s:1"}), kExitUnreachable);
  EXPECT_EQ(fake_.submits.size(), 18u);
  std::chrono::milliseconds waited{0};
  for (auto w : sleeps_) waited += w;
  EXPECT_EQ(waited, std::chrono::milliseconds(29750));
  EXPECT_THAT(err_.str(), HasSubstr("(tried 18 times with request id generated-id)\n"));
}

TEST_F(AppTest, SubmitGivesUpAfterTheLastAttemptAsUnreachable) {
  for (int i = 0; i < 4; ++i) fake_.submit_results.push_back(absl::UnavailableError("refused"));
  // Waits of 0.25 and 0.5 s fit in 1 s; a third, of 1 s, would not.
  EXPECT_EQ(Run({"submit", "--name", "x", "--scheduler", "s:1", "--retry-seconds", "1"}),
            kExitUnreachable);
  EXPECT_EQ(fake_.submits.size(), 3u);
  EXPECT_EQ(err_.str(),
            "ringctl: scheduler unreachable at s:1: refused; retrying for up to 1 s with request "
            "id generated-id\n"
            "ringctl: scheduler unreachable at s:1: refused (tried 3 times with request id "
            "generated-id)\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(AppTest, SubmitWithRetrySecondsZeroTriesOnce) {
  fake_.submit_results.push_back(absl::UnavailableError("refused"));
  EXPECT_EQ(Run({"submit", "--name", "x", "--scheduler", "s:1", "--retry-seconds", "0"}),
            kExitUnreachable);
  EXPECT_EQ(fake_.submits.size(), 1u);
  EXPECT_EQ(err_.str(),
            "ringctl: scheduler unreachable at s:1: refused (tried 1 time with request id "
            "generated-id)\n");
}

TEST_F(AppTest, SubmitDoesNotRetryARejectedSpec) {
  fake_.submit_results.push_back(absl::InvalidArgumentError("replicas: must be 1..4096, got 5000"));
  EXPECT_EQ(Run({"submit", "--name", "x", "--replicas", "5000"}), kExitUsage);
  EXPECT_EQ(fake_.submits.size(), 1u);
  EXPECT_EQ(err_.str(), "ringctl: invalid job spec: replicas: must be 1..4096, got 5000\n");
}

TEST_F(AppTest, SubmitFromFileWithFlagOverrides) {
  const std::string path = ::testing::TempDir() + "/app-job.yaml";
  std::ofstream(path) << "name: from-file\nreplicas: 2\ntrainer: {steps: 10}\n";
  fake_.submit_results.push_back(Submitted("j-8"));
  EXPECT_EQ(Run({"submit", "-f", path, "--replicas", "4", "--label", "a=b"}), kExitOk);
  ASSERT_EQ(fake_.submits.size(), 1u);
  const v1::JobSpec& spec = fake_.submits[0].spec();
  EXPECT_EQ(spec.name(), "from-file");
  EXPECT_EQ(spec.replicas(), 4);
  EXPECT_EQ(spec.trainer().steps(), 10);
  EXPECT_EQ(spec.labels().at("a"), "b");
}

TEST_F(AppTest, FileWithoutWorkloadIsLeftForTheSchedulerToJudge) {
  const std::string path = ::testing::TempDir() + "/app-no-workload.yaml";
  std::ofstream(path) << "name: forgot-command\nreplicas: 1\n";
  fake_.submit_results.push_back(
      absl::InvalidArgumentError("workload: set exactly one of trainer or command"));
  EXPECT_EQ(Run({"submit", "-f", path}), kExitUsage);
  ASSERT_EQ(fake_.submits.size(), 1u);
  EXPECT_EQ(fake_.submits[0].spec().workload_case(), v1::JobSpec::WORKLOAD_NOT_SET);
  EXPECT_EQ(err_.str(),
            "ringctl: invalid job spec: workload: set exactly one of trainer or command\n");
}

TEST_F(AppTest, CommandAfterDashDashIsSent) {
  fake_.submit_results.push_back(Submitted("j-5"));
  EXPECT_EQ(Run({"submit", "--name", "x", "--replicas", "1", "--", "sh", "-c", "exit 3"}), kExitOk);
  ASSERT_EQ(fake_.submits.size(), 1u);
  EXPECT_THAT(fake_.submits[0].spec().command().argv(),
              ::testing::ElementsAre("sh", "-c", "exit 3"));
}

TEST_F(AppTest, SubmitArraySendsItsCountAndParallelism) {
  fake_.submit_results.push_back(Submitted("j-3f9c2a41b7d0"));
  EXPECT_EQ(Run({"submit", "--array", "0-999%50", "--", "./task", "{index}"}), kExitOk);
  ASSERT_EQ(fake_.submits.size(), 1u);
  const v1::JobSpec& spec = fake_.submits[0].spec();
  EXPECT_EQ(spec.array().count(), 1000);
  EXPECT_EQ(spec.array().parallelism(), 50);
  EXPECT_THAT(spec.command().argv(), ::testing::ElementsAre("./task", "{index}"));
  EXPECT_EQ(out_.str(), "j-3f9c2a41b7d0\n");
}

TEST_F(AppTest, BadArrayIsAUsageErrorAndNothingIsSent) {
  EXPECT_EQ(Run({"submit", "--array", "1-10", "--", "./task"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "ringctl: --array: a range starts at 0 (tasks are numbered 0..count-1), e.g. 0-10; "
            "got \"1-10\"\n");
  EXPECT_TRUE(fake_.submits.empty());
}

TEST_F(AppTest, SubmitFollowOfAnArrayIsAUsageErrorAsItHasNoRankZero) {
  EXPECT_EQ(Run({"submit", "--array", "10", "--follow", "--", "./task"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("use --wait, then ringctl logs ID --index I"));
  const std::string path = ::testing::TempDir() + "/app-array.yaml";
  std::ofstream(path) << "name: sweep\nreplicas: 1\narray: {count: 4}\ncommand: {argv: [t]}\n";
  EXPECT_EQ(Run({"submit", "-f", path, "--follow"}), kExitUsage);
  EXPECT_TRUE(fake_.submits.empty());
}

TEST_F(AppTest, BadYamlIsAUsageErrorAndNothingIsSent) {
  const std::string path = ::testing::TempDir() + "/app-bad.yaml";
  std::ofstream(path) << "trainer:\n  steps: ten\n";
  EXPECT_EQ(Run({"submit", "-f", path}), kExitUsage);
  EXPECT_EQ(err_.str(), "ringctl: " + path + ": trainer.steps: expected an integer, got \"ten\"\n");
  EXPECT_TRUE(fake_.submits.empty());
}

TEST_F(AppTest, SubmitJsonPrintsTheWholeResponse) {
  v1::SubmitJobResponse response = Submitted("j-9");
  response.set_existing(true);
  fake_.submit_results.push_back(response);
  EXPECT_EQ(Run({"-o", "json", "submit", "--name", "x"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"id\": \"j-9\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"existing\": true"));
}

TEST_F(AppTest, UsageErrorsExitTwoWithOneLine) {
  EXPECT_EQ(Run({"submit", "--replicas", "many"}), kExitUsage);
  EXPECT_EQ(err_.str(), "ringctl: --replicas: expected an integer, got 'many'\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(AppTest, HelpPrintsUsageAndSucceeds) {
  EXPECT_EQ(Run({"watch", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("Usage: ringctl watch ID"));
  EXPECT_EQ(err_.str(), "");
}

TEST_F(AppTest, GetOfAMissingJobExitsFour) {
  fake_.get_results.push_back(absl::NotFoundError("no job j-123"));
  EXPECT_EQ(Run({"get", "j-123"}), kExitNotFound);
  EXPECT_EQ(err_.str(), "ringctl: job j-123 not found\n");
  ASSERT_EQ(fake_.gets.size(), 1u);
  EXPECT_EQ(fake_.gets[0].job_id(), "j-123");
}

TEST_F(AppTest, UnreachableSchedulerExitsThreeNamingTheAddress) {
  fake_.list_results.push_back(absl::UnavailableError("failed to connect to all addresses"));
  runtime_.getenv = [](const char* name) -> const char* {
    return std::string(name) == "RINGMASTER_SCHEDULER" ? "10.1.2.3:7070" : nullptr;
  };
  EXPECT_EQ(Run({"list"}), kExitUnreachable);
  EXPECT_EQ(err_.str(),
            "ringctl: scheduler unreachable at 10.1.2.3:7070: failed to connect to all "
            "addresses\n");
  EXPECT_EQ(connected_to_, "10.1.2.3:7070");
}

TEST_F(AppTest, ListSendsTheFilters) {
  fake_.list_results.push_back(v1::ListJobsResponse());
  EXPECT_EQ(Run({"list", "--state", "pending", "--queue", "vision", "--limit", "3"}), kExitOk);
  ASSERT_EQ(fake_.lists.size(), 1u);
  EXPECT_EQ(fake_.lists[0].state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(fake_.lists[0].queue(), "vision");
  EXPECT_EQ(fake_.lists[0].page_size(), 3);
  EXPECT_EQ(out_.str(), "No jobs.\n");
}

v1::ListJobsResponse Page(const std::vector<std::string>& ids, const std::string& next) {
  v1::ListJobsResponse page;
  for (const std::string& id : ids) {
    v1::Job* job = page.add_jobs();
    job->set_id(id);
    job->set_state(v1::JOB_STATE_SUCCEEDED);
    job->mutable_spec()->set_name("n");
  }
  page.set_next_page_token(next);
  return page;
}

TEST_F(AppTest, ListPagesThroughEveryJobRepeatingTheFilters) {
  fake_.list_results.push_back(Page({"j-5", "j-4"}, "t1"));
  fake_.list_results.push_back(Page({"j-3", "j-2"}, "t2"));
  fake_.list_results.push_back(Page({"j-1"}, ""));
  EXPECT_EQ(Run({"list", "-l", "team=vision,!spot", "--queue", "q", "--page-size", "2"}), kExitOk);
  ASSERT_EQ(fake_.lists.size(), 3u);
  EXPECT_EQ(fake_.lists[0].page_token(), "");
  EXPECT_EQ(fake_.lists[1].page_token(), "t1");
  EXPECT_EQ(fake_.lists[2].page_token(), "t2");
  for (const v1::ListJobsRequest& r : fake_.lists) {
    EXPECT_EQ(r.label_selector(), "team=vision,!spot");
    EXPECT_EQ(r.queue(), "q");
    EXPECT_EQ(r.page_size(), 2);
  }
  const std::string out = out_.str();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 6) << out;  // header and five jobs
  for (const char* id : {"j-5", "j-4", "j-3", "j-2", "j-1"}) EXPECT_THAT(out, HasSubstr(id));
}

TEST_F(AppTest, ListStopsAtTheLimitAndAsksOnlyForWhatIsLeft) {
  fake_.list_results.push_back(Page({"j-5", "j-4"}, "t1"));
  fake_.list_results.push_back(Page({"j-3"}, "t2"));
  EXPECT_EQ(Run({"-o", "json", "list", "--limit", "3", "--page-size", "2"}), kExitOk);
  ASSERT_EQ(fake_.lists.size(), 2u);
  EXPECT_EQ(fake_.lists[1].page_size(), 1);
  EXPECT_THAT(out_.str(), HasSubstr("\"j-3\""));
  EXPECT_THAT(out_.str(), ::testing::Not(HasSubstr("nextPageToken")));
}

TEST_F(AppTest, ListArrayAsksForItsTasksOnEveryPage) {
  fake_.list_results.push_back(Page({"j-a-9", "j-a-8"}, "t1"));
  fake_.list_results.push_back(Page({"j-a-7"}, ""));
  EXPECT_EQ(Run({"list", "--array", "j-a", "--page-size", "2"}), kExitOk);
  ASSERT_EQ(fake_.lists.size(), 2u);
  for (const v1::ListJobsRequest& r : fake_.lists) EXPECT_EQ(r.array_id(), "j-a");
  EXPECT_EQ(fake_.lists[1].page_token(), "t1");
  for (const char* id : {"j-a-9", "j-a-8", "j-a-7"}) EXPECT_THAT(out_.str(), HasSubstr(id));
  fake_.list_results.push_back(Page({}, ""));
  EXPECT_EQ(Run({"list"}), kExitOk);
  EXPECT_EQ(fake_.lists.back().array_id(), "") << "without --array: jobs and arrays, no tasks";
}

TEST_F(AppTest, ListShowsTheSchedulersSelectorError) {
  fake_.list_results.push_back(absl::InvalidArgumentError(
      "label_selector: \"a=b=c\": expected KEY=VALUE, KEY!=VALUE, KEY or !KEY"));
  EXPECT_EQ(Run({"list", "-l", "a=b=c"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("label_selector: \"a=b=c\""));
}

TEST_F(AppTest, CancelOfAnEndedJobIsAPlainError) {
  fake_.cancel_results.push_back(absl::FailedPreconditionError("job j-1 already SUCCEEDED"));
  EXPECT_EQ(Run({"cancel", "j-1", "--reason", "oops"}), kExitError);
  EXPECT_EQ(err_.str(), "ringctl: cannot cancel job j-1: job j-1 already SUCCEEDED\n");
  ASSERT_EQ(fake_.cancels.size(), 1u);
  EXPECT_EQ(fake_.cancels[0].reason(), "oops");
}

TEST_F(AppTest, CancelPrintsTheJobAndItsState) {
  v1::CancelJobResponse response;
  response.mutable_job()->set_id("j-1");
  response.mutable_job()->set_state(v1::JOB_STATE_CANCELLED);
  fake_.cancel_results.push_back(response);
  EXPECT_EQ(Run({"cancel", "j-1"}), kExitOk);
  EXPECT_EQ(out_.str(), "j-1 CANCELLED\n");
}

TEST_F(AppTest, WatchOfASucceededJobExitsZero) {
  fake_.watch_streams.push_back(
      {{Event(1, v1::JOB_STATE_PENDING), Event(2, v1::JOB_STATE_RUNNING, "placed on w1"),
        Event(3, v1::JOB_STATE_SUCCEEDED)},
       absl::OkStatus()});
  EXPECT_EQ(Run({"watch", "j-1"}), kExitOk);
  EXPECT_EQ(err_.str(), "");
  const std::string out = out_.str();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 4);
  EXPECT_THAT(out, HasSubstr("RUNNING    0        placed on w1\n"));
}

TEST_F(AppTest, WatchOfAFailedJobExitsFive) {
  fake_.watch_streams.push_back({{Event(1, v1::JOB_STATE_RUNNING),
                                  Event(2, v1::JOB_STATE_FAILED, "rank 2 exited with code 3")},
                                 absl::OkStatus()});
  EXPECT_EQ(Run({"watch", "j-1"}), kExitJobUnsuccessful);
  EXPECT_EQ(err_.str(), "ringctl: job j-1 ended FAILED: rank 2 exited with code 3\n");
}

TEST_F(AppTest, WatchOfACancelledJobExitsFive) {
  fake_.watch_streams.push_back({{Event(1, v1::JOB_STATE_CANCELLED)}, absl::OkStatus()});
  EXPECT_EQ(Run({"watch", "j-1"}), kExitJobUnsuccessful);
  EXPECT_EQ(err_.str(), "ringctl: job j-1 ended CANCELLED\n");
}

TEST_F(AppTest, WatchReopensABrokenStreamAndSkipsReplayedEvents) {
  fake_.watch_streams.push_back({{Event(1, v1::JOB_STATE_PENDING), Event(2, v1::JOB_STATE_RUNNING)},
                                 absl::UnavailableError("scheduler restarting")});
  fake_.watch_streams.push_back({{Event(1, v1::JOB_STATE_PENDING), Event(2, v1::JOB_STATE_RUNNING),
                                  Event(3, v1::JOB_STATE_SUCCEEDED)},
                                 absl::OkStatus()});
  EXPECT_EQ(Run({"-o", "json", "watch", "j-1"}), kExitOk);
  EXPECT_EQ(fake_.watches.size(), 2u);
  const std::string out = out_.str();
  // One JSON line per distinct event.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3);
  EXPECT_THAT(out, HasSubstr("\"seq\":\"3\""));
  EXPECT_EQ(sleeps_.size(), 1u);
}

TEST_F(AppTest, WatchOfAnUnreachableSchedulerFailsAtOnce) {
  fake_.watch_streams.push_back({{}, absl::UnavailableError("connection refused")});
  EXPECT_EQ(Run({"watch", "j-1", "--scheduler", "h:1"}), kExitUnreachable);
  EXPECT_EQ(fake_.watches.size(), 1u);
  EXPECT_EQ(err_.str(), "ringctl: scheduler unreachable at h:1: connection refused\n");
}

TEST_F(AppTest, WatchOfAMissingJobExitsFour) {
  fake_.watch_streams.push_back({{}, absl::NotFoundError("job j-1 not found")});
  EXPECT_EQ(Run({"watch", "j-1"}), kExitNotFound);
  EXPECT_EQ(err_.str(), "ringctl: job j-1 not found\n");
}

TEST_F(AppTest, WatchThatEndsEarlyIsAnError) {
  fake_.watch_streams.push_back({{Event(1, v1::JOB_STATE_RUNNING)}, absl::OkStatus()});
  EXPECT_EQ(Run({"watch", "j-1"}), kExitError);
  EXPECT_EQ(err_.str(),
            "ringctl: watch of job j-1 ended before the job finished (last state RUNNING)\n");
}

v1::Job JobIn(v1::JobState state, int32_t attempt = 0, bool placed = false) {
  v1::Job job;
  job.set_id("j-1");
  job.set_state(state);
  job.set_attempt(attempt);
  job.mutable_spec()->set_replicas(1);
  if (placed) {
    v1::RankPlacement* rank = job.add_placement();
    rank->set_rank(0);
    rank->set_worker_id("w2");
    rank->set_worker_address("127.0.0.2");
    rank->set_worker_port(7071);
  }
  return job;
}

TEST_F(AppTest, SubmitWaitPrintsTheIdAndExitsZeroWhenTheJobSucceeds) {
  fake_.submit_results.push_back(Submitted("j-1"));
  fake_.watch_streams.push_back({{Event(1, v1::JOB_STATE_PENDING), Event(2, v1::JOB_STATE_RUNNING),
                                  Event(3, v1::JOB_STATE_SUCCEEDED)},
                                 absl::OkStatus()});
  EXPECT_EQ(Run({"submit", "--name", "x", "--wait"}), kExitOk);
  EXPECT_EQ(out_.str(), "j-1\n");
  EXPECT_EQ(err_.str(), "");
  ASSERT_EQ(fake_.watches.size(), 1u);
  EXPECT_EQ(fake_.watches[0].job_id(), "j-1");
}

TEST_F(AppTest, SubmitWaitExitsFiveWithTheJobsMessageWhenItFails) {
  fake_.submit_results.push_back(Submitted("j-1"));
  fake_.watch_streams.push_back(
      {{Event(1, v1::JOB_STATE_RUNNING)}, absl::UnavailableError("scheduler restarting")});
  fake_.watch_streams.push_back(
      {{Event(1, v1::JOB_STATE_RUNNING), Event(2, v1::JOB_STATE_FAILED, "rank 0 exited")},
       absl::OkStatus()});
  v1::Job failed = JobIn(v1::JOB_STATE_FAILED);
  failed.set_message("rank 0 exited with code 3");
  fake_.get_results.push_back(failed);
  EXPECT_EQ(Run({"submit", "--name", "x", "--wait"}), kExitJobUnsuccessful);
  EXPECT_EQ(out_.str(), "j-1\n");
  EXPECT_EQ(err_.str(), "ringctl: job j-1 ended FAILED: rank 0 exited with code 3\n");
  EXPECT_EQ(fake_.watches.size(), 2u);
}

TEST_F(AppTest, SubmitWaitOfACancelledJobExitsFive) {
  fake_.submit_results.push_back(Submitted("j-1"));
  fake_.watch_streams.push_back({{Event(1, v1::JOB_STATE_CANCELLED)}, absl::OkStatus()});
  fake_.get_results.push_back(JobIn(v1::JOB_STATE_CANCELLED));
  EXPECT_EQ(Run({"submit", "--name", "x", "--wait"}), kExitJobUnsuccessful);
  EXPECT_EQ(err_.str(), "ringctl: job j-1 ended CANCELLED\n");
}

TEST_F(AppTest, SubmitWaitWithJsonPrintsTheFinalJob) {
  fake_.submit_results.push_back(Submitted("j-1"));
  fake_.watch_streams.push_back({{Event(1, v1::JOB_STATE_SUCCEEDED)}, absl::OkStatus()});
  fake_.get_results.push_back(JobIn(v1::JOB_STATE_SUCCEEDED));
  EXPECT_EQ(Run({"submit", "--name", "x", "--wait", "-o", "json"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"state\": \"JOB_STATE_SUCCEEDED\""));
  EXPECT_EQ(err_.str(), "");
}

TEST_F(AppTest, SubmitWaitOfAnUnreachableSchedulerExitsThree) {
  fake_.submit_results.push_back(Submitted("j-1"));
  fake_.watch_streams.push_back({{}, absl::UnavailableError("connection refused")});
  EXPECT_EQ(Run({"submit", "--name", "x", "--wait", "--scheduler", "h:1"}), kExitUnreachable);
  EXPECT_EQ(err_.str(), "ringctl: scheduler unreachable at h:1: connection refused\n");
}

TEST_F(AppTest, SubmitFollowStreamsRankZeroWhileItRunsThenExitsWithTheJobsStatus) {
  fake_.submit_results.push_back(Submitted("j-1"));
  fake_.get_results.push_back(JobIn(v1::JOB_STATE_PENDING));
  fake_.get_results.push_back(JobIn(v1::JOB_STATE_STARTING, 0, true));
  fake_.get_results.push_back(JobIn(v1::JOB_STATE_RUNNING, 0, true));
  fake_.get_results.push_back(JobIn(v1::JOB_STATE_SUCCEEDED));
  fake_.log_streams.push_back({"step 1\nstep 2\n", absl::OkStatus()});
  EXPECT_EQ(Run({"submit", "--name", "x", "--follow"}), kExitOk);
  EXPECT_EQ(out_.str(), "step 1\nstep 2\n");
  EXPECT_EQ(err_.str(), "ringctl: job j-1 submitted; following rank 0's output\n");
  ASSERT_EQ(fake_.log_reads.size(), 1u);
  EXPECT_TRUE(fake_.log_reads[0].follow());
  EXPECT_EQ(fake_.log_reads[0].rank(), 0);
  EXPECT_EQ(fake_.log_reads[0].attempt(), 0);
  // Polled quickly while it started, backing off.
  EXPECT_EQ(sleeps_, (std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(100),
                                                             std::chrono::milliseconds(200)}));
}

TEST_F(AppTest, SubmitFollowFollowsTheNewAttemptAfterARestart) {
  fake_.submit_results.push_back(Submitted("j-1"));
  fake_.get_results.push_back(JobIn(v1::JOB_STATE_RUNNING, 0, true));
  fake_.get_results.push_back(JobIn(v1::JOB_STATE_RUNNING, 1, true));
  v1::Job failed = JobIn(v1::JOB_STATE_FAILED, 1);
  failed.set_message("rank 0 exited with code 1");
  fake_.get_results.push_back(failed);
  fake_.get_results.push_back(failed);  // Finish's look-up of the message
  fake_.log_streams.push_back({"out\n", absl::OkStatus()});
  fake_.log_streams.push_back({"out\n", absl::OkStatus()});
  EXPECT_EQ(Run({"submit", "--name", "x", "--follow"}), kExitJobUnsuccessful);
  EXPECT_EQ(out_.str(), "out\nout\n");
  ASSERT_EQ(fake_.log_reads.size(), 2u);
  EXPECT_EQ(fake_.log_reads[0].attempt(), 0);
  EXPECT_EQ(fake_.log_reads[1].attempt(), 1);
  EXPECT_THAT(err_.str(), HasSubstr("ringctl: job j-1 ended FAILED: rank 0 exited with code 1\n"));
}

TEST_F(AppTest, SubmitFollowPrintsTheWholeLogOfAJobThatEndedBeforeItWasSeenRunning) {
  fake_.submit_results.push_back(Submitted("j-1"));
  fake_.get_results.push_back(JobIn(v1::JOB_STATE_SUCCEEDED));
  fake_.log_streams.push_back({"quick\n", absl::OkStatus()});
  EXPECT_EQ(Run({"submit", "--name", "x", "--follow"}), kExitOk);
  EXPECT_EQ(out_.str(), "quick\n");
  ASSERT_EQ(fake_.log_reads.size(), 1u);
  EXPECT_FALSE(fake_.log_reads[0].follow());
  EXPECT_EQ(fake_.log_reads[0].attempt(), 0);
}

TEST_F(AppTest, WaitAndFollowAreFlagsOfSubmitOnly) {
  EXPECT_EQ(Run({"list", "--wait"}), kExitUsage);
  EXPECT_EQ(err_.str(), "ringctl: --wait is not a flag of list\n");
  EXPECT_EQ(Run({"submit", "--wait=yes"}), kExitUsage);
  EXPECT_EQ(err_.str(), "ringctl: --wait takes no value\n");
  EXPECT_EQ(Run({"submit", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("--wait"));
  EXPECT_THAT(out_.str(), HasSubstr("--follow"));
}

// An array of `count` tasks of which the highest `waiting` are not created yet.
v1::Job ArrayJob(const std::string& id, int32_t count, int32_t waiting) {
  v1::Job job;
  job.set_id(id);
  job.set_state(v1::JOB_STATE_RUNNING);
  job.mutable_spec()->mutable_array()->set_count(count);
  job.mutable_array_status()->set_count(count);
  job.mutable_array_status()->set_waiting(waiting);
  return job;
}

TEST_F(AppTest, LogsIndexReadsTheLogOfThatTaskOfTheArray) {
  fake_.get_results.push_back(ArrayJob("j-a", 1000, 900));
  fake_.log_streams.push_back({"task 17 says hi\n", absl::OkStatus()});
  EXPECT_EQ(Run({"logs", "j-a", "--index", "17", "--rank", "0"}), kExitOk) << err_.str();
  ASSERT_EQ(fake_.gets.size(), 1u);
  EXPECT_EQ(fake_.gets[0].job_id(), "j-a");
  ASSERT_EQ(fake_.log_reads.size(), 1u);
  EXPECT_EQ(fake_.log_reads[0].job_id(), "j-a-17");
  EXPECT_EQ(out_.str(), "task 17 says hi\n");
}

TEST_F(AppTest, LogsIndexSaysWhatIsWrongBeforeReadingAnyLog) {
  v1::Job plain;
  plain.set_id("j-p");
  fake_.get_results.push_back(plain);
  EXPECT_EQ(Run({"logs", "j-p", "--index", "0"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "ringctl: --index: job j-p is not an array; read its log without --index\n");

  fake_.get_results.push_back(ArrayJob("j-a", 10, 0));
  EXPECT_EQ(Run({"logs", "j-a", "--index", "10"}), kExitUsage);
  EXPECT_EQ(err_.str(), "ringctl: --index: array j-a has tasks 0..9, got 10\n");

  fake_.get_results.push_back(ArrayJob("j-a", 10, 3));
  EXPECT_EQ(Run({"logs", "j-a", "--index", "7"}), kExitNotFound);
  EXPECT_EQ(err_.str(),
            "ringctl: task 7 of array j-a has not been created yet, so it has no log (3 tasks "
            "wait for the parallelism limit, the array's dependencies or room)\n");

  fake_.get_results.push_back(absl::NotFoundError("job j-x not found"));
  EXPECT_EQ(Run({"logs", "j-x", "--index", "1"}), kExitNotFound);
  EXPECT_EQ(err_.str(), "ringctl: job j-x not found\n");
  EXPECT_TRUE(fake_.log_reads.empty());
}

TEST_F(AppTest, GetOfAnArrayShowsItsTasks) {
  v1::Job array = ArrayJob("j-a", 10, 4);
  array.mutable_spec()->mutable_array()->set_parallelism(2);
  array.mutable_array_status()->set_running(2);
  array.mutable_array_status()->set_succeeded(4);
  fake_.get_results.push_back(array);
  EXPECT_EQ(Run({"get", "j-a"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("Tasks:           10 (parallelism 2)\n"
                                    "                 waiting 4  pending 0  running 2  "
                                    "succeeded 4  failed 0  cancelled 0\n"));
  fake_.get_results.push_back(array);
  EXPECT_EQ(Run({"-o", "json", "get", "j-a"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"array_status\": {"));
  EXPECT_THAT(out_.str(), HasSubstr("\"waiting\": 4"));
}

TEST_F(AppTest, WorkersPrintsTheTable) {
  v1::ListWorkersResponse response;
  v1::WorkerInfo* w = response.add_workers();
  w->set_worker_id("w1");
  w->set_state("READY");
  v1::Gpu* gpu = w->add_gpus();
  gpu->set_type("t4");
  gpu->set_simulated(true);
  fake_.worker_results.push_back(response);
  EXPECT_EQ(Run({"workers"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("t4(sim) 0/1"));
}

TEST(ErrorsTest, ErrorMessagesAreSingleLine) {
  Failure failure =
      DescribeRpcError(absl::InternalError("line one\nline two\n"), "list jobs", "h:1", "");
  EXPECT_EQ(failure.exit_code, kExitError);
  EXPECT_EQ(failure.message, "list jobs failed: INTERNAL: line one line two");
}

TEST(ErrorsTest, DeadlineIsTreatedAsUnreachable) {
  Failure failure = DescribeRpcError(absl::DeadlineExceededError("Deadline Exceeded"),
                                     "get job j-1", "h:1", "j-1");
  EXPECT_EQ(failure.exit_code, kExitUnreachable);
  EXPECT_EQ(failure.message,
            "scheduler at h:1 did not answer in time (get job j-1): Deadline Exceeded");
}

TEST(ErrorsTest, AnUntrustedCertificateSaysTheSchedulerAnsweredAndHowToTrustIt) {
  // Debian's gRPC 1.51 with OpenSSL 3, word for word (seen by tests/quickstart against a real
  // scheduler whose CA ringctl was not given).
  Failure failure = DescribeRpcError(
      absl::UnavailableError("failed to connect to all addresses; last error: UNKNOWN: "
                             "ipv4:127.0.0.1:7070: Tls handshake failed: SSL_ERROR_SSL: "
                             "error:0A000086:SSL routines::certificate verify failed"),
      "list workers", "localhost:7070", "");
  EXPECT_EQ(failure.exit_code, kExitUnreachable);
  EXPECT_THAT(failure.message, HasSubstr("the scheduler at localhost:7070 answered, but its TLS "
                                         "certificate is not trusted"));
  EXPECT_THAT(failure.message, HasSubstr("--tls-ca, RINGMASTER_TLS_CA or tls_ca in"));
  EXPECT_THAT(failure.message, Not(HasSubstr("unreachable")));
  EXPECT_FALSE(
      IsRetryable(absl::UnavailableError("Tls handshake failed: certificate verify failed")));
  EXPECT_TRUE(IsRetryable(absl::UnavailableError("failed to connect to all addresses")));
}

TEST(ErrorsTest, AHandshakeWithAPlaintextSchedulerSuggestsInsecure) {
  Failure failure = DescribeRpcError(
      absl::UnavailableError("failed to connect to all addresses; last error: UNKNOWN: "
                             "ipv4:127.0.0.1:7070: Ssl handshake failed: SSL_ERROR_SSL: "
                             "error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER"),
      "list workers", "localhost:7070", "");
  EXPECT_EQ(failure.exit_code, kExitUnreachable);
  EXPECT_THAT(failure.message, HasSubstr("the TLS handshake with the scheduler at localhost:7070 "
                                         "failed: is it serving TLS?"));
}

TEST(RequestIdTest, IsThirtyTwoHexDigitsAndFreshEachTime) {
  std::string a = NewRequestId();
  std::string b = NewRequestId();
  EXPECT_THAT(a, ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace ringmaster::cli
