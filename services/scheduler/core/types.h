// Plain structs of the scheduler's world: jobs, workers, placements. No gRPC, SQL or Redis.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_TYPES_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_TYPES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster::scheduler {

enum class JobState { kPending, kStarting, kRunning, kSucceeded, kFailed, kCancelled };
enum class RestartPolicy { kNever, kOnFailure };

bool IsTerminal(JobState state);
// STARTING or RUNNING: the job holds a placement.
bool IsPlaced(JobState state);
// "PENDING", "RUNNING", ... (the names users see and Postgres stores).
const char* JobStateName(JobState state);
std::optional<JobState> ParseJobState(const std::string& name);

struct TrainerWorkload {
  std::string model;
  int32_t batch_size = 0;
  int64_t steps = 0;
  std::optional<int32_t> checkpoint_every;  // unset: the trainer's default
  bool operator==(const TrainerWorkload&) const = default;
};

struct CommandWorkload {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  bool check_in_mpi_init = false;  // v1::CommandWorkload.check_in_mpi_init
  bool operator==(const CommandWorkload&) const = default;
};

// A cluster volume mounted into a job's containers (core/environment.h).
struct Mount {
  std::string volume;
  std::string path;  // inside the container
  bool read_only = false;
  bool operator==(const Mount&) const = default;
};

// A job another waits for (JobSpec.after): its end must be SUCCEEDED (kSucceeded), anything
// (kEnded), or FAILED or CANCELLED (kFailed).
enum class AfterCondition { kSucceeded, kEnded, kFailed };
struct Dependency {
  std::string job_id;
  AfterCondition condition = AfterCondition::kSucceeded;
  bool operator==(const Dependency&) const = default;
};

// A job array (core/array.h): `count` tasks; at most `parallelism` created and not ended at
// once (0: no limit of its own).
struct ArraySpec {
  int32_t count = 0;
  int32_t parallelism = 0;
  bool operator==(const ArraySpec&) const = default;
};

// Where an array's tasks are (v1::ArrayStatus).
struct ArrayStatus {
  int32_t count = 0;
  int32_t waiting = 0;  // not created yet
  int32_t pending = 0;
  int32_t running = 0;  // STARTING or RUNNING
  int32_t succeeded = 0;
  int32_t failed = 0;
  int32_t cancelled = 0;
  std::vector<int32_t> failed_indices;  // the lowest, at most kShownFailedIndices
  bool operator==(const ArrayStatus&) const = default;
};

struct JobSpec {
  std::string name;
  std::string queue;
  int32_t priority = 0;
  int32_t replicas = 0;
  // Elastic jobs (core/elastic.h): the scheduler may run the job at any size from min_replicas
  // to max_replicas ranks, `replicas` being the size it asks for. 0: unset, the job is not
  // elastic (both are set, or neither).
  int32_t min_replicas = 0;
  int32_t max_replicas = 0;
  // An elastic job runs only at sizes that divide this (a global batch split evenly); 0: any
  // size in its range.
  int32_t sizes_divide = 0;
  int32_t gpus_per_replica = 0;
  std::string gpu_type;
  // A share of one GPU in thousandths (1..1000, with gpus_per_replica 1); 0: whole GPUs. Its
  // device memory in bytes (0: no limit of its own). docs/gpu-sharing.md.
  int32_t gpu_share = 0;
  int64_t gpu_memory = 0;
  // Exactly one of these is set in a valid spec.
  std::optional<TrainerWorkload> trainer;
  std::optional<CommandWorkload> command;
  RestartPolicy restart_policy = RestartPolicy::kNever;
  // Restarts allowed under kOnFailure. Unset until validation fills in the default.
  std::optional<int32_t> backoff_limit;
  int64_t max_runtime_seconds = 0;
  std::map<std::string, std::string> labels;
  // Hang detection (core/run_watch.h); unset: the queue's, else 600. 0: off.
  std::optional<int64_t> progress_timeout_seconds;
  // The pre-run allreduce check (core/health_check.h); unset: on.
  std::optional<bool> health_check;
  // A one-rank job starts under mpirun only when this is set (StartsDirectly).
  bool use_mpirun = false;
  // Jobs this one waits for (core/dependency.h).
  std::vector<Dependency> after;
  // Set: this job is an array of tasks (core/array.h), and never runs itself.
  std::optional<ArraySpec> array;
  // The job's environment (core/environment.h): an OCI image every rank runs in, volumes, the
  // size of /dev/shm (0: the runtime's default) and the working directory. Empty image: the
  // ranks run on the worker hosts, and the rest must be empty too.
  std::string image;
  std::vector<Mount> mounts;
  int64_t shm_size_bytes = 0;
  std::string workdir;
  bool operator==(const JobSpec&) const = default;
};

