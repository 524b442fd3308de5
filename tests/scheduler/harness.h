// Integration harness: a real ringmaster-scheduler process on real PostgreSQL and Redis, gRPC
// stubs to it, and test workers that speak the real worker protocol but whose ranks the test
// drives by hand.
#ifndef RINGMASTER_TESTS_SCHEDULER_HARNESS_H_
#define RINGMASTER_TESTS_SCHEDULER_HARNESS_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/job.grpc.pb.h"
#include "ringmaster/v1/worker.grpc.pb.h"
#include "support/http_get.h"
#include "support/redis_server.h"
#include "support/subprocess.h"
#include "support/test_certs.h"
#include "support/test_database.h"

namespace ringmaster::test {

// One scheduler process; Restart() kills it (SIGKILL by default) and starts it again on the
// same database, Redis and ports.
class SchedulerProcess {
 public:
  // `extra_args` are appended to the command line (e.g. {"--postgres-timeout-ms", "500"}).
  static absl::StatusOr<std::unique_ptr<SchedulerProcess>> Start(
      const std::string& postgres_url, const std::string& redis_addr,
      int heartbeat_timeout_ms = 1500, std::vector<std::string> extra_args = {});
  // Starts one more scheduler on the same database and Redis without waiting for it to serve:
  // it stays a standby while another holds the leader lease.
  static absl::StatusOr<std::unique_ptr<SchedulerProcess>> StartStandby(
      const std::string& postgres_url, const std::string& redis_addr);
  ~SchedulerProcess();
  // Waits until it answers ListWorkers (after it took the leader lease).
  absl::Status WaitServing(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  Subprocess& process() { return *process_; }
  absl::Status Restart(int signal = SIGKILL);
  const std::string& addr() const { return addr_; }
  int metrics_port() const { return metrics_port_; }
  std::string LogTail() const { return process_ ? process_->LogTail() : ""; }
  v1::JobService::Stub& jobs() { return *jobs_; }
  v1::ClusterService::Stub& cluster() { return *cluster_; }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  // A channel that presents `credentials` (default: the certificate of worker `worker_id`), for
  // a TestWorker: the scheduler admits a worker only under a name of its certificate.
  std::shared_ptr<grpc::Channel> WorkerChannel(const std::string& worker_id) const;
  std::shared_ptr<grpc::Channel> ChannelWith(const TlsOptions& tls) const;

 private:
  static absl::StatusOr<std::unique_ptr<SchedulerProcess>> Create(
      const std::string& postgres_url, const std::string& redis_addr, int heartbeat_timeout_ms);
  absl::Status Launch();
  absl::Status Spawn();
  std::string postgres_url_;
  std::string redis_addr_;
  int heartbeat_timeout_ms_ = 1500;
  std::vector<std::string> extra_args_;
  std::string addr_;
  int metrics_port_ = 0;
  std::string log_path_;
  std::unique_ptr<Subprocess> process_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::ClusterService::Stub> cluster_;
};

// A worker driven by the test over the real Connect stream. Heartbeats flow on their own until
// Pause(); the test reports rank starts and exits itself.
class TestWorker {
 public:
  TestWorker(std::shared_ptr<grpc::Channel> channel, v1::RegisterWorker registration);
  ~TestWorker();
  // Opens the stream and registers; true once Registered arrived.
  bool Connect(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Ends the stream (the scheduler sees a disconnect).
  void Disconnect();
  void PauseHeartbeats(bool paused) { paused_ = paused; }
  // True from Registered until the stream ends (either side).
  bool connected() {
    std::lock_guard<std::mutex> lock(mu_);
    return registered_;
  }
  void Send(const v1::WorkerMessage& msg);
  void ReportStarted(const std::string& job_id, int attempt, int rank);
  void ReportExited(const std::string& job_id, int attempt, int rank, int exit_code);
  // Waits for the next assignment / stop of `job_id` (any attempt).
  absl::StatusOr<v1::Assignment> WaitAssignment(const std::string& job_id,
                                                std::chrono::milliseconds timeout);
  absl::StatusOr<v1::StopJob> WaitStop(const std::string& job_id, std::chrono::milliseconds timeout);
  const std::string& id() const { return registration_.worker_id(); }
  v1::RegisterWorker& registration() { return registration_; }

 private:
  void ReadLoop();
  std::shared_ptr<grpc::Channel> channel_;
  v1::RegisterWorker registration_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::SchedulerMessage>> stream_;
  std::mutex write_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::SchedulerMessage> inbox_;
  bool registered_ = false;
  std::atomic<bool> paused_{false};
  std::atomic<bool> stop_{false};
  std::thread reader_;
  std::thread heartbeat_;
};

// True when something accepts TCP connections at HOST:PORT.
bool PortOpen(const std::string& addr);

v1::RegisterWorker CpuWorker(const std::string& id, const std::string& address, int slots);
v1::RegisterWorker GpuWorker(const std::string& id, const std::string& address, int gpus,
                             const std::string& type);

// A minimal valid spec of the built-in trainer.
v1::JobSpec TrainerSpec(const std::string& name, int replicas, int gpus_per_replica = 0,
                        const std::string& gpu_type = "");

// Polls GetJob until `state` (or a terminal state other than it); returns the last job seen.
v1::Job WaitForState(v1::JobService::Stub& jobs, const std::string& job_id, v1::JobState state,
                     std::chrono::milliseconds timeout = std::chrono::seconds(15));

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SCHEDULER_HARNESS_H_
