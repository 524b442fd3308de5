// ringctl logs against a fake scheduler and fake worker agents.
#include "logs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <vector>

#include "app.h"
#include "args.h"

namespace ringmaster::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Answers GetJob and ListWorkers; nothing else is used by `logs`.
class JobAndWorkers : public SchedulerClient {
 public:
  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& request) override {
    if (request.job_id() != job.id()) return absl::NotFoundError("job " + request.job_id());
    return job;
  }
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<v1::CancelJobResponse> CancelJob(const v1::CancelJobRequest&) override {
    return absl::UnimplementedError("");
  }
  absl::Status WatchJob(const v1::WatchJobRequest&,
                        const std::function<void(const v1::JobEvent&)>&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest&) override {
    return workers;
  }
  v1::Job job;
  v1::ListWorkersResponse workers;
};

// Worker agents by address: the log each has (NOT_FOUND for the others), and the requests.
class FakeAgents : public WorkerLogsClient {
 public:
  absl::Status ReadLogs(const std::string& address, const v1::ReadLogsRequest& request,
                        const std::function<void(const v1::LogChunk&)>& on_chunk) override {
    asked.emplace_back(address, request);
    auto it = logs.find(address);
    if (it == logs.end()) return absl::NotFoundError("no log here");
    for (const std::string& piece : it->second) {
      v1::LogChunk chunk;
      chunk.set_data(piece);
      on_chunk(chunk);
    }
    return end;
  }
  std::map<std::string, std::vector<std::string>> logs;
  absl::Status end;
  std::vector<std::pair<std::string, v1::ReadLogsRequest>> asked;
};

class LogsTest : public ::testing::Test {
 protected:
  LogsTest() {
    scheduler_.job.set_id("j-1");
    scheduler_.job.mutable_spec()->set_replicas(4);
    scheduler_.job.set_attempt(1);
    scheduler_.job.set_state(v1::JOB_STATE_RUNNING);
    for (int r = 0; r < 4; ++r) {
      v1::RankPlacement* p = scheduler_.job.add_placement();
      p->set_rank(r);
      p->set_worker_id(r < 2 ? "w2" : "w3");
      p->set_worker_address(r < 2 ? "127.0.0.2" : "127.0.0.3");
      p->set_worker_port(7071);
    }
    for (const char* id : {"w2", "w3", "w4"}) {
      v1::WorkerInfo* w = scheduler_.workers.add_workers();
      w->set_worker_id(id);
      w->set_address(std::string("127.0.0.") + id[1]);
      w->set_port(7071);
    }
  }

  // Runs the real command line through RunCli with the fakes.
  int Run(const std::vector<std::string>& args) {
    Runtime runtime;
    runtime.getenv = [](const char*) -> const char* { return nullptr; };
    runtime.now_ms = [] { return int64_t{0}; };
    runtime.sleep = [](std::chrono::milliseconds) {};
    runtime.new_request_id = [] { return std::string("id"); };
    runtime.connect = [this](const std::string&, std::shared_ptr<grpc::ChannelCredentials>,
                             const std::string&) -> std::unique_ptr<SchedulerClient> {
      return std::make_unique<Borrowed<SchedulerClient, JobAndWorkers>>(&scheduler_);
    };
    runtime.connect_workers =
        [this](std::shared_ptr<grpc::ChannelCredentials>) -> std::unique_ptr<WorkerLogsClient> {
      return std::make_unique<BorrowedAgents>(&agents_);
    };
    out_.str("");
    err_.str("");
    return RunCli(args, runtime, out_, err_);
  }

  template <typename Base, typename Fake>
  class Borrowed : public Base {
   public:
    explicit Borrowed(Fake* fake) : fake_(fake) {}
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
    Fake* fake_;
  };
  class BorrowedAgents : public WorkerLogsClient {
   public:
    explicit BorrowedAgents(FakeAgents* fake) : fake_(fake) {}
    absl::Status ReadLogs(const std::string& a, const v1::ReadLogsRequest& r,
                          const std::function<void(const v1::LogChunk&)>& f) override {
      return fake_->ReadLogs(a, r, f);
    }

   private:
    FakeAgents* fake_;
  };

