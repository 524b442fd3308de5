// GrpcSchedulerClient against an in-process gRPC server that plays the scheduler.
#include "client.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "app.h"
#include "loopback_server.h"

namespace ringmaster::cli {
namespace {

class FakeJobService final : public v1::JobService::Service {
 public:
  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    request_ids_.push_back(request->request_id());
    if (unavailable_submits_ > 0) {
      --unavailable_submits_;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "leader changing");
    }
    if (request->spec().replicas() > 4096) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "replicas: must be 1..4096, got 5000");
    }
    response->mutable_job()->set_id("j-1");
    response->mutable_job()->set_request_id(request->request_id());
    return grpc::Status::OK;
  }
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::Job* job) override {
    if (request->job_id() == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (request->job_id() != "j-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "job " + request->job_id() + " not found");
    }
    job->set_id("j-1");
    job->set_state(v1::JOB_STATE_RUNNING);
    return grpc::Status::OK;
  }
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override {
    v1::Job* job = response->add_jobs();
    job->set_id("j-1");
    job->mutable_spec()->set_queue(request->queue());
    return grpc::Status::OK;
  }
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override {
    response->mutable_job()->set_id(request->job_id());
    response->mutable_job()->set_message(request->reason());
    response->mutable_job()->set_state(v1::JOB_STATE_CANCELLED);
    return grpc::Status::OK;
  }
  grpc::Status WatchJob(grpc::ServerContext*, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    for (auto state : {v1::JOB_STATE_PENDING, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED}) {
      v1::JobEvent event;
      event.set_job_id(request->job_id());
      event.set_seq(state);
      event.set_state(state);
      writer->Write(event);
    }
    return grpc::Status::OK;
  }

  void FailNextSubmits(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    unavailable_submits_ = n;
  }
  std::vector<std::string> request_ids() {
    std::lock_guard<std::mutex> lock(mu_);
    return request_ids_;
  }

 private:
  std::mutex mu_;
  int unavailable_submits_ = 0;
  std::vector<std::string> request_ids_;
};

class FakeClusterService final : public v1::ClusterService::Service {
 public:
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*,
                           v1::ListWorkersResponse* response) override {
    response->add_workers()->set_worker_id("w1");
    return grpc::Status::OK;
  }
};

class GrpcClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartLoopbackServer({&jobs_, &cluster_}, &address_);
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  FakeJobService jobs_;
  FakeClusterService cluster_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(GrpcClientTest, UnaryCallsRoundTrip) {
  GrpcSchedulerClient client(address_, grpc::InsecureChannelCredentials());
  v1::GetJobRequest get;
  get.set_job_id("j-1");
  absl::StatusOr<v1::Job> job = client.GetJob(get);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);

  v1::ListJobsRequest list;
  list.set_queue("vision");
  absl::StatusOr<v1::ListJobsResponse> jobs = client.ListJobs(list);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->jobs(0).spec().queue(), "vision");

  v1::CancelJobRequest cancel;
  cancel.set_job_id("j-1");
  cancel.set_reason("done");
  absl::StatusOr<v1::CancelJobResponse> cancelled = client.CancelJob(cancel);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->job().message(), "done");

  absl::StatusOr<v1::ListWorkersResponse> workers = client.ListWorkers(v1::ListWorkersRequest());
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_EQ(workers->workers(0).worker_id(), "w1");
}

TEST_F(GrpcClientTest, ServerCodesAndMessagesComeThroughUnchanged) {
  GrpcSchedulerClient client(address_, grpc::InsecureChannelCredentials());
  v1::GetJobRequest get;
  get.set_job_id("j-404");
  absl::StatusOr<v1::Job> job = client.GetJob(get);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(job.status().message(), "job j-404 not found");
}

