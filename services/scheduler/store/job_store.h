// JobStore: the system of record for jobs, their events and placements, workers, queues and
// volumes.
// Implementations: PostgresJobStore (production) and InMemoryJobStore (a real implementation
// for unit tests). Both pass tests/store/job_store_conformance.h. Implementations are
// thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_JOB_STORE_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_JOB_STORE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/core/array.h"
#include "scheduler/core/health_check.h"
#include "scheduler/core/job_list.h"
#include "scheduler/core/registry_credentials.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

struct CreateJobResult {
  Job job;
  // True when the request id was seen before: `job` is the earlier job, nothing was written.
  bool existing = false;
};

// One durable change of a job, part of a WriteBatch.
struct JobWrite {
  enum class Kind {
    kCreate,  // a new job (attempt 0, unplaced, created = updated) and its first event (seq 1)
    kUpdate,  // the job's mutable fields after a transition, and the transition's event
    // Only the job's last checkpoint (Job::last_checkpoint_step and _time_ms), no event: kept
    // unless the stored one is newer, also for a job that has ended.
    kCheckpoint,
    // Only the job's image_digest (Job::image_digest), no event: stored where the job has none
    // yet (the first launcher's report pins it), also for a job that has ended.
    kImageDigest,
  };
  Kind kind = Kind::kUpdate;
  Job job;
  JobEvent event;
  // kUpdate: true when the transition placed or released the job, so its stored placement is
  // rewritten; otherwise it is left alone.
  bool placement_changed = false;
  // kUpdate ending a running attempt: what it used, added to its queue's accounting in the same
  // transaction (not when the write is skipped because the stored job had already ended).
  std::optional<QueueUsage> usage;
  // kCreate: the submit's audit entry (resource: the job id), stored in the same transaction
  // when the job is created, not when its request id named an earlier job. The in-memory
  // store, which has no audit trail, drops it.
  std::optional<AuditRecord> audit;
};

// Everything the scheduler decided since its last commit, stored in one transaction.
struct WriteBatch {
  std::vector<JobWrite> jobs;  // in decision order; several may name one job
  std::vector<Worker> workers;  // upserts
  bool empty() const { return jobs.empty() && workers.empty(); }
};

struct CommitResult {
  // One entry per kCreate write, in batch order: the job as stored (or the earlier job of its
  // request id, existing = true), or ABORTED when its job id was taken (choose another).
  std::vector<absl::StatusOr<CreateJobResult>> created;
  // Jobs whose kUpdate writes were skipped because the stored job had already ended.
  std::vector<std::string> skipped;
};

// The status of a write refused because a newer leader epoch was taken (see TakeLeadership).
absl::Status FencedError(int64_t epoch, int64_t current);
bool IsFenced(const absl::Status& status);

struct JobFilter {
  std::optional<JobState> state;
  std::string queue;  // empty: any
  // Only jobs of this team (Job::team); nullopt: any team.
  std::optional<std::string> team;
  int limit = 100;  // newest first
  // Keyset paging (core/job_list.h): only jobs with seq below this.
  std::optional<int64_t> before_seq;
  // Every requirement must hold (MatchesLabels).
  std::vector<LabelRequirement> labels;
  // Only the tasks of this array (core/array.h: ids "<array_id>-<index>"); empty: no task of
  // any array (jobs and arrays only).
  std::string array_id;
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Stores a new job and its first event in one transaction and assigns job.seq. When a job
  // with the same non-empty request_id exists, returns it with existing = true and writes
  // nothing; this holds under concurrent calls with the same request id.
  virtual absl::StatusOr<CreateJobResult> CreateJob(const Job& job, const JobEvent& event) = 0;

  // NOT_FOUND when there is no such job. Includes the stored placement.
  virtual absl::StatusOr<Job> GetJob(const std::string& id) = 0;
  virtual absl::StatusOr<std::vector<Job>> ListJobs(const JobFilter& filter) = 0;
  // Every job not in a terminal state, with placements, in seq order (used at start-up).
  virtual absl::StatusOr<std::vector<Job>> ListActiveJobs() = 0;
  // The tasks of array `array_id` stored so far, counted (all zero when there are none).
  virtual absl::StatusOr<ArrayTally> TallyArray(const std::string& array_id) = 0;

  // Writes the job's mutable fields (state, attempt, pending_reason, placement, token,
  // last_event_seq, times, exit_code, message) and, when `event` is given, appends it, all in
  // one transaction. The placement rows are replaced by job.placement.
  // FAILED_PRECONDITION when the stored job is already terminal (nothing leaves a terminal
  // state); NOT_FOUND when there is no such job.
  virtual absl::Status UpdateJob(const Job& job, const std::optional<JobEvent>& event) = 0;

  // Events of a job with seq > after_seq, in seq order.
  virtual absl::StatusOr<std::vector<JobEvent>> ListEvents(const std::string& job_id,
                                                           int64_t after_seq) = 0;

