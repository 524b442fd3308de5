// Scheduler: the job API's logic and the placement loop, on top of the core decisions.
//
// It owns the in-memory view of live jobs, workers and allocations, and keeps Postgres (the
// JobStore) the system of record: every change is stored before anyone hears of it.
//
// Locking and storage (the rule everything else leans on):
//   - one mutex (mu_) guards the live state; under it the scheduler only decides: it applies a
//     transition to memory at once (so the next decision sees the GPUs taken) and appends the
//     write to the outbox. No Postgres or Redis round trip ever happens under it, so heartbeats,
//     GetJob, ListJobs, WatchJob and registrations answer while a write is slow;
//   - one writer thread stores the outbox in batches, each batch one transaction (group commit:
//     a burst of decisions shares one fsync), fenced by the leader epoch; new jobs, which nothing
//     else depends on until they are stored, are stored the same way by their own writer
//     (--submit-writers, one by default), so submits are not held behind decisions' commits;
//   - only after the commit does the writer act: assignments and stops go to the workers (with
//     mu_ free: a send is a serialisation and a syscall; one thread sends, batch after batch,
//     so each worker hears them in commit order), waiting Submit/Cancel calls return, watchers
//     get the events, the Redis queue mirror is updated. A batch that cannot be stored
//     (Postgres gone or hung) is retried with backoff until it is; the decisions stand
//     meanwhile, and nothing of them is told to anyone. A retry of a batch whose commit landed
//     but whose answer was lost finds it stored (the stores recognise their own jobs and
//     events) and goes on as if the first try had answered;
//   - a batch refused by the fence (a newer leader took over) is never retried: the scheduler
//     calls on_fenced (main exits) and writes nothing more.
// Why this and not a lock around each transaction: submits and passes were serialised behind one
// lock held across fsyncs, and a hung Postgres froze every RPC. Decisions are cheap and ordered;
// only their storage is slow, so it alone moves off the lock.
//
// Protocols (written once, here):
// Submit  1. validate the spec; 2. hand the new job to the submit writer with a deadline
//         (write_wait_ms); no thread waits for it (SubmitAsync; Submit waits on top of it);
//         3. the writer stores it, adds it to the live jobs, wakes the placement loop and only
//         then answers the submit (a repeated request id returns the stored job); a write not
//         stored by its deadline is answered UNAVAILABLE by the deadline thread, and its job
//         may still land. UNAVAILABLE at once while Postgres is known to be down.
// Place   1. take pending jobs in queue order (core/queue_order.h); 2. place each as a gang or
//         record why it waits; 3. the placement and the STARTING event go to the writer;
//         4. only after their commit is the assignment sent to every worker of the gang.
// Workers 1. a worker registers with its inventory and the ranks it holds; ranks it does not
//         hold fail their job attempt, ranks of no live attempt are stopped; 2. heartbeats
//         renew its liveness key (TTL = heartbeat timeout), written by the aside thread, never
//         on the caller's (gRPC callback) thread; 3. a worker whose key expired and
//         whose heartbeats this process has not seen within the timeout is marked lost, its
//         stream is closed (so a live one re-registers) and every job placed on it fails (and
//         restarts under OnFailure). Postgres plays no part in liveness.
// Ranks   every rank started: RUNNING; every rank exited 0: SUCCEEDED; one rank failed: the
//         job fails or restarts; every release of a placement sends StopJob to its workers.
// Restart at Start() a new leader epoch is taken, then queues, live jobs, placements and workers
//         are loaded from the JobStore, and known workers get one heartbeat timeout to reconnect.
// Queues  1. validate; 2. under queue_writes_ (exclusive; Submit holds it shared while its job
//         is on its way to Postgres, so no job lands in a queue being deleted) store the change,
//         outside mu_; 3. then apply it to queues_ under mu_. A delete is refused while a job of
//         the queue is live in memory, waiting to be stored, or live in Postgres (the store checks
//         in the delete's transaction). Submit to a queue not in queues_ is NOT_FOUND.
// Volumes written as queues are (under queue_writes_, stored outside mu_, then applied to
//         volumes_). A submit checks its mounts against volumes_ (core/environment.h) under the
//         same shared hold as its queue; a delete is refused while a job that mounts the volume
//         is live in memory, waiting to be stored, or live in Postgres.
// Images  1. a job with an image and no pinned digest is assigned without one; 2. its
//         launcher resolves the image and reports KIND_IMAGE_RESOLVED for the current attempt;
//         3. the first such report pins Job::image_digest (a JobWrite::kImageDigest, no event,
//         no change of state); later reports are ignored; 4. every later assignment carries
//         the digest, also after a restart of the scheduler (it is loaded with the job).
//         Each assignment's mounts are resolved from volumes_ when it is placed and sent; a
//         volume gone by then fails the job (JobInput::kUnrunnable) instead of a launch
//         without it.
//         Each also carries, when the job's team has one, the team's credential for its
//         image's registry (registry_credentials_, written under registry_writes_ as volumes
//         are, stored outside mu_; scheduler_registries.cc): only that registry's, never logged;
//         for one whose secret cannot be read, its problem instead of a secret (AuthForImage).
//         The JobStore holds each secret sealed with SchedulerOptions::secrets; Start (as
//         leader, under its epoch) opens them, seals the plaintext ones of an older schema,
//         reseals with the current key those the previous key sealed (previous_secrets, a key
//         rotation), and keeps one that does not open (another key, altered) out of every
//         assignment, logged and listed with its problem.
// After   (JobSpec.after; core/dependency.h) 1. a submit names only jobs its team may see: live
//         ones are checked in memory, the others read from the JobStore (on `aside` when given:
//         never on gRPC's thread), NOT_FOUND otherwise; their ends go to deps_; 2. every pass
//         judges each pending job that waits: waiting (its pending reason says for what),
//         ready (placed as any other), or never (CANCELLED in that pass, saying why); 3. a job's
//         end makes the jobs that wait for it pending again for the next pass, which it wakes;
//         4. at Start() the ends of named jobs that are not live are read from the JobStore.
// Arrays  (JobSpec.array; core/array.h) 1. a submit stores the array as one job; 2. every pass
//         creates the tasks that the parallelism limit (or kArrayWindow) lets run, once the
//         array's dependencies hold, as kCreate writes stored in decision order (so the store
//         always holds indices 0..next-1); a task joins the live jobs once stored and is placed
//         as any job; 3. a task's start makes the array RUNNING, its end is counted, and the
//         last end ends the array (SUCCEEDED when every task did, else FAILED); a failed task
//         wakes the jobs that wait for the array to succeed (they are cancelled at once);
//         4. cancelling the array cancels its live tasks and creates no more (a task stored
//         after that is cancelled on arrival); 5. at Start() each live array's progress is
//         read from the store (TallyArray).
// Rebuild whenever the Redis queue mirror reports it lost its contents (a flush or restart),
//         it is rebuilt from the stored pending jobs and connected workers' liveness is renewed.
//
// Thread-safe: RPC threads call in concurrently (worker streams from gRPC's few callback
// threads, so nothing they call may wait on I/O); the loop thread runs placement passes, leaving
// mu_ free after each for at least as long as the pass held it; the writer threads store
// and act (answering submits too), the mirror thread keeps the Redis queue, the aside thread
// writes heartbeats and learned baselines, the deadline thread answers submits whose writes
// are late. Those threads belong to the parts the scheduler wires together (CommitWriter,
// QueueMirror, AsideWriter, PendingAnswers; the map and the lock order are in docs/scheduler.md,
// "Parts of the scheduler"); the scheduler keeps the live state under mu_ and the loop thread.
#ifndef RINGMASTER_SERVICES_SCHEDULER_SCHEDULER_H_
#define RINGMASTER_SERVICES_SCHEDULER_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "aside_writer.h"
#include "commit_writer.h"
#include "common/mutex.h"
#include "common/secret_box.h"
#include "core/array.h"
#include "core/clock.h"
#include "core/dependency.h"
#include "core/elastic.h"
#include "core/environment.h"
#include "core/fair_share.h"
#include "core/health_check.h"
#include "core/job_list.h"
#include "core/job_state_machine.h"
#include "core/placement.h"
#include "core/queue_status.h"
#include "core/run_watch.h"
#include "core/types.h"
#include "core/usage.h"
#include "core/worker_protocol.h"
#include "pending_answers.h"
#include "queue_mirror.h"
#include "scheduler_metrics.h"
#include "store/coordination.h"
#include "store/job_store.h"
#include "watch_hub.h"