// Whether the job's worker starts its one rank directly, without mpirun: one rank, and the spec
// does not ask for mpirun. Such an attempt has no pre-run check (no ring to check). An elastic
// job may change size, so it always starts under mpirun.
inline bool StartsDirectly(const JobSpec& spec) {
  return spec.replicas == 1 && spec.max_replicas <= 1 && !spec.use_mpirun;
}

// The bytes of a spec's variable-length fields (names, argv, env, labels): what a job's size
// in memory grows with, beyond a fixed part of about 2 KiB.
int64_t SpecBytes(const JobSpec& spec);

struct RankPlacement {
  int32_t rank = 0;
  std::string worker_id;
  std::string worker_address;
  std::vector<int32_t> gpu_indices;
  int32_t worker_port = 0;
  // The job's gpu_share and gpu_memory: what the rank holds of its one GPU (0: all of it).
  int32_t gpu_share = 0;
  int64_t gpu_memory = 0;
  // With a gpu_share: the job's team (Worker::shares_one_team); empty otherwise.
  std::string team{};
  bool operator==(const RankPlacement&) const = default;
};

struct JobEvent {
  std::string job_id;
  int64_t seq = 0;
  JobState state = JobState::kPending;
  int32_t attempt = 0;
  std::string reason;
  int32_t exit_code = 0;
  int64_t time_ms = 0;
  bool operator==(const JobEvent&) const = default;
};

struct Job {
  std::string id;
  JobSpec spec;
  JobState state = JobState::kPending;
  int32_t attempt = 0;
  // Attempts that ended by preemption: they do not count against backoff_limit.
  int32_t preemptions = 0;
  // An elastic job: the size of its last attempt (set when placed) or the size a resize
  // restarts it at; 0: none, or cleared by a preemption. A restart nobody asked for (a failure
  // under OnFailure, a scheduler restart) starts it at up to this or its replicas, whichever is
  // larger (StartSize), not below a size it had grown to. Stored with the job.
  int32_t last_replicas = 0;
  std::string request_id;
  // Submit order, assigned by the store; breaks priority ties.
  int64_t seq = 0;
  std::string pending_reason;
  std::vector<RankPlacement> placement;
  // Secret of the current attempt that authorises Exec on the job's workers.
  std::string token;
  // Seq of the last event recorded for this job (events are numbered 1, 2, ...).
  int64_t last_event_seq = 0;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  int64_t started_at_ms = 0;
  int64_t finished_at_ms = 0;
  int32_t exit_code = 0;
  std::string message;
  // The submitter's team (its token's); '' for jobs from before tokens existed.
  std::string team;
  // The newest checkpoint rank 0 reported (step, Unix ms); 0: none. In memory only, re-reported
  // by the workers after a scheduler restart.
  int64_t last_checkpoint_step = 0;
  int64_t last_checkpoint_time_ms = 0;
  // The digest spec.image resolved to ("sha256:..."), pinned by the first launcher's report
  // (JobWrite::kImageDigest) so every later attempt runs the same bytes. Empty: no image, or
  // not resolved yet.
  std::string image_digest;
  // The attempt whose pre-run check must be ringmaster-check's own mpirun (CheckPlan::
  // separately): the one after an attempt whose in-session check blamed a worker. -1: none.
  // In memory only: a scheduler restart forgets it, and the next attempt is checked in its
  // MPI_Init again (a repeated blame is verified then).
  int32_t separate_check_attempt = -1;
  // An array's tasks (spec.array): filled in for readers (GetJob, ListJobs), never stored.
  std::optional<ArrayStatus> array_status;
  // An elastic job's resizes, oldest first: its events that were one (IsResizeReason). Filled in
  // by GetJob from the stored events, never stored apart.
  std::vector<JobEvent> resizes;
};