  // Fencing. A scheduler that becomes leader calls TakeLeadership before it reads any state;
  // it returns a new epoch, greater than every earlier one. Commit stores a batch only while
  // `epoch` is still the newest: a leader that lost its lease (stalled, cut off from Redis)
  // gets FencedError (FAILED_PRECONDITION, IsFenced) and writes nothing, so it cannot act
  // beside its successor. Taking an epoch waits for commits under the old one to finish.
  virtual absl::StatusOr<int64_t> TakeLeadership() = 0;

  // Stores the whole batch in one transaction, or nothing. INVALID_ARGUMENT for a malformed
  // write (see UpdateJob); UNAVAILABLE (and other retryable codes) leave nothing written.
  virtual absl::StatusOr<CommitResult> Commit(const WriteBatch& batch, int64_t epoch) = 0;

  // Inserts or replaces a worker by id.
  virtual absl::Status UpsertWorker(const Worker& worker) = 0;
  virtual absl::StatusOr<std::vector<Worker>> ListWorkers() = 0;

  // Baselines of the pre-run check, one per shape (core/health_check.h). Learned data, not
  // fenced: a deposed leader's last sample is as good as the new leader's.
  virtual absl::StatusOr<std::vector<CheckBaseline>> ListCheckBaselines() = 0;
  virtual absl::Status PutCheckBaseline(const CheckBaseline& baseline) = 0;

  // Queues (docs/scheduler.md, "Queues"). The queue `default` (no cohort, no quota limits)
  // exists from the first start: the Postgres schema migration stores it, the in-memory store
  // starts with it. Writes are fenced by `epoch` as Commit is (FencedError), and store the
  // queue as given, times included: validation is the caller's.
  // ALREADY_EXISTS when a queue of that name exists.
  virtual absl::StatusOr<Queue> CreateQueue(const Queue& queue, int64_t epoch) = 0;
  // Replaces every field of the queue named queue.name except created_at_ms, and returns the
  // queue as stored. NOT_FOUND when there is no such queue.
  virtual absl::StatusOr<Queue> UpdateQueue(const Queue& queue, int64_t epoch) = 0;
  // NOT_FOUND when there is no such queue.
  virtual absl::StatusOr<Queue> GetQueue(const std::string& name) = 0;
  // Every queue, by name.
  virtual absl::StatusOr<std::vector<Queue>> ListQueues() = 0;
  // NOT_FOUND when there is no such queue; FAILED_PRECONDITION for `default`, and while a job
  // of the queue is not terminal (checked in the same transaction as the delete).
  virtual absl::Status DeleteQueue(const std::string& name, int64_t epoch) = 0;

  // Volumes (core/environment.h; docs/environments.md). Writes are fenced by `epoch` as queue
  // writes are, and store the volume as given, times included: validation is the caller's.
  // ALREADY_EXISTS when a volume of that name exists.
  virtual absl::StatusOr<Volume> CreateVolume(const Volume& volume, int64_t epoch) = 0;
  // Replaces host_path, grants, description and updated_at_ms of the volume volume.name, and
  // returns the volume as stored. NOT_FOUND when there is no such volume.
  virtual absl::StatusOr<Volume> UpdateVolume(const Volume& volume, int64_t epoch) = 0;
  // NOT_FOUND when there is no such volume.
  virtual absl::StatusOr<Volume> GetVolume(const std::string& name) = 0;
  // Every volume, by name.
  virtual absl::StatusOr<std::vector<Volume>> ListVolumes() = 0;
  // NOT_FOUND when there is no such volume; FAILED_PRECONDITION naming a job while a job that
  // is not terminal mounts it (checked in the same transaction as the delete).
  virtual absl::Status DeleteVolume(const std::string& name, int64_t epoch) = 0;

  // Teams' registry credentials (core/registry_credentials.h), one per (team, registry), their
  // secrets sealed by the scheduler before they come here (StoredRegistryCredential). Writes
  // are fenced by `epoch` and store the credential as given: validation and sealing are the
  // caller's. Set inserts it or replaces the team's one for that registry.
  virtual absl::Status SetRegistryCredential(const StoredRegistryCredential& credential,
                                             int64_t epoch) = 0;
  // Every credential with its sealed secret (for the scheduler's memory, never for an answer),
  // by team then registry.
  virtual absl::StatusOr<std::vector<StoredRegistryCredential>> ListRegistryCredentials() = 0;
  // NOT_FOUND when the team has none for that registry.
  virtual absl::Status DeleteRegistryCredential(const std::string& team,
                                                const std::string& registry, int64_t epoch) = 0;

  // Accounting stored by Commit (JobWrite::usage), summed per queue and resource, by queue then
  // resource. A deleted queue's usage is deleted with it.
  virtual absl::StatusOr<std::vector<QueueUsage>> ListQueueUsage() = 0;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_JOB_STORE_H_