namespace ringmaster::scheduler {

// The scheduler's side of one connected worker. Sends must not block: implementations queue.
class WorkerLink {
 public:
  virtual ~WorkerLink() = default;
  virtual void SendAssignment(const Job& job) = 0;
  // The same with the pre-run check's settings; links that do not carry them send the plain
  // assignment.
  virtual void SendAssignmentWithCheck(const Job& job, const CheckPlan& plan) {
    (void)plan;
    SendAssignment(job);
  }
  // The same with the attempt's volume mounts (host paths resolved now, in spec order); links
  // that do not carry them send the assignment with the check's settings.
  virtual void SendLaunch(const Job& job, const CheckPlan& plan,
                          const std::vector<ResolvedMount>& mounts) {
    (void)mounts;
    SendAssignmentWithCheck(job, plan);
  }
  // The same with the job's team's credential for its image's registry, if it has one (with
  // only its problem when it cannot be read: AuthForImage); links that do not carry it send the
  // launch without.
  virtual void SendLaunchWithAuth(const Job& job, const CheckPlan& plan,
                                  const std::vector<ResolvedMount>& mounts,
                                  const std::optional<RegistryCredential>& registry_auth) {
    (void)registry_auth;
    SendLaunch(job, plan, mounts);
  }
  // `grace_ms`: SIGTERM to SIGKILL for these ranks; 0: the worker's own default.
  virtual void SendStop(const std::string& job_id, int32_t attempt, const std::string& reason,
                        int64_t grace_ms) = 0;
  // Ends the stream after what is queued. A worker marked lost while its stream still stands
  // (heartbeats late, not gone) then reconnects and registers again instead of heartbeating
  // into a link the scheduler no longer reads.
  virtual void Close() = 0;
};

struct WorkerView {
  Worker worker;
  std::vector<int32_t> allocated_gpus;
  int32_t cpu_slots_used = 0;
  bool on_probation = false;  // unhealthy, and taking checked jobs again
  std::vector<ClusterState::GpuUse> gpu_uses;  // per GPU in use: whole, or its shares
};

// A queue and what it holds right now (GetQueue, ListQueues).
struct QueueView {
  Queue queue;
  QueueStatus status;
};

struct SchedulerOptions {
  int64_t heartbeat_timeout_ms = 10'000;
  // How long Submit and Cancel wait for their write to be stored before UNAVAILABLE (the write
  // may still land later: a retry with the same request id then returns the job).
  int64_t write_wait_ms = 10'000;
  // The writer's backoff between tries of a batch that could not be stored.
  int64_t retry_min_ms = 50;
  int64_t retry_max_ms = 2'000;
  size_t max_batch = 1'000;  // writes per transaction
  // Writers that store new jobs in parallel (each holds a connection). One stores more submits
  // on 2 cores (docs/scheduler.md, Speed); its retry backoff after an outage ends when a
  // submit arrives or is turned away, or another writer gets through.
  int submit_writers = 1;
  // Called once, from a writer thread, when a newer leader fenced this one off.
  std::function<void(const absl::Status&)> on_fenced;
  int64_t heartbeat_interval_ms = 2'000;
  int64_t pass_interval_ms = 500;
  // Passes run on every change, but at most once per this many ms: a burst of submits then
  // shares one pass instead of each waiting behind its own.
  int64_t min_pass_gap_ms = 20;
  // false: no loop thread; passes run only when RunPass is called (tests that must know
  // which pass places a job).
  bool background_passes = true;
  // Fair share (core/fair_share.h): how long a preempted job's ranks get between SIGTERM and
  // SIGKILL (its GPUs stay held until its ranks exit or this plus a margin passes), and how
  // many waiting gangs get a reservation.
  int64_t preemption_grace_ms = 30'000;
  // The pre-run allreduce check (core/health_check.h): on for jobs that do not opt out, and
  // the fraction of the shape's baseline below which a check fails.
  bool health_check = true;
  double check_min_ratio = 0.5;
  // An unhealthy worker goes on probation after this long: it then takes placements of
  // checked jobs only, and the first check that passes with it clears it (one that names it
  // again restarts the wait). 0: only an admin clears it.
  int64_t unhealthy_recheck_ms = 600'000;
  int32_t reservations = 4;
  // The order of a queue's pending jobs of equal priority (PolicyOptions::order) and when a
  // waiting job goes first of all under the shortest-limit order.
  PolicyOptions::Order queue_order = PolicyOptions::Order::kSubmit;
  int64_t starve_after_ms = 6LL * 3600 * 1000;
  // Concurrent watches (Watch calls and feeds); more are RESOURCE_EXHAUSTED. A watch on the
  // callback API holds no thread, but its call's memory; a bound keeps a client that opens
  // watches in a loop from growing the scheduler without end.
  int32_t max_watchers = 2'048;
  // Concurrent CancelJob calls on their way (the RPC layer's bound): each holds its call's
  // memory, and no thread, until its write is stored.
  int32_t max_cancels = 4'096;
  // Live jobs (pending, starting or running) at most, in all and in one queue; a submit past
  // either is RESOURCE_EXHAUSTED. Every live job is held in memory: without a bound a client
  // submitting in a loop would grow the scheduler until it ran out of memory, and one team
  // could fill the bound for all (docs/scheduler.md, Live-job bounds).
  int64_t max_live_jobs = 100'000;
  int64_t max_live_jobs_per_queue = 50'000;
  // The live jobs' SpecBytes at most: a spec may carry up to about 360 KiB of argv, env and
  // labels, so a bound on the count alone does not bound the memory.
  int64_t max_live_spec_bytes = 128LL << 20;
  // A reservation further ahead than this is not made (the gang just waits).
  int64_t reservation_window_ms = 7LL * 24 * 3600 * 1000;
  // Elastic jobs (core/elastic.h): how long GPUs stay idle before a job grows into them, how
  // often one job may be resized, what a restart is reckoned to cost; their ranks checkpoint
  // when stopped (docs/fair-share.md, "Elastic jobs").
  ElasticOptions elastic{.saves_on_stop = true};
  // How ranks with a gpu_share are placed (core/share_placement.h): FGD and Ringmaster's read
  // the mix of recent demand (docs/gpu-sharing.md, "Where shares go").
  SharePolicy share_policy = SharePolicy::kRingmaster;
  // The key that seals teams' registry secrets in the JobStore (--secrets-key-file). Null: no
  // secret can be set (FAILED_PRECONDITION), and every stored one is listed as unreadable.
  std::shared_ptr<const SecretBox> secrets;
  // The key of before a rotation (--previous-secrets-key-file), or null. Start opens what it
  // sealed and reseals it with `secrets` in place (core/registry_credentials.h,
  // PlanStoredSecret); nothing else uses it.
  std::shared_ptr<const SecretBox> previous_secrets;
};

class Scheduler {
 public:
  // The stores and clock must outlive the scheduler; `registry` may be null (no metrics).
  Scheduler(JobStore* store, PendingQueue* queue, Liveness* liveness, const Clock* clock,
            SchedulerOptions options, prometheus::Registry* registry);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Takes a new leader epoch, loads state from the store and starts the loop and the writer.
  absl::Status Start();
  // Stops the threads; what the writer could not store by then is dropped (as in a crash: the
  // next leader reconciles from Postgres and the workers).
  void Stop();

