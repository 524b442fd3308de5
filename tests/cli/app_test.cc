#include "app.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "errors.h"

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;

// A scheduler that answers from scripted queues and records what it was asked.
class FakeScheduler : public SchedulerClient {
 public:
  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& request) override {
    submits.push_back(request);
    return Next(submit_results);
  }
  absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& request) override {
    gets.push_back(request);
    return Next(get_results);
  }
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request) override {
    lists.push_back(request);
    return Next(list_results);
  }
  absl::StatusOr<v1::CancelJobResponse> CancelJob(const v1::CancelJobRequest& request) override {
    cancels.push_back(request);
    return Next(cancel_results);
  }
  absl::Status WatchJob(const v1::WatchJobRequest& request,
                        const std::function<void(const v1::JobEvent&)>& on_event) override {
    watches.push_back(request);
    if (watch_streams.empty()) return absl::InternalError("no scripted stream");
    WatchStream stream = watch_streams.front();
    watch_streams.pop_front();
    for (const v1::JobEvent& event : stream.events) on_event(event);
    return stream.end;
  }
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest&) override {
    return Next(worker_results);
  }

  struct WatchStream {
    std::vector<v1::JobEvent> events;
    absl::Status end;
  };

  std::deque<absl::StatusOr<v1::SubmitJobResponse>> submit_results;
  std::deque<absl::StatusOr<v1::Job>> get_results;
  std::deque<absl::StatusOr<v1::ListJobsResponse>> list_results;
  std::deque<absl::StatusOr<v1::CancelJobResponse>> cancel_results;
  std::deque<WatchStream> watch_streams;
  std::deque<absl::StatusOr<v1::ListWorkersResponse>> worker_results;

  std::vector<v1::SubmitJobRequest> submits;
  std::vector<v1::GetJobRequest> gets;
  std::vector<v1::ListJobsRequest> lists;
  std::vector<v1::CancelJobRequest> cancels;
  std::vector<v1::WatchJobRequest> watches;

 private:
  template <typename T>
  T Next(std::deque<T>& queue) {
    if (queue.empty()) return absl::InternalError("no scripted answer");
    T next = queue.front();
    queue.pop_front();
    return next;
  }
};

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
    runtime_.connect = [this](const std::string& address, std::shared_ptr<grpc::ChannelCredentials>)
        -> std::unique_ptr<SchedulerClient> {
      connected_to_ = address;
      return std::make_unique<Forwarder>(&fake_);
    };
  }

  int Run(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return RunCli(args, runtime_, out_, err_);
  }

  // The client RunCli owns forwards to the fake the test keeps.
  class Forwarder : public SchedulerClient {
   public:
    explicit Forwarder(FakeScheduler* fake) : fake_(fake) {}
    absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& r) override {
      return fake_->SubmitJob(r);
    }
    absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& r) override { return fake_->GetJob(r); }
    absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& r) override {
      return fake_->ListJobs(r);
    }
    absl::StatusOr<v1::CancelJobResponse> CancelJob(const v1::CancelJobRequest& r) override {
      return fake_->CancelJob(r);
    }
    absl::Status WatchJob(const v1::WatchJobRequest& r,
                          const std::function<void(const v1::JobEvent&)>& f) override {
      return fake_->WatchJob(r, f);
    }
    absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest& r) override {
      return fake_->ListWorkers(r);
    }

   private:
    FakeScheduler* fake_;
  };

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
  EXPECT_EQ(sleeps_, (std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(250),
                                                             std::chrono::milliseconds(500)}));
}

TEST_F(AppTest, SubmitGivesUpAfterTheLastAttemptAsUnreachable) {
  for (int i = 0; i < 4; ++i) fake_.submit_results.push_back(absl::UnavailableError("refused"));
  EXPECT_EQ(Run({"submit", "--name", "x", "--scheduler", "s:1"}), kExitUnreachable);
  EXPECT_EQ(fake_.submits.size(), 4u);
  EXPECT_EQ(err_.str(),
            "ringctl: scheduler unreachable at s:1: refused (tried 4 times with request id "
            "generated-id)\n");
  EXPECT_EQ(out_.str(), "");
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
  EXPECT_THAT(out_.str(), HasSubstr("usage: ringctl watch ID"));
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
  EXPECT_EQ(fake_.lists[0].limit(), 3);
  EXPECT_EQ(out_.str(), "No jobs.\n");
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

TEST(RequestIdTest, IsThirtyTwoHexDigitsAndFreshEachTime) {
  std::string a = NewRequestId();
  std::string b = NewRequestId();
  EXPECT_THAT(a, ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace ringmaster::cli
