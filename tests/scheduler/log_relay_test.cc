// Where the scheduler looks for a rank's log (core/log_sources.h) and its relay
// (rpc/log_relay.h) against fake agents: the placed worker only for the current attempt, every
// known worker otherwise, failures and the bound on concurrent relays.
#include "scheduler/rpc/log_relay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "scheduler/core/log_sources.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Job RunningJob() {
  Job job;
  job.id = "j-1";
  job.spec.replicas = 4;
  job.attempt = 1;
  job.state = JobState::kRunning;
  for (int32_t r = 0; r < 4; ++r) {
    RankPlacement p;
    p.rank = r;
    p.worker_id = r < 2 ? "w2" : "w3";
    p.worker_address = r < 2 ? "127.0.0.2" : "127.0.0.3";
    p.worker_port = 7071;
    job.placement.push_back(p);
  }
  return job;
}

std::vector<Worker> Workers() {
  std::vector<Worker> workers;
  for (const char* id : {"w4", "w2", "w3"}) {
    Worker w;
    w.id = id;
    w.address = std::string("127.0.0.") + id[1];
    w.port = 7071;
    workers.push_back(w);
  }
  return workers;
}

// Agents by address: the log each has (NOT_FOUND for the others), how each ends, and the reads.
class FakeAgents : public AgentLogReader {
 public:
  absl::Status Read(const std::string& address, const v1::ReadLogsRequest& request,
                    const grpc::ServerContext*,
                    const std::function<bool(const v1::LogChunk&)>& on_chunk) override {
    std::unique_lock<std::mutex> lock(mu);
    asked.emplace_back(address, request);
    if (hold) {
      ++held;
      cv.notify_all();
      cv.wait(lock, [&] { return !hold; });
    }
    auto it = logs.find(address);
    if (it == logs.end()) {
      auto e = ends.find(address);
      return e != ends.end() ? e->second : absl::NotFoundError("no log here");
    }
    v1::LogChunk chunk;
    chunk.set_data(it->second);
    chunk.set_attempt(request.attempt());
    if (!on_chunk(chunk)) return absl::CancelledError("caller gone");
    auto e = ends.find(address);
    return e != ends.end() ? e->second : absl::OkStatus();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  int held = 0;
  std::map<std::string, std::string> logs;
  std::map<std::string, absl::Status> ends;
  std::vector<std::pair<std::string, v1::ReadLogsRequest>> asked;
};

class LogRelayTest : public ::testing::Test {
 protected:
  absl::Status Relay(const Job& job, int32_t rank, std::optional<int32_t> attempt,
                     bool follow = false) {
    absl::StatusOr<LogPlan> plan = PlanLogRead(job, rank, attempt, Workers());
    if (!plan.ok()) return plan.status();
    return relay_.Relay(*plan, follow, nullptr, [&](const v1::LogChunk& chunk) {
      out_ += chunk.data();
      return true;
    });
  }
  std::vector<std::string> Asked() {
    std::vector<std::string> out;
    for (const auto& [address, request] : agents_.asked) out.push_back(address);
    return out;
  }