  // Runs one pass (liveness sweep, runtime limits, placement) now; the loop runs them anyway.
  void RunPass();
  // Waits until the writers are idle: everything decided so far is stored and acted on.
  // DEADLINE_EXCEEDED after `timeout_ms`.
  absl::Status Flush(int64_t timeout_ms);

  // `team` is the submitter's (its token's), stored with the job; `audit`, the submit's entry
  // of the audit trail, is stored in the same transaction with the job's id as its resource
  // (and not at all when the request id names an earlier job).
  // `admin`: the submitter may mount any volume; others only those granted to `team`.
  absl::StatusOr<CreateJobResult> Submit(const JobSpec& spec, const std::string& request_id,
                                         const std::string& team = "",
                                         std::optional<AuditRecord> audit = std::nullopt,
                                         bool admin = false);
  // Submit without a thread waiting: `done` gets what Submit would return, exactly once: at
  // once for a call refused up front, else on the writer's thread after the commit (or on the
  // deadline thread when the write was not stored within write_wait_ms). It must not block.
  // A spec that names jobs it waits for (`after`) which are not live has their ends read from
  // Postgres, in a task handed to `aside` when given (it must run it on a thread that may
  // wait), else on the caller's thread.
  using SubmitDone = std::function<void(absl::StatusOr<CreateJobResult>)>;
  void SubmitAsync(const JobSpec& spec, const std::string& request_id, const std::string& team,
                   std::optional<AuditRecord> audit, SubmitDone done, bool admin = false,
                   const std::function<void(std::function<void()>)>& aside = nullptr);
  absl::StatusOr<Job> GetJob(const std::string& job_id);
  // The job as GetJob shows it when it is live (from memory, never waiting on Postgres);
  // nullopt when it is not, and only Postgres can say more.
  absl::StatusOr<std::optional<Job>> GetLiveJob(const std::string& job_id);
  // One page of jobs, newest first; the paging protocol is in core/job_list.h.
  absl::StatusOr<JobPage> ListJobs(const JobListQuery& query);
  absl::StatusOr<Job> Cancel(const std::string& job_id, const std::string& reason);
  // Cancel without a thread waiting: `done` gets what Cancel would return, exactly once, as
  // SubmitAsync's does. A job not live here needs a read of Postgres to say whether it ended
  // or never existed: that read runs in a task handed to `aside`, which must run it on a
  // thread that may wait.
  using CancelDone = std::function<void(absl::StatusOr<Job>)>;
  using Aside = std::function<void(std::function<void()>)>;
  void CancelAsync(const std::string& job_id, const std::string& reason, CancelDone done,
                   const Aside& aside);
  // Calls `send` with every event of the job in order: the stored ones, then new ones as they
  // are stored, until the job has ended, `send` returns false, or `cancelled` returns true
  // (polled about once a second). An idle watcher costs no database round trip. At most
  // options.max_watchers at once: RESOURCE_EXHAUSTED beyond.
  absl::Status Watch(const std::string& job_id, const std::function<bool(const JobEvent&)>& send,
                     const std::function<bool()>& cancelled);
  // The parts of Watch for a caller that must not wait (gRPC's callback API): BeginWatch
  // registers `feed`, whose `push` then gets the job's events as they are stored, until
  // EndWatch(feed) returns. `push` runs on the writer's thread under a lock: it must not block
  // or call the scheduler. Events stored before come from EventsAfter (Postgres), read after
  // BeginWatch so that none is missed. At most options.max_watchers feeds and Watch calls at
  // once: RESOURCE_EXHAUSTED beyond.
  using WatchFeed = WatchHub::Feed;
  absl::Status BeginWatch(WatchFeed* feed);
  void EndWatch(WatchFeed* feed);
  // The job's stored events with seq > `seq`, in order.
  absl::StatusOr<std::vector<JobEvent>> EventsAfter(const std::string& job_id, int64_t seq);

