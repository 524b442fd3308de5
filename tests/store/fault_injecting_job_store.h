// FaultInjectingJobStore: a JobStore wrapper that fails, delays or hangs chosen calls, the way
// LevelDB's FaultInjectionTestEnv does for files, so tests can take Postgres away at a precise
// moment instead of hoping for a real outage. Calls without a fault pass through to the wrapped
// store. Thread-safe.
#ifndef RINGMASTER_TESTS_STORE_FAULT_INJECTING_JOB_STORE_H_
#define RINGMASTER_TESTS_STORE_FAULT_INJECTING_JOB_STORE_H_

#include <condition_variable>
#include <map>
#include <mutex>

#include "scheduler/store/job_store.h"

namespace ringmaster::scheduler {

class FaultInjectingJobStore : public JobStore {
 public:
  enum class Call {
    kCreateJob,
    kGetJob,
    kListJobs,
    kListActiveJobs,
    kUpdateJob,
    kListEvents,
    kTakeLeadership,
    kCommit,
    kUpsertWorker,
    kListWorkers,
    kCreateQueue,
    kUpdateQueue,
    kGetQueue,
    kListQueues,
    kDeleteQueue,
    kListQueueUsage,
    kCreateVolume,
    kUpdateVolume,
    kGetVolume,
    kListVolumes,
    kDeleteVolume,
    kSetRegistryCredential,
    kListRegistryCredentials,
    kDeleteRegistryCredential,
  };

  // `store` must outlive this object.
  explicit FaultInjectingJobStore(JobStore* store) : store_(store) {}
  ~FaultInjectingJobStore() override { Heal(); }

  // The next `times` calls of `call` (every one, for times < 0) return `status` without
  // reaching the wrapped store.
  void Fail(Call call, absl::Status status, int times = -1);
  // Calls of `call` block until Heal() (as on a SIGSTOPped database), then go through.
  void Hang(Call call);
  // Calls of `call` wait `ms` before they go through.
  void Delay(Call call, int64_t ms);
  // Removes every fault and wakes hung calls.
  void Heal();
  // How many calls of `call` were made, faulted or not.
  int calls(Call call);
  // How many calls are blocked by Hang() right now.
  int hung();

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
  struct Fault {
    absl::Status status;
    int times = 0;  // < 0: always
    bool hang = false;
    int64_t delay_ms = 0;
  };
  // OK to go on to the wrapped store, or the injected error.
  absl::Status Enter(Call call);

  JobStore* store_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Call, Fault> faults_;
  std::map<Call, int> calls_;
  int hung_ = 0;
  uint64_t heal_generation_ = 0;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_TESTS_STORE_FAULT_INJECTING_JOB_STORE_H_
