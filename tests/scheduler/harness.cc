#include "scheduler/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/bearer_token.h"
#include "common/net.h"
#include "gtest/gtest.h"
#include "support/test_tokens.h"
#include "support/wait_for.h"

namespace ringmaster::test {

bool PortOpen(const std::string& addr) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(addr, "addr", &host, &port).ok()) return false;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  bool open = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  close(fd);
  return open;
}

absl::StatusOr<std::unique_ptr<SchedulerProcess>> SchedulerProcess::Start(
    const std::string& postgres_url, const std::string& redis_addr, int heartbeat_timeout_ms,
    std::vector<std::string> extra_args) {
  auto p = Create(postgres_url, redis_addr, heartbeat_timeout_ms);
  if (!p.ok()) return p.status();
  (*p)->extra_args_ = std::move(extra_args);
  if (auto s = (*p)->Launch(); !s.ok()) return s;
  return p;
}

absl::StatusOr<std::unique_ptr<SchedulerProcess>> SchedulerProcess::StartStandby(
    const std::string& postgres_url, const std::string& redis_addr) {
  auto p = Create(postgres_url, redis_addr, 1500);
  if (!p.ok()) return p.status();
  if (auto s = (*p)->Spawn(); !s.ok()) return s;
  return p;
}

absl::StatusOr<std::unique_ptr<SchedulerProcess>> SchedulerProcess::Create(
    const std::string& postgres_url, const std::string& redis_addr, int heartbeat_timeout_ms) {
  auto p = std::unique_ptr<SchedulerProcess>(new SchedulerProcess());
  p->postgres_url_ = postgres_url;
  p->redis_addr_ = redis_addr;
  p->heartbeat_timeout_ms_ = heartbeat_timeout_ms;
  auto port = PickFreePort();
  if (!port.ok()) return port.status();
  auto metrics = PickFreePort();
  if (!metrics.ok()) return metrics.status();
  p->addr_ = absl::StrCat("127.0.0.1:", *port);
  p->metrics_port_ = *metrics;
  p->log_path_ = absl::StrCat(::testing::TempDir(), "scheduler-", getpid(), "-", *port, ".log");
  return p;
}

SchedulerProcess::~SchedulerProcess() {
  if (process_) (void)process_->Stop();
}

absl::Status SchedulerProcess::Launch() {
  if (auto s = Spawn(); !s.ok()) return s;
  return WaitServing();
}

absl::Status SchedulerProcess::Spawn() {
  SubprocessOptions options;
  options.argv = {RINGMASTER_BINARY_DIR "/services/scheduler/ringmaster-scheduler",
                  "--listen", addr_,
                  "--metrics-listen", absl::StrCat("127.0.0.1:", metrics_port_),
                  "--postgres-url", postgres_url_,
                  "--redis-addr", redis_addr_,
                  "--heartbeat-timeout-ms", std::to_string(heartbeat_timeout_ms_),
                  "--heartbeat-interval-ms", "200",
                  "--pass-interval-ms", "100",
                  // A killed scheduler's lease passes on within a second (Restart, standbys).
                  "--lease-ttl-ms", "1000",
                  // The pre-run check costs every job start about half a second: it is off
                  // here and on in the tests of the check (extra_args: --health-check true).
                  "--health-check", "false"};
  for (const std::string& flag : TestCerts::Get().Scheduler().Flags()) options.argv.push_back(flag);
  options.argv.push_back("--admin-token-file");
  options.argv.push_back(AdminToken().file);
  options.argv.push_back("--secrets-key-file");
  options.argv.push_back(SecretsKeyFile());
  options.argv.insert(options.argv.end(), extra_args_.begin(), extra_args_.end());
  options.log_path = log_path_;
  auto process = Subprocess::Start(options);
  if (!process.ok()) return process.status();
  process_ = *std::move(process);
  // The test as a user: verifies the scheduler, has no certificate of its own, holds the
  // admin token.
  channel_ = CreateChannelWithToken(addr_, *MakeChannelCredentials(TestCerts::Get().CaOnly()),
                                    AdminToken().token);
  jobs_ = v1::JobService::NewStub(channel_);
  cluster_ = v1::ClusterService::NewStub(channel_);
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> SchedulerProcess::WorkerChannel(const std::string& worker_id) const {
  return ChannelWith(TestCerts::Get().Worker(worker_id).Options());
}

std::shared_ptr<grpc::Channel> SchedulerProcess::ChannelWith(const TlsOptions& tls) const {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(tls);
  if (!credentials.ok()) {
    ADD_FAILURE() << credentials.status();
    credentials = grpc::InsecureChannelCredentials();
  }
  return CreateChannelWithToken(addr_, *credentials, AdminToken().token);
}

absl::Status SchedulerProcess::WaitServing(std::chrono::milliseconds timeout) {
  // A plain TCP probe first: a gRPC channel that met a refused connection backs off for
  // seconds, long after the server is up.
  bool listening = WaitFor([&] { return !process_->Running() || PortOpen(addr_); },
                           timeout, std::chrono::milliseconds(20));
  bool up = listening && WaitFor(
      [&] {
        if (!process_->Running()) return true;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
        v1::ListWorkersResponse resp;
        return cluster_->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).ok();
      },
      std::chrono::seconds(30), std::chrono::milliseconds(50));
  if (!up || !process_->Running()) {
    return absl::UnavailableError(absl::StrCat("scheduler did not start:\n", process_->LogTail()));
  }
  return absl::OkStatus();
}