  absl::Status RegisterWorker(const Worker& worker, const std::vector<HeldRank>& held,
                              std::shared_ptr<WorkerLink> link);
  void Heartbeat(const std::string& worker_id);
  void ReportRank(const std::string& worker_id, const RankReport& report);
  // The same, for statuses that came in one message (RankStatuses): one lock for all of them.
  void ReportRanks(const std::string& worker_id, const std::vector<RankReport>& reports);
  // The stream of `link` ended. The worker stays READY until its heartbeats expire, but takes
  // no new placements while it has no link.
  void Disconnected(const std::string& worker_id, const WorkerLink* link);
  std::vector<WorkerView> ListWorkers();
  // A launcher's pre-run check of an attempt (protocol in core/health_check.h).
  void ReportCheck(const std::string& worker_id, const CheckOutcome& outcome);
  // Puts a worker marked unhealthy by a check back into placement. NOT_FOUND for an unknown
  // worker, INVALID_ARGUMENT for an empty id.
  absl::StatusOr<WorkerView> ClearWorkerHealth(const std::string& worker_id);
  // The learned baselines by shape (tests, ringctl).
  std::map<std::string, CheckBaseline> CheckBaselines();

  // Queues (see "Queues" above). Create: ALREADY_EXISTS for a taken name; Update and Get:
  // NOT_FOUND for an unknown queue; Delete: FAILED_PRECONDITION for `default` and for a queue
  // with live jobs. Every input is validated (INVALID_ARGUMENT naming the field).
  absl::StatusOr<QueueView> CreateQueue(const Queue& queue);
  absl::StatusOr<QueueView> UpdateQueue(const Queue& queue);
  absl::StatusOr<QueueView> GetQueue(const std::string& name);
  // The teams a queue is bound to (empty: every team); nullopt when there is no such queue.
  std::optional<std::vector<std::string>> QueueTeams(const std::string& name);
  // By name.
  std::vector<QueueView> ListQueues();
  absl::Status DeleteQueue(const std::string& name);
  // A copy of the queues as the policy sees them (tests).
  std::map<std::string, Queue> QueuesSnapshot();

