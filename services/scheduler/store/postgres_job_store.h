// PostgresJobStore: the JobStore of record, in PostgreSQL (tables jobs, job_events, placements,
// workers; see migrations.cc). Connect applies pending schema migrations first. Every call runs
// in its own transaction on a connection borrowed from a pool, so the store is thread-safe and
// several scheduler replicas may share the database. Postgres unreachable or gone is
// UNAVAILABLE naming the database host; a row that no longer parses is DATA_LOSS. No libpqxx
// exception leaves this class.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_POSTGRES_JOB_STORE_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_POSTGRES_JOB_STORE_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "scheduler/store/job_store.h"
#include "scheduler/store/postgres_pool.h"

namespace ringmaster::scheduler {

class PostgresJobStore : public JobStore {
 public:
  // Connects `pool_size` (>= 1) connections to `url` (a libpq URL or key=value conninfo) and
  // applies the migrations this database lacks. UNAVAILABLE when Postgres cannot be reached.
  static absl::StatusOr<std::unique_ptr<PostgresJobStore>> Connect(
      const std::string& url, int pool_size, PostgresPoolOptions options = {});

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

  // How many migrations Connect applied (0 when the schema was already current).
  int migrations_applied() const { return migrations_applied_; }
  // "host:port/dbname".
  const std::string& database() const { return pool_->database(); }

 private:
  absl::StatusOr<CommitResult> CommitCreates(const std::vector<const JobWrite*>& creates,
                                             int64_t epoch);
  absl::StatusOr<CommitResult> CommitInTransaction(
      const WriteBatch& batch, int64_t epoch,
      const std::map<std::string, const JobWrite*>& last_update,
      const std::set<std::string>& placement_changed,
      const std::vector<const JobWrite*>& creates);
  PostgresJobStore(std::unique_ptr<PostgresPool> pool, int migrations_applied);

  std::unique_ptr<PostgresPool> pool_;
  int migrations_applied_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_POSTGRES_JOB_STORE_H_
