#include "fault_injecting_job_store.h"

#include <chrono>
#include <thread>

namespace ringmaster::scheduler {

void FaultInjectingJobStore::Fail(Call call, absl::Status status, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  Fault& f = faults_[call];
  f.status = std::move(status);
  f.times = times;
}

void FaultInjectingJobStore::Hang(Call call) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_[call].hang = true;
}

void FaultInjectingJobStore::Delay(Call call, int64_t ms) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_[call].delay_ms = ms;
}

void FaultInjectingJobStore::Heal() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    faults_.clear();
    ++heal_generation_;
  }
  cv_.notify_all();
}

int FaultInjectingJobStore::calls(Call call) {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_[call];
}

int FaultInjectingJobStore::hung() {
  std::lock_guard<std::mutex> lock(mu_);
  return hung_;
}

absl::Status FaultInjectingJobStore::Enter(Call call) {
  int64_t delay_ms = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ++calls_[call];
    auto it = faults_.find(call);
    if (it == faults_.end()) return absl::OkStatus();
    if (it->second.hang) {
      const uint64_t generation = heal_generation_;
      ++hung_;
      cv_.wait(lock, [&] { return heal_generation_ != generation; });
      --hung_;
      return absl::OkStatus();
    }
    Fault& f = it->second;
    if (!f.status.ok() && f.times != 0) {
      if (f.times > 0) --f.times;
      return f.status;
    }
    delay_ms = f.delay_ms;
  }
  if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  return absl::OkStatus();
}

absl::StatusOr<CreateJobResult> FaultInjectingJobStore::CreateJob(const Job& job,
                                                                  const JobEvent& event) {
  if (auto s = Enter(Call::kCreateJob); !s.ok()) return s;
  return store_->CreateJob(job, event);
}

absl::StatusOr<Job> FaultInjectingJobStore::GetJob(const std::string& id) {
  if (auto s = Enter(Call::kGetJob); !s.ok()) return s;
  return store_->GetJob(id);
}

absl::StatusOr<std::vector<Job>> FaultInjectingJobStore::ListJobs(const JobFilter& filter) {
  if (auto s = Enter(Call::kListJobs); !s.ok()) return s;
  return store_->ListJobs(filter);
}

absl::StatusOr<std::vector<Job>> FaultInjectingJobStore::ListActiveJobs() {
  if (auto s = Enter(Call::kListActiveJobs); !s.ok()) return s;
  return store_->ListActiveJobs();
}

absl::StatusOr<ArrayTally> FaultInjectingJobStore::TallyArray(const std::string& array_id) {
  return store_->TallyArray(array_id);  // no faults of its own: read only at start-up and by Get
}

absl::Status FaultInjectingJobStore::UpdateJob(const Job& job,
                                               const std::optional<JobEvent>& event) {
  if (auto s = Enter(Call::kUpdateJob); !s.ok()) return s;
  return store_->UpdateJob(job, event);
}

absl::StatusOr<std::vector<JobEvent>> FaultInjectingJobStore::ListEvents(const std::string& job_id,
                                                                         int64_t after_seq) {
  if (auto s = Enter(Call::kListEvents); !s.ok()) return s;
  return store_->ListEvents(job_id, after_seq);
}

absl::StatusOr<int64_t> FaultInjectingJobStore::TakeLeadership() {
  if (auto s = Enter(Call::kTakeLeadership); !s.ok()) return s;
  return store_->TakeLeadership();
}

absl::StatusOr<CommitResult> FaultInjectingJobStore::Commit(const WriteBatch& batch,
                                                            int64_t epoch) {
  if (auto s = Enter(Call::kCommit); !s.ok()) return s;
  return store_->Commit(batch, epoch);
}

absl::Status FaultInjectingJobStore::UpsertWorker(const Worker& worker) {
  if (auto s = Enter(Call::kUpsertWorker); !s.ok()) return s;
  return store_->UpsertWorker(worker);
}

absl::StatusOr<std::vector<Worker>> FaultInjectingJobStore::ListWorkers() {
  if (auto s = Enter(Call::kListWorkers); !s.ok()) return s;
  return store_->ListWorkers();
}

