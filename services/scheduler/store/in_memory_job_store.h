// InMemoryJobStore: a JobStore that keeps everything in process memory. A real implementation
// with the same semantics as PostgresJobStore (it passes the same conformance suite), used by
// unit tests and single-process development runs; nothing survives the process. Thread-safe:
// one mutex guards all state, so every call is atomic.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_IN_MEMORY_JOB_STORE_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_IN_MEMORY_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "scheduler/store/job_store.h"

namespace ringmaster::scheduler {

class InMemoryJobStore : public JobStore {
 public:
  // Starts with the queue `default`, as a new Postgres database does.
  InMemoryJobStore();

  absl::StatusOr<CreateJobResult> CreateJob(const Job& job, const JobEvent& event) override;
  absl::StatusOr<Job> GetJob(const std::string& id) override;
  absl::StatusOr<std::vector<Job>> ListJobs(const JobFilter& filter) override;
  absl::StatusOr<std::vector<Job>> ListActiveJobs() override;
  absl::StatusOr<ArrayTally> TallyArray(const std::string& array_id) override;
  absl::Status UpdateJob(const Job& job, const std::optional<JobEvent>& event) override;
  absl::StatusOr<std::vector<JobEvent>> ListEvents(const std::string& job_id,
                                                   int64_t after_seq) override;
  absl::StatusOr<int64_t> TakeLeadership() override;
  absl::StatusOr<CommitResult> Commit(const WriteBatch& batch, int64_t epoch) override;
  absl::Status UpsertWorker(const Worker& worker) override;
  absl::StatusOr<std::vector<Worker>> ListWorkers() override;
  absl::StatusOr<std::vector<CheckBaseline>> ListCheckBaselines() override;
  absl::Status PutCheckBaseline(const CheckBaseline& baseline) override;
  absl::StatusOr<Queue> CreateQueue(const Queue& queue, int64_t epoch) override;
  absl::StatusOr<Queue> UpdateQueue(const Queue& queue, int64_t epoch) override;
  absl::StatusOr<Queue> GetQueue(const std::string& name) override;
  absl::StatusOr<std::vector<Queue>> ListQueues() override;
  absl::Status DeleteQueue(const std::string& name, int64_t epoch) override;
  absl::StatusOr<std::vector<QueueUsage>> ListQueueUsage() override;
  absl::StatusOr<Volume> CreateVolume(const Volume& volume, int64_t epoch) override;
  absl::StatusOr<Volume> UpdateVolume(const Volume& volume, int64_t epoch) override;
  absl::StatusOr<Volume> GetVolume(const std::string& name) override;
  absl::StatusOr<std::vector<Volume>> ListVolumes() override;
  absl::Status DeleteVolume(const std::string& name, int64_t epoch) override;
  absl::Status SetRegistryCredential(const StoredRegistryCredential& credential,
                                     int64_t epoch) override;
  absl::StatusOr<std::vector<StoredRegistryCredential>> ListRegistryCredentials() override;
  absl::Status DeleteRegistryCredential(const std::string& team, const std::string& registry,
                                        int64_t epoch) override;

 private:
  struct StoredJob {
    Job job;
    std::map<int64_t, JobEvent> events;  // by seq
  };

  Mutex mu_;
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;                          // the newest leader epoch taken
  std::map<std::string, StoredJob> jobs_ ABSL_GUARDED_BY(mu_);      // by id
  std::map<int64_t, std::string> ids_by_seq_ ABSL_GUARDED_BY(mu_);  // submit order
  std::map<std::string, std::string> ids_by_request_ ABSL_GUARDED_BY(mu_);  // request id -> job id
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);              // by id
  // (queue, resource) -> ms
  std::map<std::pair<std::string, std::string>, int64_t> usage_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, CheckBaseline> baselines_ ABSL_GUARDED_BY(mu_);  // by shape
  std::map<std::string, Queue> queues_ ABSL_GUARDED_BY(mu_);             // by name
  std::map<std::string, Volume> volumes_ ABSL_GUARDED_BY(mu_);           // by name
  std::map<std::pair<std::string, std::string>, StoredRegistryCredential> registry_credentials_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_IN_MEMORY_JOB_STORE_H_