TEST_F(GrpcClientTest, UnaryCallsHonourTheDeadline) {
  GrpcSchedulerClient client(address_, grpc::InsecureChannelCredentials(), std::chrono::milliseconds(100));
  v1::GetJobRequest get;
  get.set_job_id("slow");
  EXPECT_EQ(client.GetJob(get).status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(GrpcClientTest, WatchStreamsEveryEventThenEnds) {
  GrpcSchedulerClient client(address_, grpc::InsecureChannelCredentials());
  v1::WatchJobRequest watch;
  watch.set_job_id("j-1");
  std::vector<v1::JobState> states;
  absl::Status status = client.WatchJob(
      watch, [&states](const v1::JobEvent& event) { states.push_back(event.state()); });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(states, ::testing::ElementsAre(v1::JOB_STATE_PENDING, v1::JOB_STATE_RUNNING,
                                             v1::JOB_STATE_SUCCEEDED));
}

TEST_F(GrpcClientTest, SubmitRetrySendsTheSameRequestIdOverTheWire) {
  jobs_.FailNextSubmits(2);
  GrpcSchedulerClient client(address_, grpc::InsecureChannelCredentials());
  v1::SubmitJobRequest request;
  request.set_request_id("0123456789abcdef0123456789abcdef");
  request.mutable_spec()->set_name("x");
  int sleeps = 0;
  absl::StatusOr<v1::SubmitJobResponse> response = SubmitWithRetry(
      client, request, RetryPolicy{}, [&sleeps](std::chrono::milliseconds) { ++sleeps; });
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->job().request_id(), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(sleeps, 2);
  EXPECT_THAT(jobs_.request_ids(), ::testing::Each("0123456789abcdef0123456789abcdef"));
  EXPECT_EQ(jobs_.request_ids().size(), 3u);
}

// A failover: nobody listens at the address for a few seconds (the old scheduler's lease
// running out), then a scheduler serves there again. The submit retries through it and lands
// once; before, it gave up after 4 attempts and 1.75 s.
TEST_F(GrpcClientTest, ASubmitRidesOutASchedulerThatIsAwayForSeconds) {
  const std::string address = address_;
  server_->Shutdown();
  server_.reset();
  std::unique_ptr<grpc::Server> back;
  std::thread restart([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.RegisterService(&jobs_);
    back = builder.BuildAndStart();
  });
  GrpcSchedulerClient client(address, grpc::InsecureChannelCredentials());
  v1::SubmitJobRequest request;
  request.set_request_id("failover-1");
  request.mutable_spec()->set_name("x");
  int attempts = 0;
  absl::StatusOr<v1::SubmitJobResponse> response = SubmitWithRetry(
      client, request, RetryPolicy{},
      [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }, &attempts);
  restart.join();
  ASSERT_NE(back, nullptr) << "the port was taken meanwhile";
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_GT(attempts, 1);
  EXPECT_THAT(jobs_.request_ids(), ::testing::ElementsAre("failover-1"));
  back->Shutdown();
}

TEST_F(GrpcClientTest, RingctlShowsTheSchedulersValidationMessageVerbatim) {
  Runtime runtime = ProcessRuntime();
  runtime.getenv = [](const char*) -> const char* { return nullptr; };
  std::ostringstream out;
  std::ostringstream err;
  // The fake scheduler serves plaintext on loopback, as a development cluster run --insecure.
  int code = RunCli({"submit", "--name", "x", "--replicas", "5000", "--scheduler", address_,
                     "--insecure"},
                    runtime, out, err);
  EXPECT_EQ(code, 2);
  EXPECT_EQ(err.str(), "ringctl: invalid job spec: replicas: must be 1..4096, got 5000\n");
  EXPECT_EQ(out.str(), "");
}

TEST_F(GrpcClientTest, RingctlWatchExitsZeroWhenTheJobSucceeds) {
  Runtime runtime = ProcessRuntime();
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(RunCli({"watch", "j-1", "--scheduler", address_, "--insecure"}, runtime, out, err), 0);
  EXPECT_THAT(out.str(), ::testing::HasSubstr("SUCCEEDED"));
  EXPECT_EQ(err.str(), "");
}

}  // namespace
}  // namespace ringmaster::cli