absl::StatusOr<std::vector<CheckBaseline>> FaultInjectingJobStore::ListCheckBaselines() {
  return store_->ListCheckBaselines();
}

absl::Status FaultInjectingJobStore::PutCheckBaseline(const CheckBaseline& baseline) {
  return store_->PutCheckBaseline(baseline);
}

absl::StatusOr<Queue> FaultInjectingJobStore::CreateQueue(const Queue& queue, int64_t epoch) {
  if (auto s = Enter(Call::kCreateQueue); !s.ok()) return s;
  return store_->CreateQueue(queue, epoch);
}

absl::StatusOr<Queue> FaultInjectingJobStore::UpdateQueue(const Queue& queue, int64_t epoch) {
  if (auto s = Enter(Call::kUpdateQueue); !s.ok()) return s;
  return store_->UpdateQueue(queue, epoch);
}

absl::StatusOr<Queue> FaultInjectingJobStore::GetQueue(const std::string& name) {
  if (auto s = Enter(Call::kGetQueue); !s.ok()) return s;
  return store_->GetQueue(name);
}

absl::StatusOr<std::vector<Queue>> FaultInjectingJobStore::ListQueues() {
  if (auto s = Enter(Call::kListQueues); !s.ok()) return s;
  return store_->ListQueues();
}

absl::Status FaultInjectingJobStore::DeleteQueue(const std::string& name, int64_t epoch) {
  if (auto s = Enter(Call::kDeleteQueue); !s.ok()) return s;
  return store_->DeleteQueue(name, epoch);
}

absl::StatusOr<std::vector<QueueUsage>> FaultInjectingJobStore::ListQueueUsage() {
  if (auto s = Enter(Call::kListQueueUsage); !s.ok()) return s;
  return store_->ListQueueUsage();
}

absl::StatusOr<Volume> FaultInjectingJobStore::CreateVolume(const Volume& volume, int64_t epoch) {
  if (auto s = Enter(Call::kCreateVolume); !s.ok()) return s;
  return store_->CreateVolume(volume, epoch);
}

absl::StatusOr<Volume> FaultInjectingJobStore::UpdateVolume(const Volume& volume, int64_t epoch) {
  if (auto s = Enter(Call::kUpdateVolume); !s.ok()) return s;
  return store_->UpdateVolume(volume, epoch);
}

absl::StatusOr<Volume> FaultInjectingJobStore::GetVolume(const std::string& name) {
  if (auto s = Enter(Call::kGetVolume); !s.ok()) return s;
  return store_->GetVolume(name);
}

absl::StatusOr<std::vector<Volume>> FaultInjectingJobStore::ListVolumes() {
  if (auto s = Enter(Call::kListVolumes); !s.ok()) return s;
  return store_->ListVolumes();
}

absl::Status FaultInjectingJobStore::DeleteVolume(const std::string& name, int64_t epoch) {
  if (auto s = Enter(Call::kDeleteVolume); !s.ok()) return s;
  return store_->DeleteVolume(name, epoch);
}

absl::Status FaultInjectingJobStore::SetRegistryCredential(
    const StoredRegistryCredential& credential, int64_t epoch) {
  if (auto s = Enter(Call::kSetRegistryCredential); !s.ok()) return s;
  return store_->SetRegistryCredential(credential, epoch);
}

absl::StatusOr<std::vector<StoredRegistryCredential>>
FaultInjectingJobStore::ListRegistryCredentials() {
  if (auto s = Enter(Call::kListRegistryCredentials); !s.ok()) return s;
  return store_->ListRegistryCredentials();
}

absl::Status FaultInjectingJobStore::DeleteRegistryCredential(const std::string& team,
                                                              const std::string& registry,
                                                              int64_t epoch) {
  if (auto s = Enter(Call::kDeleteRegistryCredential); !s.ok()) return s;
  return store_->DeleteRegistryCredential(team, registry, epoch);
}

}  // namespace ringmaster::scheduler