struct Gpu {
  int32_t index = 0;
  std::string type;
  int64_t memory_bytes = 0;
  bool simulated = false;
  bool operator==(const Gpu&) const = default;
};

// Queues: teams' shares of the cluster (docs/scheduler.md, "Queues").
enum class PreemptWithinQueue { kNever, kLowerPriority, kLowerOrNewerEqualPriority };
enum class ReclaimWithinCohort { kNever, kLowerPriority, kAny };

// One resource of a queue: a GPU type by name, or "cpu" for CPU slots. Counts are GPUs (or
// slots).
struct ResourceQuota {
  int64_t nominal = 0;
  // How far above nominal the queue may go by borrowing; unset: as far as the cohort lends.
  std::optional<int64_t> borrowing_limit;
  // How much of its unused nominal others in the cohort may borrow; unset: all of it.
  std::optional<int64_t> lending_limit;
  bool operator==(const ResourceQuota&) const = default;
};

inline constexpr char kCpuResource[] = "cpu";
inline constexpr char kDefaultQueue[] = "default";

struct Queue {
  std::string name;
  // Queues of one cohort lend to each other; empty: the queue lends and borrows with nobody.
  std::string cohort;
  int32_t weight = 1;
  // By resource name. A queue with no quotas at all has no quota limits (only the cluster's
  // capacity bounds it); a resource missing from a non-empty map has nominal 0.
  std::map<std::string, ResourceQuota> quotas;
  PreemptWithinQueue within_queue = PreemptWithinQueue::kNever;
  ReclaimWithinCohort reclaim_within_cohort = ReclaimWithinCohort::kNever;
  // A job of this queue is not preempted before it has run this long.
  int64_t min_runtime_seconds = 0;
  // Teams whose members may submit to this queue, sorted; empty: every team (core/authz.h).
  std::vector<std::string> teams;
  // For jobs that leave JobSpec::progress_timeout_seconds unset; unset here: 600. 0: off.
  std::optional<int64_t> progress_timeout_seconds;
  // Idle reclaim (core/run_watch.h); 0: never.
  int64_t idle_timeout_seconds = 0;
  // How long GPUs stay idle before the queue's elastic jobs grow into them (core/elastic.h);
  // unset: ElasticOptions::idle_delay_ms.
  std::optional<int64_t> elastic_idle_delay_seconds;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  bool unlimited() const { return quotas.empty(); }
  bool operator==(const Queue&) const = default;
};

// One entry of the audit trail (who did what, when, from where). A submit's is stored in the
// job's own transaction (JobWrite::audit); the others by the Authenticator's audit thread.
struct AuditRecord {
  int64_t seq = 0;  // assigned by the store
  int64_t at_ms = 0;
  std::string principal;
  std::string team;
  std::string role;
  std::string peer;
  std::string action;
  std::string resource;
  std::string detail;
};

// Accounting: resource-milliseconds (GPU-ms of one GPU type, or CPU-slot-ms for "cpu") used by
// a queue's jobs.
struct QueueUsage {
  std::string queue;
  std::string resource;
  int64_t used_ms = 0;
  bool operator==(const QueueUsage&) const = default;
};

// Volumes: host paths the cluster's admins name and grant to teams (core/environment.h).
struct VolumeGrant {
  std::string team;
  bool read_only = false;  // the team's jobs must mount it read-only
  bool operator==(const VolumeGrant&) const = default;
};

struct Volume {
  std::string name;
  std::string host_path;
  std::vector<VolumeGrant> grants;  // sorted by team after validation
  std::string description;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  bool operator==(const Volume&) const = default;
};

enum class WorkerState { kReady, kLost };
const char* WorkerStateName(WorkerState state);

struct Worker {
  std::string id;
  std::string address;
  int32_t port = 0;
  std::vector<Gpu> gpus;
  int32_t cpu_slots = 0;
  WorkerState state = WorkerState::kReady;
  int64_t registered_at_ms = 0;
  int64_t last_heartbeat_ms = 0;
  // Set by a failed pre-run check that named this worker: it takes no new placements until
  // an admin clears it. Empty: healthy.
  std::string unhealthy_reason;
  // Ranks with a gpu_share here must all be one team's (RegisterWorker.shares_one_team): the
  // worker runs teams as their own Unix users, and its MPS daemon serves one user at a time.
  bool shares_one_team = false;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_TYPES_H_