absl::Status SchedulerProcess::Restart(int signal) {
  if (auto s = process_->Kill(signal); !s.ok()) return s;
  (void)process_->Wait(std::chrono::seconds(10));
  process_.reset();
  return Launch();
}

TestWorker::TestWorker(std::shared_ptr<grpc::Channel> channel, v1::RegisterWorker registration)
    : channel_(std::move(channel)), registration_(std::move(registration)) {
  stub_ = v1::WorkerService::NewStub(channel_);
  heartbeat_ = std::thread([this] {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      bool up;
      {
        std::lock_guard<std::mutex> lock(mu_);
        up = registered_;
      }
      if (up && !paused_) {
        v1::WorkerMessage msg;
        msg.mutable_heartbeat();
        Send(msg);
      }
    }
  });
}

TestWorker::~TestWorker() {
  stop_ = true;
  Disconnect();
  heartbeat_.join();
}

bool TestWorker::Connect(std::chrono::milliseconds timeout) {
  Disconnect();
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.clear();
  }
  ctx_ = std::make_unique<grpc::ClientContext>();
  stream_ = stub_->Connect(ctx_.get());
  v1::WorkerMessage reg;
  *reg.mutable_register_() = registration_;
  Send(reg);
  reader_ = std::thread([this] { ReadLoop(); });
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return registered_; });
}

void TestWorker::Disconnect() {
  if (ctx_) ctx_->TryCancel();
  if (reader_.joinable()) reader_.join();
  std::lock_guard<std::mutex> lock(write_mu_);
  stream_.reset();
  ctx_.reset();
}

void TestWorker::ReadLoop() {
  v1::SchedulerMessage msg;
  while (stream_->Read(&msg)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (msg.has_registered()) registered_ = true;
    inbox_.push_back(msg);
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  registered_ = false;
  cv_.notify_all();
}

void TestWorker::Send(const v1::WorkerMessage& msg) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (stream_) stream_->Write(msg);
}

void TestWorker::ReportStarted(const std::string& job_id, int attempt, int rank) {
  v1::WorkerMessage msg;
  auto* s = msg.mutable_rank_status();
  s->set_job_id(job_id);
  s->set_attempt(attempt);
  s->set_rank(rank);
  s->set_kind(v1::RankStatus::KIND_STARTED);
  Send(msg);
}

void TestWorker::ReportExited(const std::string& job_id, int attempt, int rank, int exit_code) {
  v1::WorkerMessage msg;
  auto* s = msg.mutable_rank_status();
  s->set_job_id(job_id);
  s->set_attempt(attempt);
  s->set_rank(rank);
  s->set_kind(v1::RankStatus::KIND_EXITED);
  s->set_exit_code(exit_code);
  Send(msg);
}

absl::StatusOr<v1::Assignment> TestWorker::WaitAssignment(const std::string& job_id,
                                                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  v1::Assignment found;
  bool ok = cv_.wait_for(lock, timeout, [&] {
    for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
      if (it->has_assignment() && it->assignment().job_id() == job_id) {
        found = it->assignment();
        inbox_.erase(it);
        return true;
      }
    }
    return false;
  });
  if (!ok) return absl::DeadlineExceededError(absl::StrCat(id(), ": no assignment of ", job_id));
  return found;
}

absl::StatusOr<v1::StopJob> TestWorker::WaitStop(const std::string& job_id,
                                                 std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  v1::StopJob found;
  bool ok = cv_.wait_for(lock, timeout, [&] {
    for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
      if (it->has_stop() && it->stop().job_id() == job_id) {
        found = it->stop();
        inbox_.erase(it);
        return true;
      }
    }
    return false;
  });
  if (!ok) return absl::DeadlineExceededError(absl::StrCat(id(), ": no stop of ", job_id));
  return found;
}

v1::RegisterWorker CpuWorker(const std::string& id, const std::string& address, int slots) {
  v1::RegisterWorker r;
  r.set_worker_id(id);
  r.set_address(address);
  r.set_port(7071);
  r.set_cpu_slots(slots);
  return r;
}

v1::RegisterWorker GpuWorker(const std::string& id, const std::string& address, int gpus,
                             const std::string& type) {
  v1::RegisterWorker r = CpuWorker(id, address, 0);
  for (int i = 0; i < gpus; ++i) {
    v1::Gpu* g = r.add_gpus();
    g->set_index(i);
    g->set_type(type);
    g->set_memory_bytes(16LL << 30);
    g->set_simulated(true);
  }
  return r;
}

v1::JobSpec TrainerSpec(const std::string& name, int replicas, int gpus_per_replica,
                        const std::string& gpu_type) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_replicas(replicas);
  spec.set_gpus_per_replica(gpus_per_replica);
  spec.set_gpu_type(gpu_type);
  spec.mutable_trainer()->set_steps(10);
  return spec;
}

v1::Job WaitForState(v1::JobService::Stub& jobs, const std::string& job_id, v1::JobState state,
                     std::chrono::milliseconds timeout) {
  v1::Job job;
  WaitFor(
      [&] {
        grpc::ClientContext ctx;
        v1::GetJobRequest req;
        req.set_job_id(job_id);
        if (!jobs.GetJob(&ctx, req, &job).ok()) return false;
        return job.state() == state || job.state() >= v1::JOB_STATE_SUCCEEDED;
      },
      timeout, std::chrono::milliseconds(20));
  return job;
}

}  // namespace ringmaster::test
