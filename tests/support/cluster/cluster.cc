#include "support/cluster/cluster.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "gtest/gtest.h"
#include "support/proc_file.h"
#include "support/test_certs.h"
#include "support/wait_for.h"

namespace ringmaster::test {

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(
    const WorkerConfig& config, const std::string& scheduler_addr, const std::string& log_dir) {
  auto w = std::unique_ptr<WorkerProcess>(new WorkerProcess());
  w->config_ = config;
  w->log_dir_ = log_dir;
  auto port = PickFreePort(config.address);
  if (!port.ok()) return port.status();
  auto metrics = PickFreePort();
  if (!metrics.ok()) return metrics.status();
  w->port_ = *port;
  w->metrics_port_ = *metrics;
  SubprocessOptions options;
  options.argv = {RINGMASTER_BINARY_DIR "/services/worker/ringmaster-worker",
                  "--worker-id",
                  config.id,
                  "--address",
                  config.address,
                  "--listen",
                  w->agent_addr(),
                  "--metrics-listen",
                  absl::StrCat("127.0.0.1:", *metrics),
                  "--scheduler",
                  scheduler_addr,
                  "--cpu-slots",
                  absl::StrCat(config.cpu_slots),
                  "--log-dir",
                  log_dir,
                  "--train-binary",
                  RINGMASTER_BINARY_DIR "/trainer/ringmaster-train",
                  "--kill-grace-ms",
                  "2000",
                  "--exec-wait-ms",
                  "2000"};
  for (const std::string& flag : TestCerts::Get().Worker(config.id).Flags()) {
    options.argv.push_back(flag);
  }
  if (config.simulated_gpus > 0) {
    options.argv.insert(options.argv.end(), {"--simulate-gpus", absl::StrCat(config.simulated_gpus),
                                             "--simulate-gpu-type", "t4"});
  }
  if (!config.metrics_service.empty()) {
    options.argv.insert(options.argv.end(), {"--metrics-service", config.metrics_service});
  }
  options.argv.insert(options.argv.end(), config.extra_args.begin(), config.extra_args.end());
  options.log_path = log_dir + ".log";
  auto process = Subprocess::Start(options);
  if (!process.ok()) return process.status();
  w->process_ = *std::move(process);
  return w;
}

WorkerProcess::~WorkerProcess() { Stop(); }

std::string WorkerProcess::agent_addr() const { return absl::StrCat(config_.address, ":", port_); }

void WorkerProcess::Stop() {
  if (process_ && process_->Running()) (void)process_->Stop(std::chrono::seconds(10));
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(const std::string& pg_admin_url,
                                                        std::vector<std::string> scheduler_args) {
  auto c = std::unique_ptr<Cluster>(new Cluster());
  std::string templ = ::testing::TempDir() + "ringmaster-e2e-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  c->dir_ = templ;
  auto db = pg_admin_url.empty() ? TestDatabase::Create() : TestDatabase::CreateOn(pg_admin_url);
  if (!db.ok()) return db.status();
  c->db_ = *std::move(db);
  auto redis = RedisServer::StartNew();
  if (!redis.ok()) return redis.status();
  c->redis_ = *std::move(redis);
  // Real workers, rank processes and a parallel ctest share two cores in CI: a heartbeat
  // timeout of 3 s keeps a busy moment from reading as a lost worker.
  auto scheduler =
      SchedulerProcess::Start(c->db_->url(), c->redis_->addr(), 3000, std::move(scheduler_args));
  if (!scheduler.ok()) return scheduler.status();
  c->scheduler_ = *std::move(scheduler);
  return c;
}

Cluster::~Cluster() {
  // Workers first, gracefully: they stop their job processes on the way out.
  for (auto& w : workers_) w->Stop();
  workers_.clear();
  scheduler_.reset();
}

absl::Status Cluster::AddWorker(const WorkerConfig& config) {
  auto w = WorkerProcess::Start(config, scheduler_->addr(), absl::StrCat(dir_, "/", config.id));
  if (!w.ok()) return w.status();
  workers_.push_back(*std::move(w));
  return absl::OkStatus();
}

absl::Status Cluster::AddWorkers(const WorkerSet& set) {
  for (int i = 0; i < set.count; ++i) {
    WorkerConfig config;
    config.id = absl::StrCat(set.prefix, set.first + i, "-", getpid());
    config.address = absl::StrCat("127.0.0.", set.first_address + i);
    config.cpu_slots = set.cpu_slots;
    config.simulated_gpus = set.simulated_gpus;
    config.extra_args = set.extra_args;
    if (absl::Status added = AddWorker(config); !added.ok()) return added;
  }
  return WaitWorkersReady(static_cast<int>(workers_.size()));
}

absl::Status Cluster::WaitWorkersReady(int n, std::chrono::milliseconds timeout) {
  int ready = 0;
  bool ok = WaitFor(
      [&] {
        grpc::ClientContext ctx;
        v1::ListWorkersResponse resp;
        if (!scheduler_->cluster().ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).ok()) {
          return false;
        }
        ready = 0;
        for (const auto& w : resp.workers()) ready += w.state() == "READY";
        return ready >= n;
      },
      timeout, std::chrono::milliseconds(50));
  if (!ok) return absl::DeadlineExceededError(absl::StrCat(ready, " of ", n, " workers ready"));
  return absl::OkStatus();
}

absl::Status Cluster::RestartWorker(const std::string& id) {
  for (auto& w : workers_) {
    if (w->config().id != id) continue;
    const WorkerConfig config = w->config();
    w->Stop();
    auto fresh = WorkerProcess::Start(config, scheduler_->addr(), w->log_dir());
    if (!fresh.ok()) return fresh.status();
    w = *std::move(fresh);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no worker ", id));
}

std::vector<v1::Job> Cluster::LiveJobs() {
  std::vector<v1::Job> live;
  for (v1::JobState state :
       {v1::JOB_STATE_PENDING, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING}) {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    req.set_state(state);
    v1::ListJobsResponse resp;
    if (!scheduler_->jobs().ListJobs(&ctx, req, &resp).ok()) continue;
    for (const v1::Job& job : resp.jobs()) live.push_back(job);
  }
  return live;
}

WorkerProcess* Cluster::worker(const std::string& id) {
  for (auto& w : workers_) {
    if (w->config().id == id) return w.get();
  }
  return nullptr;
}

absl::StatusOr<std::string> Cluster::Submit(const v1::JobSpec& spec) {
  grpc::ClientContext ctx;
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  // Tests submit from several threads at once: a plain int would hand two of them one id,
  // and the scheduler would (rightly) answer both with one job.
  static std::atomic<int> counter{0};
  req.set_request_id(absl::StrCat("e2e-", getpid(), "-", ++counter));
  v1::SubmitJobResponse resp;
  grpc::Status s = scheduler_->jobs().SubmitJob(&ctx, req, &resp);
  if (!s.ok())
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return resp.job().id();
}

absl::StatusOr<v1::Job> Cluster::GetJob(const std::string& id) {
  grpc::ClientContext ctx;
  v1::GetJobRequest req;
  req.set_job_id(id);
  v1::Job job;
  grpc::Status s = scheduler_->jobs().GetJob(&ctx, req, &job);
  if (!s.ok())
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return job;
}

absl::Status Cluster::Cancel(const std::string& id) {
  grpc::ClientContext ctx;
  v1::CancelJobRequest req;
  req.set_job_id(id);
  req.set_reason("e2e test");
  v1::CancelJobResponse resp;
  grpc::Status s = scheduler_->jobs().CancelJob(&ctx, req, &resp);
  if (!s.ok())
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return absl::OkStatus();
}

absl::StatusOr<v1::QueueWithStatus> Cluster::CreateQueue(const v1::Queue& queue) {
  grpc::ClientContext ctx;
  v1::CreateQueueRequest req;
  *req.mutable_queue() = queue;
  v1::QueueWithStatus resp;
  grpc::Status s = v1::QueueService::NewStub(scheduler_->channel())->CreateQueue(&ctx, req, &resp);
  if (!s.ok())
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return resp;
}

absl::Status Cluster::CreateCohortQueues(const std::vector<std::string>& names,
                                         const std::string& cohort, const std::string& gpu_type,
                                         int64_t nominal) {
  for (const std::string& name : names) {
    v1::Queue queue;
    queue.set_name(name);
    queue.set_cohort(cohort);
    queue.set_reclaim_within_cohort(v1::RECLAIM_WITHIN_COHORT_ANY);
    (*queue.mutable_resources())[gpu_type].set_nominal(nominal);
    if (absl::StatusOr<v1::QueueWithStatus> made = CreateQueue(queue); !made.ok()) {
      return made.status();
    }
  }
  return absl::OkStatus();
}

v1::Job Cluster::WaitState(const std::string& id, v1::JobState state,
                           std::chrono::milliseconds timeout) {
  return WaitForState(scheduler_->jobs(), id, state, timeout);
}

absl::StatusOr<v1::Job> Cluster::WaitPlaced(const std::string& id, int attempt,
                                            std::chrono::milliseconds timeout) {
  v1::Job job;
  bool ok = WaitFor(
      [&] {
        auto got = GetJob(id);
        if (!got.ok()) return false;
        job = *got;
        return (job.attempt() == attempt && job.placement_size() > 0) ||
               job.state() >= v1::JOB_STATE_SUCCEEDED;
      },
      timeout, std::chrono::milliseconds(20));
  if (!ok || job.placement_size() == 0) {
    return absl::DeadlineExceededError(absl::StrCat(
        "job ", id, " attempt ", attempt, " not placed; last seen: ", job.ShortDebugString()));
  }
  return job;
}

std::vector<v1::JobEvent> Cluster::Events(const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::WatchJobRequest req;
  req.set_job_id(id);
  auto reader = scheduler_->jobs().WatchJob(&ctx, req);
  std::vector<v1::JobEvent> events;
  v1::JobEvent e;
  while (reader->Read(&e)) events.push_back(e);
  (void)reader->Finish();
  return events;
}

absl::StatusOr<std::string> Cluster::RankLog(const std::string& agent_addr,
                                             const std::string& job_id, int rank, int attempt,
                                             const CertFiles* as) {
  const CertFiles cert = as != nullptr ? *as : TestCerts::Get().Scheduler();
  auto stub = v1::WorkerAgent::NewStub(grpc::CreateChannel(
      agent_addr, *MakeChannelCredentials(cert.Options(), ServerName::kAnyOfTheCa)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ReadLogsRequest req;
  req.set_job_id(job_id);
  req.set_rank(rank);
  if (attempt >= 0) req.set_attempt(attempt);
  auto reader = stub->ReadLogs(&ctx, req);
  std::string text;
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) text += chunk.data();
  grpc::Status s = reader->Finish();
  if (!s.ok())
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return text;
}

std::string Cluster::Metrics(const WorkerProcess& worker) {
  return HttpGet(worker.metrics_port(), "/metrics");
}

std::string Cluster::Logs() const {
  std::string out = absl::StrCat("---- scheduler ----\n", scheduler_ ? scheduler_->LogTail() : "");
  for (const auto& w : workers_) {
    absl::StrAppend(&out, "\n---- worker ", w->config().id, " ----\n", w->LogTail());
  }
  return out;
}

namespace {

std::map<std::string, std::string> Environ(pid_t pid) {
  const std::string data = ReadProcFile(absl::StrCat("/proc/", pid, "/environ"));
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start < data.size()) {
    size_t end = data.find('\0', start);
    if (end == std::string::npos) end = data.size();
    std::string entry = data.substr(start, end - start);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
    start = end + 1;
  }
  return env;
}

bool IsZombie(pid_t pid) {
  const std::string text = ReadProcFile(absl::StrCat("/proc/", pid, "/stat"));
  auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] == 'Z';
}

}  // namespace

std::vector<pid_t> ProcessesWithEnv(const std::map<std::string, std::string>& want,
                                    const std::string& name) {
  std::vector<pid_t> found;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return found;
  while (dirent* entry = readdir(dir)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid == getpid()) continue;
    std::map<std::string, std::string> env = Environ(pid);
    bool match = !env.empty() && (name.empty() || env.count(name) > 0);
    for (const auto& [k, v] : want) {
      auto it = env.find(k);
      match = match && it != env.end() && it->second == v;
    }
    if (match && !IsZombie(pid)) found.push_back(pid);
  }
  closedir(dir);
  return found;
}

std::string EnvOfProcess(pid_t pid, const std::string& name) {
  auto env = Environ(pid);
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

}  // namespace ringmaster::test
