// Scheduler: the job API's logic and the placement loop, on top of the core decisions.
//
// It owns the in-memory view of live jobs, workers and allocations, and keeps Postgres (the
// JobStore) the system of record: every change is stored before anyone hears of it.
//
// Protocols (written once, here):
// Submit  1. validate the spec; 2. store the job and its first event in one transaction
//         (a repeated request id returns the stored job); 3. add it to the pending queue;
//         4. wake the placement loop.
// Place   1. take pending jobs in queue order (priority, then submit order); 2. place each as
//         a gang or record why it waits; 3. store the placement and the STARTING event;
//         4. only then send the assignment to every worker of the gang.
// Workers 1. a worker registers with its inventory and the ranks it holds; ranks it does not
//         hold fail their job attempt, ranks of no live attempt are stopped; 2. heartbeats
//         renew its liveness key (TTL = heartbeat timeout); 3. a worker whose key expired is
//         marked lost, its stream is closed (so a live one re-registers) and every job placed
//         on it fails (and restarts under OnFailure).
// Ranks   every rank started: RUNNING; every rank exited 0: SUCCEEDED; one rank failed: the
//         job fails or restarts; every release of a placement sends StopJob to its workers.
// Restart at Start() live jobs, placements and workers are loaded from the JobStore, the queue
//         is rebuilt, and known workers get one heartbeat timeout to reconnect.
// Rebuild whenever the pending queue reports it lost its contents (a Redis flush or restart),
//         it is rebuilt from the live jobs and connected workers' liveness is renewed.
//
// Thread-safe: RPC threads call in concurrently; one mutex guards the state, and one loop
// thread runs placement passes.
#ifndef RINGMASTER_SERVICES_SCHEDULER_SCHEDULER_H_
#define RINGMASTER_SERVICES_SCHEDULER_SCHEDULER_H_

#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/clock.h"
#include "core/job_state_machine.h"
#include "core/placement.h"
#include "core/types.h"
#include "store/coordination.h"
#include "store/job_store.h"

namespace prometheus {
class Registry;
}

namespace ringmaster::scheduler {

// The scheduler's side of one connected worker. Sends must not block: implementations queue.
class WorkerLink {
 public:
  virtual ~WorkerLink() = default;
  virtual void SendAssignment(const Job& job) = 0;
  virtual void SendStop(const std::string& job_id, int32_t attempt, const std::string& reason) = 0;
  // Ends the stream after what is queued. A worker marked lost while its stream still stands
  // (heartbeats late, not gone) then reconnects and registers again instead of heartbeating
  // into a link the scheduler no longer reads.
  virtual void Close() = 0;
};

// A rank a worker reports holding when it registers.
struct HeldRank {
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  bool exited = false;
  int32_t exit_code = 0;
};

struct RankReport {
  enum class Kind { kStarted, kExited, kLaunchFailed };
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  Kind kind = Kind::kStarted;
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string message;
};

struct WorkerView {
  Worker worker;
  std::vector<int32_t> allocated_gpus;
  int32_t cpu_slots_used = 0;
};

struct SchedulerOptions {
  int64_t heartbeat_timeout_ms = 10'000;
  int64_t heartbeat_interval_ms = 2'000;
  int64_t pass_interval_ms = 500;
  // Passes run on every change, but at most once per this many ms: a burst of submits then
  // shares one pass instead of each waiting behind its own.
  int64_t min_pass_gap_ms = 20;
};

class Scheduler {
 public:
  // The stores and clock must outlive the scheduler; `registry` may be null (no metrics).
  Scheduler(JobStore* store, PendingQueue* queue, Liveness* liveness, EventBus* bus,
            const Clock* clock, SchedulerOptions options, prometheus::Registry* registry);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Loads state from the store and starts the placement loop.
  absl::Status Start();
  void Stop();

  absl::StatusOr<CreateJobResult> Submit(const JobSpec& spec, const std::string& request_id);
  absl::StatusOr<Job> GetJob(const std::string& job_id);
  absl::StatusOr<std::vector<Job>> ListJobs(const JobFilter& filter);
  absl::StatusOr<Job> Cancel(const std::string& job_id, const std::string& reason);
  // Calls `send` with every event of the job in order: the stored ones, then new ones, until
  // the job has ended, `send` returns false, or `cancelled` returns true (polled about once a
  // second).
  absl::Status Watch(const std::string& job_id, const std::function<bool(const JobEvent&)>& send,
                     const std::function<bool()>& cancelled);

  absl::Status RegisterWorker(const Worker& worker, const std::vector<HeldRank>& held,
                              std::shared_ptr<WorkerLink> link);
  void Heartbeat(const std::string& worker_id);
  void ReportRank(const std::string& worker_id, const RankReport& report);
  // The stream of `link` ended. The worker stays READY until its heartbeats expire, but takes
  // no new placements while it has no link.
  void Disconnected(const std::string& worker_id, const WorkerLink* link);
  std::vector<WorkerView> ListWorkers();

  const SchedulerOptions& options() const { return options_; }

 private:
  struct Watcher {
    std::string job_id;
    std::vector<JobEvent> events;
    std::condition_variable cv;
  };
  struct Metrics;

  void Loop();
  void Pass();
  void CheckQueueLocked();
  void SweepWorkersLocked();
  void CheckDeadlinesLocked();
  void PlaceLocked();
  void PlaceNewlyPendingLocked();
  void TryPlaceLocked(const std::vector<std::string>& order);
  // Applies `input` to the live job `id`: stores the change and event, then acts on it.
  absl::Status CommitLocked(const std::string& job_id, const JobInput& input);
  void MarkLostLocked(const std::string& worker_id, const std::string& why);
  void FailJobsOnWorkerLocked(const std::string& worker_id, const std::string& reason,
                              const std::set<std::tuple<std::string, int32_t, int32_t>>* held);
  void HandleRankLocked(const std::string& worker_id, const RankReport& report);
  void UpdateGaugesLocked();
  void OnBusEvent(const JobEvent& event);
  void SubscribeIfNeeded();
  void Wake();
  std::string NewJobId();
  std::string NewToken();

  JobStore* store_;
  PendingQueue* queue_;
  Liveness* liveness_;
  EventBus* bus_;
  const Clock* clock_;
  SchedulerOptions options_;
  std::unique_ptr<Metrics> metrics_;

  std::mutex mu_;
  std::unordered_map<std::string, Job> jobs_;  // live (non-terminal) jobs
  std::unordered_map<std::string, RankTracker> trackers_;
  std::unordered_map<std::string, int64_t> pending_since_ms_;
  std::map<std::string, Worker> workers_;
  std::map<std::string, std::shared_ptr<WorkerLink>> links_;
  ClusterState cluster_;
  // Incremental passes: only capacity that grew (a release, a worker joining) can let a job
  // that waited before fit now; otherwise a pass only tries jobs that became pending since.
  bool capacity_grew_ = true;
  std::set<std::string> newly_pending_;
  int64_t last_full_pass_ms_ = 0;

  bool subscribed_ = false;  // loop thread only, after Start()

  std::mutex watch_mu_;
  std::list<Watcher*> watchers_;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool wake_ = false;
  bool stopping_ = false;
  std::thread loop_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_SCHEDULER_H_
