// JobStore: the system of record for jobs, their events and placements, and workers.
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
#include "core/types.h"

namespace ringmaster::scheduler {

struct CreateJobResult {
  Job job;
  // True when the request id was seen before: `job` is the earlier job, nothing was written.
  bool existing = false;
};

struct JobFilter {
  std::optional<JobState> state;
  std::string queue;  // empty: any
  int limit = 100;    // newest first
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

  // Writes the job's mutable fields (state, attempt, pending_reason, placement, token,
  // last_event_seq, times, exit_code, message) and, when `event` is given, appends it, all in
  // one transaction. The placement rows are replaced by job.placement.
  // FAILED_PRECONDITION when the stored job is already terminal (nothing leaves a terminal
  // state); NOT_FOUND when there is no such job.
  virtual absl::Status UpdateJob(const Job& job, const std::optional<JobEvent>& event) = 0;

  // Events of a job with seq > after_seq, in seq order.
  virtual absl::StatusOr<std::vector<JobEvent>> ListEvents(const std::string& job_id,
                                                           int64_t after_seq) = 0;

  // Inserts or replaces a worker by id.
  virtual absl::Status UpsertWorker(const Worker& worker) = 0;
  virtual absl::StatusOr<std::vector<Worker>> ListWorkers() = 0;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_JOB_STORE_H_