  // Volumes (see "Volumes" above; core/environment.h). Create: ALREADY_EXISTS for a taken
  // name; Update: NOT_FOUND for an unknown volume; Delete: NOT_FOUND, or FAILED_PRECONDITION
  // naming a live job that mounts it. Get and List show a volume only where VolumeVisibleTo
  // `team` (or `admin`); Get of one not shown is NOT_FOUND, as of one that does not exist.
  // Every input is validated (INVALID_ARGUMENT naming the field).
  absl::StatusOr<Volume> CreateVolume(const Volume& volume);
  absl::StatusOr<Volume> UpdateVolume(const Volume& volume);
  absl::StatusOr<Volume> GetVolume(const std::string& name, const std::string& team, bool admin);
  // By name.
  std::vector<Volume> ListVolumes(const std::string& team, bool admin);
  absl::Status DeleteVolume(const std::string& name);

  // Registry credentials of teams (core/registry_credentials.h; docs/environments.md, "Private
  // registries"): validated (INVALID_ARGUMENT naming the field), stored fenced, kept for the
  // assignments of the team's jobs. Set creates or replaces; FAILED_PRECONDITION when the team
  // has credentials for kMaxRegistryCredentialsPerTeam other registries. List: `team`'s, or
  // every team's for "*". Delete: NOT_FOUND when the team has none for that registry. Nothing
  // these return or log carries the secret. Who may call is the adapter's (core/authz.h).
  absl::StatusOr<RegistryCredentialView> SetRegistryCredential(RegistryCredential credential);
  absl::StatusOr<std::vector<RegistryCredentialView>> ListRegistryCredentials(
      const std::string& team);
  absl::Status DeleteRegistryCredential(const std::string& team, const std::string& registry);

  const SchedulerOptions& options() const { return options_; }