  FakeAgents agents_;
  LogRelay relay_{&agents_, 2};
  std::string out_;
};

TEST_F(LogRelayTest, TheCurrentAttemptIsReadFromTheWorkerItIsPlacedOn) {
  agents_.logs["127.0.0.3:7071"] = "rank 2 on w3\n";
  ASSERT_TRUE(Relay(RunningJob(), 2, std::nullopt, /*follow=*/true).ok());
  EXPECT_EQ(out_, "rank 2 on w3\n");
  ASSERT_THAT(Asked(), ElementsAre("127.0.0.3:7071"));
  const v1::ReadLogsRequest& req = agents_.asked[0].second;
  EXPECT_EQ(req.job_id(), "j-1");
  EXPECT_EQ(req.rank(), 2);
  EXPECT_EQ(req.attempt(), 1);
  EXPECT_TRUE(req.follow());
}

TEST_F(LogRelayTest, AnEndedJobIsLookedForOnEveryWorkerById) {
  Job job = RunningJob();
  job.placement.clear();
  job.state = JobState::kSucceeded;
  agents_.logs["127.0.0.4:7071"] = "ran on w4\n";
  ASSERT_TRUE(Relay(job, 3, std::nullopt).ok());
  EXPECT_EQ(out_, "ran on w4\n");
  EXPECT_THAT(Asked(), ElementsAre("127.0.0.2:7071", "127.0.0.3:7071", "127.0.0.4:7071"));
  for (const auto& [address, req] : agents_.asked) EXPECT_EQ(req.attempt(), 1) << address;
}

TEST_F(LogRelayTest, AnEarlierAttemptIsLookedForOnEveryWorker) {
  agents_.logs["127.0.0.4:7071"] = "attempt 0 output\n";
  ASSERT_TRUE(Relay(RunningJob(), 0, 0).ok());
  EXPECT_EQ(out_, "attempt 0 output\n");
  EXPECT_EQ(agents_.asked.back().second.attempt(), 0);
}

TEST_F(LogRelayTest, RankAndAttemptOutsideTheJobAreInvalidAndNoWorkerIsAsked) {
  absl::Status s = Relay(RunningJob(), 4, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "rank: job j-1 has 4 ranks (0..3), got 4");
  s = Relay(RunningJob(), -1, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = Relay(RunningJob(), 0, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "attempt: job j-1 has attempts 0..1, got 2");
  EXPECT_EQ(Relay(RunningJob(), 0, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(agents_.asked.empty());
}

TEST_F(LogRelayTest, NoLogAnywhereIsNotFoundAndAPendingJobSaysWhy) {
  Job job = RunningJob();
  job.placement.clear();
  absl::Status s = Relay(job, 0, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no worker has a log of job j-1 rank 0 attempt 1");
  job.state = JobState::kPending;
  s = Relay(job, 0, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("the job is PENDING: that attempt has not started"));
}

TEST_F(LogRelayTest, AWorkerThatFailsMidStreamEndsTheRead) {
  agents_.logs["127.0.0.2:7071"] = "partial\n";
  agents_.ends["127.0.0.2:7071"] = absl::UnavailableError("connection reset");
  Job job = RunningJob();
  job.placement.clear();
  absl::Status s = Relay(job, 0, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "reading the log of job j-1 rank 0 attempt 1 from worker w2 at 127.0.0.2:7071: "
            "connection reset");
  EXPECT_EQ(out_, "partial\n");
  EXPECT_THAT(Asked(), ElementsAre("127.0.0.2:7071"));  // not the others
}

TEST_F(LogRelayTest, AnUnreachableWorkerIsPassedOverAndNotFoundIsTheBetterAnswer) {
  Job job = RunningJob();
  job.placement.clear();
  agents_.ends["127.0.0.2:7071"] = absl::UnavailableError("connection refused");
  absl::Status s = Relay(job, 0, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_EQ(Asked().size(), 3u);
  // All of them down: UNAVAILABLE, saying why.
  agents_.ends["127.0.0.3:7071"] = absl::UnavailableError("connection refused");
  agents_.ends["127.0.0.4:7071"] = absl::UnavailableError("connection refused");
  s = Relay(job, 0, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("connection refused"));
}

TEST_F(LogRelayTest, AnAgentsRefusalIsTheSchedulersProblemNotTheCallersRight) {
  agents_.ends["127.0.0.2:7071"] =
      absl::PermissionDeniedError("ReadLogs is served only to a caller whose certificate ...");
  absl::Status s = Relay(RunningJob(), 0, std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("--log-reader-names"));
}

TEST_F(LogRelayTest, TheCallerGoingAwayEndsTheRelay) {
  agents_.logs["127.0.0.2:7071"] = "x";
  absl::StatusOr<LogPlan> plan = PlanLogRead(RunningJob(), 0, std::nullopt, Workers());
  ASSERT_TRUE(plan.ok());
  absl::Status s = relay_.Relay(*plan, true, nullptr, [](const v1::LogChunk&) { return false; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(relay_.active(), 0);
}

TEST_F(LogRelayTest, RelaysBeyondTheBoundAreResourceExhaustedBeforeAnyAgentIsAsked) {
  agents_.logs["127.0.0.2:7071"] = "x";
  {
    std::lock_guard<std::mutex> lock(agents_.mu);
    agents_.hold = true;
  }
  std::vector<std::thread> holders;
  for (int i = 0; i < 2; ++i) {
    holders.emplace_back([&] {
      absl::StatusOr<LogPlan> plan = PlanLogRead(RunningJob(), 0, std::nullopt, Workers());
      (void)relay_.Relay(*plan, true, nullptr, [](const v1::LogChunk&) { return true; });
    });
  }
  {
    std::unique_lock<std::mutex> lock(agents_.mu);
    agents_.cv.wait(lock, [&] { return agents_.held == 2; });
  }
  absl::StatusOr<LogPlan> plan = PlanLogRead(RunningJob(), 0, std::nullopt, Workers());
  absl::Status s = relay_.Relay(*plan, true, nullptr, [](const v1::LogChunk&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("--max-log-relays"));
  {
    std::lock_guard<std::mutex> lock(agents_.mu);
    EXPECT_EQ(agents_.asked.size(), 2u);
    agents_.hold = false;
  }
  agents_.cv.notify_all();
  for (std::thread& t : holders) t.join();
  EXPECT_EQ(relay_.active(), 0);
  EXPECT_TRUE(relay_.Relay(*plan, false, nullptr, [](const v1::LogChunk&) { return true; }).ok());
}

}  // namespace
}  // namespace ringmaster::scheduler