  JobAndWorkers scheduler_;
  FakeAgents agents_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(LogsTest, PrintsTheRankLogFromTheWorkerItIsPlacedOn) {
  agents_.logs["127.0.0.3:7071"] = {"rank 2 on w3\n", "total images/sec: 812.4\n"};
  EXPECT_EQ(Run({"logs", "j-1", "--rank", "2"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "rank 2 on w3\ntotal images/sec: 812.4\n");
  ASSERT_EQ(agents_.asked.size(), 1u);
  EXPECT_EQ(agents_.asked[0].first, "127.0.0.3:7071");
  const v1::ReadLogsRequest& req = agents_.asked[0].second;
  EXPECT_EQ(req.job_id(), "j-1");
  EXPECT_EQ(req.rank(), 2);
  EXPECT_EQ(req.attempt(), 1);
  EXPECT_FALSE(req.follow());
}

TEST_F(LogsTest, RankZeroAndFollowByDefaultAndWithDashF) {
  agents_.logs["127.0.0.2:7071"] = {"hello\n"};
  EXPECT_EQ(Run({"logs", "j-1", "-f"}), 0) << err_.str();
  ASSERT_EQ(agents_.asked.size(), 1u);
  EXPECT_EQ(agents_.asked[0].second.rank(), 0);
  EXPECT_TRUE(agents_.asked[0].second.follow());
  EXPECT_EQ(Run({"logs", "--follow", "j-1"}), 0) << err_.str();
  EXPECT_TRUE(agents_.asked[1].second.follow());
}

TEST_F(LogsTest, AnEndedJobIsLookedForOnEveryWorker) {
  scheduler_.job.clear_placement();
  scheduler_.job.set_state(v1::JOB_STATE_SUCCEEDED);
  agents_.logs["127.0.0.4:7071"] = {"ran on w4\n"};
  EXPECT_EQ(Run({"logs", "j-1", "--rank", "3"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "ran on w4\n");
  std::vector<std::string> asked;
  for (const auto& [address, req] : agents_.asked) {
    asked.push_back(address);
    EXPECT_EQ(req.attempt(), 1);  // the job's last attempt
  }
  EXPECT_THAT(asked, ElementsAre("127.0.0.2:7071", "127.0.0.3:7071", "127.0.0.4:7071"));
}

TEST_F(LogsTest, AnEarlierAttemptIsLookedForOnEveryWorker) {
  agents_.logs["127.0.0.4:7071"] = {"attempt 0 output\n"};
  EXPECT_EQ(Run({"logs", "j-1", "--attempt", "0"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "attempt 0 output\n");
  EXPECT_EQ(agents_.asked.back().second.attempt(), 0);
}

TEST_F(LogsTest, NoLogAnywhereIsNotFound) {
  scheduler_.job.clear_placement();
  EXPECT_EQ(Run({"logs", "j-1"}), kExitNotFound);
  EXPECT_THAT(err_.str(), HasSubstr("no worker has a log of job j-1 rank 0 attempt 1"));
}

TEST_F(LogsTest, ARankOutsideTheJobIsAUsageError) {
  EXPECT_EQ(Run({"logs", "j-1", "--rank", "4"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("has 4 ranks (0..3)"));
  EXPECT_TRUE(agents_.asked.empty());
}

TEST_F(LogsTest, AnUnknownJobIsNotFound) { EXPECT_EQ(Run({"logs", "j-2"}), kExitNotFound); }

TEST_F(LogsTest, AWorkerThatFailsMidStreamFailsTheCommand) {
  agents_.logs["127.0.0.2:7071"] = {"partial\n"};
  agents_.end = absl::UnavailableError("connection reset");
  EXPECT_EQ(Run({"logs", "j-1"}), kExitUnreachable);
  EXPECT_EQ(out_.str(), "partial\n");
  EXPECT_THAT(err_.str(), HasSubstr("from the worker at 127.0.0.2:7071: connection reset"));
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
  EXPECT_THAT(Usage(Verb::kLogs), HasSubstr("logs ID [--rank R] [--attempt N] [-f]"));
}

}  // namespace
}  // namespace ringmaster::cli