 private:
  // Start's part for registry credentials (scheduler_registries.cc): opens each stored secret,
  // seals with the current key and stores again those an older schema kept in plaintext and
  // those the previous key sealed (an error only when such a write fails), and sorts them into
  // what registry_credentials_ and unreadable_registry_credentials_ receive.
  struct OpenedRegistryCredentials {
    std::vector<RegistryCredential> readable;
    std::vector<RegistryCredentialView> unreadable;
  };
  absl::StatusOr<OpenedRegistryCredentials> OpenRegistryCredentials(
      std::vector<StoredRegistryCredential> stored);
  // Checks the jobs `spec` waits for; `read` is true when some must be read from Postgres.
  absl::Status CheckLiveDependenciesLocked(const JobSpec& spec, const std::string& team, bool admin,
                                           bool* read) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The state of job `id` as far as the scheduler knows it (live, or an end in deps_).
  std::optional<JobState> StateOfLocked(const std::string& id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A submit on its way: what it retries with when its random job id was taken.
  struct Create {
    Job job;
    std::optional<AuditRecord> audit;
    int tries = 0;
    std::chrono::steady_clock::time_point handed;
    SubmitDone done;
  };
  using Write = CommitWriter::Write;
  // SubmitAsync once the jobs its spec waits for are known to exist (and be visible to `team`).
  // With `aside`, a wait for queue_writes_ is done there.
  void SubmitChecked(std::shared_ptr<Create> create, const std::string& team, bool admin,
                     const Aside& aside);

  void Loop();
  // Arrays (see "Arrays"): creates the tasks each live array may run now, and ends arrays
  // whose tasks all ended (after a restart, one whose last end was stored but not its own).
  void CreateTasksLocked(const std::function<bool(Job&)>& may_run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a transition of a task of a live array (from -> the task's state now).
  void CountTaskLocked(const std::string& task_id, JobState from, JobState to)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves live array `id` to `to` (RUNNING, or its end) with an event saying `reason`.
  void SetArrayStateLocked(const std::string& id, JobState to, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cancels the live tasks of array `id`, which ended.
  void CancelTasksLocked(const std::string& id, JobState array_end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills in job.array_status where job is an array (live: from arrays_; else the store).
  void FillArrayStatus(Job& job);
  // The writer's after-commit hook: takes a stored batch into the view and memory, sends what
  // it decided to the workers, answers its waiters, publishes its events, feeds the mirror.
  void AfterCommit(std::vector<Write>& batch, const CommitResult& result);
  // The mirror's callbacks: the stored pending jobs (for a rebuild), and the liveness keys of
  // connected workers renewed after one (they went with Redis's contents).
  std::vector<QueueEntry> StoredPending();
  void BeatConnected();
  // A submit's job to the submit writer, under a fresh job id, with its deadline.
  void HandOver(std::shared_ptr<Create> create);
  // A submit's write settled or timed out: answers it (or retries under another id).
  void Created(const std::shared_ptr<Create>& create, Waiter& waiter,
               absl::StatusOr<CreateJobResult> result);
  void SweepWorkersLocked(const std::set<std::string>& alive, std::vector<std::string>* beats)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckDeadlinesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The only ways jobs_ changes: they keep placed_ids_ and live_counts_ with it.
  void SetJobLocked(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseJobLocked(std::unordered_map<std::string, Job>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts unhealthy workers whose wait is over on probation.
  void ProbateLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The pre-run check's transport expected of `placement` (core/health_check.h).
  std::string ExpectedTransportLocked(const std::vector<RankPlacement>& placement) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks a worker healthy again (an admin's clear, or a passing check on probation).
  void ClearHealthLocked(Worker& w, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hang detection and idle reclaim of RUNNING jobs (core/run_watch.h).
  void CheckWatchesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PlaceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A preempted attempt's GPUs go back once its ranks have exited (or its grace ran out).
  void ReleaseDrainedLocked(const std::pair<std::string, int32_t>& attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A registering worker still holds `rank` of a stopped attempt (a scheduler restart during a
  // preemption's grace forgot it): its GPUs are held again, as Draining, until it exits.
  void HoldStoppingRankLocked(const Worker& worker, const HeldRank& rank, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies `input` to the live job `id` in memory and hands the write to the writer.
  absl::Status CommitLocked(const std::string& job_id, const JobInput& input,
                            std::shared_ptr<Waiter> waiter = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkLostLocked(const std::string& worker_id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies one of a pass's resizes: the job stops (kResized) and claims z.ranks.
  void ResizeLocked(const PassResult::Resize& z, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailJobsOnWorkerLocked(const std::string& worker_id, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleRankLocked(const std::string& worker_id, const RankReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordCheckpointLocked(const std::string& worker_id, const RankReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pins the job's image digest from its launcher's first report (see "Images").
  void RecordImageDigestLocked(const std::string& worker_id, const RankReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateGaugesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The queues by name, for the policy; mu_ must be held.
  const std::map<std::string, Queue>& QueuesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queues_;
  }
  // What `queue` holds (as of the last pass's quota ledger), how many of its jobs wait, and
  // what it has used (core/usage.h).
  // `tallies`: counted once for a whole list (TallyQueuesLocked).
  struct QueueTallies {
    std::map<std::string, int64_t> pending;  // pending jobs by queue
    UsageTotals used_ms;                     // accounting, running attempts included
  };
  QueueStatus QueueStatusLocked(const Queue& queue, const QueueTallies& tallies) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  QueueTallies TallyQueuesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a new job against the live-job bounds, or says which it would pass.
  absl::Status ReserveLiveJobLocked(const JobSpec& spec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A create counted by ReserveLiveJobLocked is answered (stored or not).
  void ReleaseLiveJob(const JobSpec& spec);
  // Store errors of a queue write as the caller should see them.
  absl::Status QueueWriteError(const absl::Status& stored) const;
  void Wake();
  // Splits a stored submit's wait into its stages (the submit_wait histogram).
  void ObserveSubmitWait(Waiter& waiter, std::chrono::steady_clock::time_point handed);
  std::string NewJobId();
  std::string NewToken();

  JobStore* store_;
  Liveness* liveness_;
  const Clock* clock_;
  SchedulerOptions options_;
  std::unique_ptr<SchedulerMetrics> metrics_;  // null: no registry
  WatchHub watch_hub_;
  int64_t epoch_ = 0;  // the leader epoch every write is fenced with; set by Start()

  // The live state, under mu_. jobs_ holds the decided state of every live job, which may be
  // ahead of Postgres by the writes in the outbox.
  Mutex mu_;
  std::unordered_map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
  // Kept with jobs_ by SetJobLocked/EraseJobLocked, so that what runs every pass (deadlines,
  // watches, the placed side of a pass, gauges) costs nothing per pending job: a backlog of
  // 20,000 pending jobs made every pass scan them all four times.
  std::set<std::string> placed_ids_ ABSL_GUARDED_BY(mu_);  // STARTING and RUNNING jobs
  // (state, queue) -> jobs
  std::map<std::pair<JobState, std::string>, int64_t> live_counts_ ABSL_GUARDED_BY(mu_);
  int64_t live_spec_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // SpecBytes of jobs_
  // Submits counted against the live-job bounds and not answered yet (a stored one is briefly
  // in jobs_ too: the bounds err on the safe side). Under submitting_mu_, taken after mu_.
  Mutex submitting_mu_;
  // queue -> submits
  std::unordered_map<std::string, int64_t> submitting_ ABSL_GUARDED_BY(submitting_mu_);
  int64_t submitting_total_ ABSL_GUARDED_BY(submitting_mu_) = 0;
  int64_t submitting_spec_bytes_ ABSL_GUARDED_BY(submitting_mu_) = 0;
  std::unordered_map<std::string, RankTracker> trackers_ ABSL_GUARDED_BY(mu_);
  // Hang and idle watch of each RUNNING job's current attempt (core/run_watch.h).
  struct Watched {
    int32_t attempt = 0;
    RunWatch watch;
  };
  std::unordered_map<std::string, Watched> watches_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, int64_t> pending_since_ms_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  // Pre-run check baselines by shape key, loaded at Start and learned from completed checks
  // that blamed no worker (UpdateBaseline).
  std::map<std::string, CheckBaseline> baselines_ ABSL_GUARDED_BY(mu_);
  // The recent samples each baseline is the median of (UpdateBaseline); in memory only.
  std::map<std::string, std::deque<double>> baseline_windows_ ABSL_GUARDED_BY(mu_);
  // Unhealthy workers: since when (this process's clock; a restart starts the wait again). Who
  // is on probation (SchedulerOptions::unhealthy_recheck_ms) is cluster_'s to know.
  std::map<std::string, int64_t> unhealthy_since_ms_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Queue> queues_ ABSL_GUARDED_BY(mu_);    // as stored; loaded by Start()
  std::map<std::string, Volume> volumes_ ABSL_GUARDED_BY(mu_);  // as stored; loaded by Start()
  RegistryCredentials registry_credentials_ ABSL_GUARDED_BY(mu_);  // opened; by Start()
  // Stored credentials whose secret this scheduler cannot open, with the reason; sent to no
  // worker until set again. Start fills it; Set and Delete take theirs out.
  UnreadableRegistryCredentials unreadable_registry_credentials_ ABSL_GUARDED_BY(mu_);
  // Registry credential writes, one at a time (a team's count is checked before its write).
  // Taken before mu_, never while holding it.
  Mutex registry_writes_;
  std::map<std::string, std::shared_ptr<WorkerLink>> links_ ABSL_GUARDED_BY(mu_);
  // Streams of workers marked lost, closed by RunPass once mu_ is free.
  std::vector<std::shared_ptr<WorkerLink>> closing_ ABSL_GUARDED_BY(mu_);
  ClusterState cluster_ ABSL_GUARDED_BY(mu_);
  // Incremental passes: only capacity that grew (a release, a worker joining) can let a job
  // that waited before fit now; otherwise a pass only tries jobs that became pending since.
  bool capacity_grew_ ABSL_GUARDED_BY(mu_) = true;
  std::set<std::string> newly_pending_ ABSL_GUARDED_BY(mu_);
  int64_t last_full_pass_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // Fair share (queues_ above; a job of an unknown queue has no quota limits).
  // Preempted attempts whose ranks are still stopping, by (job, attempt): they keep their GPUs.
  struct Draining {
    Job held;  // the job as it was placed: what the policy sees holding GPUs
    std::set<int32_t> exited;
    int64_t deadline_ms = 0;
    std::string preemptor;
    // An elastic job stopping to restart at another size: its own claim ripens when it exits.
    bool resized = false;
  };
  std::map<std::pair<std::string, int32_t>, Draining> draining_ ABSL_GUARDED_BY(mu_);
  // GPUs promised to jobs that preempted (PassInput::claims); `ripe`: their victims are gone,
  // so the claim ends after the next pass.
  std::map<std::string, std::vector<RankPlacement>> claims_ ABSL_GUARDED_BY(mu_);
  // preemptor -> victims stopping
  std::map<std::string, std::set<std::string>> preempting_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> ripe_claims_ ABSL_GUARDED_BY(mu_);
  // Elastic jobs: how long GPUs of each type stayed idle (observed after every pass), and
  // elastic_'s resize times and throughput at each size (rank 0's images/sec), by job. The
  // resize times are rebuilt from the stored events at Start; the throughput is kept in memory
  // only (a restarted scheduler assumes linear scaling until it has measured again).
  IdleTracker idle_ ABSL_GUARDED_BY(mu_){options_.elastic.idle_delay_ms};
  // The GPU ranks of recent jobs, the mix that share placement expects; the mix is rebuilt
  // for a pass with shares to place when it moved since (demand_seen_).
  RecentDemand demand_ ABSL_GUARDED_BY(mu_);
  uint64_t demand_seen_ ABSL_GUARDED_BY(mu_) = 0;
  ElasticInput elastic_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<int32_t, double>> measured_ ABSL_GUARDED_BY(mu_);
  // The last full pass made reservations: no incremental pass.
  bool reserved_ ABSL_GUARDED_BY(mu_) = false;
  QuotaLedger ledger_ ABSL_GUARDED_BY(mu_);  // quota use as of the last pass
  // Accounting (core/usage.h): what ended attempts used, by (queue, resource), as stored plus
  // what was decided since (the ends on their way to Postgres).
  UsageTotals usage_ms_ ABSL_GUARDED_BY(mu_);
  // The ends of the jobs that live jobs wait for (JobSpec.after).
  DependencyBook deps_ ABSL_GUARDED_BY(mu_);
  // Live arrays (in jobs_ too) and where their tasks are (see "Arrays").
  std::map<std::string, ArrayProgress> arrays_ ABSL_GUARDED_BY(mu_);
  // Tasks created and not stored yet (they join jobs_ when stored): counted against the
  // live-job bounds with jobs_.
  int64_t tasks_in_flight_ ABSL_GUARDED_BY(mu_) = 0;

  // Queue and volume writes hold it exclusively, Submit shared until its job is among the
  // writer's creates in flight (see "Queues"). Taken before mu_, never while holding it.
  SharedMutex queue_writes_;

  // What readers see: each live job as last stored (GetJob, ListJobs), under view_mu_.
  Mutex view_mu_;
  std::unordered_map<std::string, Job> stored_ ABSL_GUARDED_BY(view_mu_);

  // The parts with threads, declared after the live state so that they go first: a write the
  // writers dropped unstored answers its submit as it goes (Waiter's destructor), and that
  // answer releases the submit's count in submitting_.
  // Submits and cancels waiting for their write, and the deadline thread.
  PendingAnswers answers_;
  // The outbox and its writer threads; after each commit they call AfterCommit.
  CommitWriter writer_;

  // The Redis queue mirror and its thread; fed by AfterCommit.
  QueueMirror mirror_;
  // Heartbeats' liveness keys and learned baselines, off the RPC threads.
  AsideWriter aside_;

  Mutex loop_mu_;
  CondVar loop_cv_;
  bool wake_ ABSL_GUARDED_BY(loop_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(loop_mu_) = false;
  std::thread loop_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_SCHEDULER_H_
