// A whole Ringmaster cluster of real processes for end-to-end tests: PostgreSQL (a fresh
// database on $RINGMASTER_TEST_PG_URL), a RedisServer, the real scheduler (SchedulerProcess
// from the scheduler's harness) and real ringmaster-worker processes on their own loopback
// addresses (127.0.0.2, .3, ...), plus the probes the tests need: job processes in /proc,
// rank logs, job events, worker metrics.
#ifndef RINGMASTER_TESTS_SUPPORT_CLUSTER_CLUSTER_H_
#define RINGMASTER_TESTS_SUPPORT_CLUSTER_CLUSTER_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/agent.grpc.pb.h"
#include "ringmaster/v1/job.grpc.pb.h"
#include "ringmaster/v1/queue.grpc.pb.h"
#include "scheduler/harness.h"
#include "support/redis_server.h"
#include "support/subprocess.h"
#include "support/test_certs.h"
#include "support/test_database.h"

namespace ringmaster::test {

struct WorkerConfig {
  std::string id;       // "w2"
  std::string address;  // "127.0.0.2"
  int cpu_slots = 2;
  int simulated_gpus = 0;       // of type t4
  std::string metrics_service;  // ringmaster-metrics HOST:PORT for the ranks' samples; empty: none
  std::vector<std::string> extra_args;  // more ringmaster-worker flags
};

// Workers alike but for their number n, counted from `first`: ids `<prefix><n>-<pid>` (unique to
// the run: a worker kills what its id left behind) on 127.0.0.<n - first + first_address>.
struct WorkerSet {
  std::string prefix;  // "w"
  int count = 2;
  int first = 2;
  int first_address = 2;
  int cpu_slots = 2;
  int simulated_gpus = 0;                    // of type t4
  std::vector<std::string> extra_args = {};  // more ringmaster-worker flags
};

// One ringmaster-worker process on its own address, with free ports for gRPC and /metrics.
class WorkerProcess {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Start(const WorkerConfig& config,
                                                              const std::string& scheduler_addr,
                                                              const std::string& log_dir);
  ~WorkerProcess();
  const WorkerConfig& config() const { return config_; }
  // HOST:PORT of its agent service.
  std::string agent_addr() const;
  int metrics_port() const { return metrics_port_; }
  const std::string& log_dir() const { return log_dir_; }
  Subprocess& process() { return *process_; }
  // SIGTERM and wait (the worker stops its job processes first).
  void Stop();
  std::string LogTail() const { return process_ ? process_->LogTail(6000) : ""; }

 private:
  WorkerConfig config_;
  std::string log_dir_;
  int port_ = 0;
  int metrics_port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

class Cluster {
 public:
  // Database, Redis and scheduler; workers come with AddWorker. The database is made on the
  // shared test server, or on `pg_admin_url`'s; `scheduler_args` go to the scheduler.
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(
      const std::string& pg_admin_url = "", std::vector<std::string> scheduler_args = {});
  ~Cluster();

  absl::Status AddWorker(const WorkerConfig& config);
  // Adds the workers of `set` and waits until every worker of the cluster is READY.
  absl::Status AddWorkers(const WorkerSet& set);
  // Stops (or reaps) worker `id` and starts it again with the same id and address.
  absl::Status RestartWorker(const std::string& id);
  // Jobs in PENDING, STARTING or RUNNING.
  std::vector<v1::Job> LiveJobs();
  // Waits until `n` workers are READY at the scheduler.
  absl::Status WaitWorkersReady(int n,
                                std::chrono::milliseconds timeout = std::chrono::seconds(15));
  WorkerProcess* worker(const std::string& id);
  std::vector<std::unique_ptr<WorkerProcess>>& workers() { return workers_; }
  SchedulerProcess& scheduler() { return *scheduler_; }
  RedisServer& redis() { return *redis_; }
  const std::string& dir() const { return dir_; }
  // The scheduler's database, for tests that look at what it stored.
  const std::string& db_url() const { return db_->url(); }

  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec);
  absl::StatusOr<v1::Job> GetJob(const std::string& id);
  absl::Status Cancel(const std::string& id);
  absl::StatusOr<v1::QueueWithStatus> CreateQueue(const v1::Queue& queue);
  // The queues of teams that share one cohort: each lends its `nominal` GPUs of `gpu_type`
  // and reclaims them from any borrower (RECLAIM_WITHIN_COHORT_ANY).
  absl::Status CreateCohortQueues(const std::vector<std::string>& names, const std::string& cohort,
                                  const std::string& gpu_type, int64_t nominal);
  // Polls until the job is in `state` or has ended; returns the last job seen.
  v1::Job WaitState(const std::string& id, v1::JobState state,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Polls until the job (attempt `attempt`) has a placement.
  absl::StatusOr<v1::Job> WaitPlaced(const std::string& id, int attempt,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Every event of an ended job (WatchJob ends after the terminal one).
  std::vector<v1::JobEvent> Events(const std::string& id);
  // The log of a rank, read through the ReadLogs call of the worker at `agent_addr`, as the
  // scheduler reads it (with its certificate; agents serve ReadLogs to nobody else), or with
  // the certificate `as`.
  absl::StatusOr<std::string> RankLog(const std::string& agent_addr, const std::string& job_id,
                                      int rank, int attempt = -1,
                                      const CertFiles* as = nullptr);
  // The worker's /metrics page.
  std::string Metrics(const WorkerProcess& worker);

  // Everything the scheduler, the workers and the database printed, for failure messages.
  std::string Logs() const;

 private:
  std::string dir_;
  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<SchedulerProcess> scheduler_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
};

// Live processes whose environment holds every one of `env` (e.g. RINGMASTER_JOB_ID=j-...)
// and, when not empty, the variable `name` with any value.
std::vector<pid_t> ProcessesWithEnv(const std::map<std::string, std::string>& env,
                                    const std::string& name = "");
// The value of `name` in the environment of process `pid`; empty when absent.
std::string EnvOfProcess(pid_t pid, const std::string& name);

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_CLUSTER_CLUSTER_H_
