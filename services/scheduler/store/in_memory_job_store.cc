#include "scheduler/store/in_memory_job_store.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/core/environment.h"
#include "scheduler/store/store_checks.h"

namespace ringmaster::scheduler {
namespace {

using store_internal::CheckJobAndEvent;
using store_internal::SortedPlacement;

constexpr int kDefaultListLimit = 100;

JobEvent ForJob(const Job& job, JobEvent event) {
  event.job_id = job.id;
  return event;
}

// Only the mutable fields; spec, request id, seq and creation time stay as created.
void CopyMutableFields(const Job& from, std::vector<RankPlacement> placement, Job& to) {
  to.state = from.state;
  to.attempt = from.attempt;
  to.pending_reason = from.pending_reason;
  to.placement = std::move(placement);
  to.token = from.token;
  to.last_event_seq = from.last_event_seq;
  to.updated_at_ms = from.updated_at_ms;
  to.started_at_ms = from.started_at_ms;
  to.finished_at_ms = from.finished_at_ms;
  to.exit_code = from.exit_code;
  to.message = from.message;
  to.preemptions = from.preemptions;
  to.last_replicas = from.last_replicas;
}

}  // namespace

InMemoryJobStore::InMemoryJobStore() {
  Queue default_queue;
  default_queue.name = kDefaultQueue;
  queues_.emplace(default_queue.name, default_queue);
}

absl::StatusOr<CreateJobResult> InMemoryJobStore::CreateJob(const Job& job, const JobEvent& event) {
  RM_RETURN_IF_ERROR(CheckJobAndEvent(job, &event));
  RM_ASSIGN_OR_RETURN(auto placement, SortedPlacement(job.placement));
  MutexLock lock(&mu_);
  if (!job.request_id.empty()) {
    auto it = ids_by_request_.find(job.request_id);
    if (it != ids_by_request_.end()) return CreateJobResult{jobs_.at(it->second).job, true};
  }
  if (jobs_.contains(job.id)) {
    return absl::AlreadyExistsError(absl::StrCat("job ", job.id, " already exists"));
  }
  StoredJob stored;
  stored.job = job;
  stored.job.seq = next_seq_++;
  stored.job.placement = std::move(placement);
  stored.events.emplace(event.seq, ForJob(job, event));
  ids_by_seq_.emplace(stored.job.seq, job.id);
  if (!job.request_id.empty()) ids_by_request_.emplace(job.request_id, job.id);
  Job created = stored.job;
  jobs_.emplace(job.id, std::move(stored));
  return CreateJobResult{std::move(created), false};
}

absl::StatusOr<Job> InMemoryJobStore::GetJob(const std::string& id) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", id));
  return it->second.job;
}

absl::StatusOr<std::vector<Job>> InMemoryJobStore::ListJobs(const JobFilter& filter) {
  size_t limit = filter.limit > 0 ? filter.limit : kDefaultListLimit;
  MutexLock lock(&mu_);
  std::vector<Job> out;
  auto start = filter.before_seq
                   ? std::make_reverse_iterator(ids_by_seq_.lower_bound(*filter.before_seq))
                   : ids_by_seq_.rbegin();
  for (auto it = start; it != ids_by_seq_.rend() && out.size() < limit; ++it) {
    const Job& job = jobs_.at(it->second).job;
    if (filter.state.has_value() && job.state != *filter.state) continue;
    if (!filter.queue.empty() && job.spec.queue != filter.queue) continue;
    if (filter.team.has_value() && job.team != *filter.team) continue;
    if (!MatchesLabels(filter.labels, job.spec.labels)) continue;
    auto task = ParseTaskId(job.id);
    if (filter.array_id.empty() ? task.has_value() : !task || task->first != filter.array_id) {
      continue;
    }
    out.push_back(job);
  }
  return out;
}

absl::StatusOr<std::vector<Job>> InMemoryJobStore::ListActiveJobs() {
  MutexLock lock(&mu_);
  std::vector<Job> out;
  for (const auto& [seq, id] : ids_by_seq_) {
    const Job& job = jobs_.at(id).job;
    if (!IsTerminal(job.state)) out.push_back(job);
  }
  return out;
}

absl::StatusOr<ArrayTally> InMemoryJobStore::TallyArray(const std::string& array_id) {
  MutexLock lock(&mu_);
  ArrayTally tally;
  // Tasks sort after their array ("j-..." then "j-...-N"): the map holds them from there.
  for (auto it = jobs_.lower_bound(array_id + "-"); it != jobs_.end(); ++it) {
    auto task = ParseTaskId(it->first);
    if (!absl::StartsWith(it->first, array_id + "-")) break;
    if (!task || task->first != array_id) continue;
    const JobState state = it->second.job.state;
    tally.next = std::max(tally.next, task->second + 1);
    if (state == JobState::kPending) ++tally.pending;
    if (IsPlaced(state)) ++tally.running;
    if (state == JobState::kSucceeded) ++tally.succeeded;
    if (state == JobState::kCancelled) ++tally.cancelled;
    if (state == JobState::kFailed) {
      ++tally.failed;
      tally.failed_indices.push_back(task->second);
    }
  }
  std::sort(tally.failed_indices.begin(), tally.failed_indices.end());
  if (tally.failed_indices.size() > kShownFailedIndices) {
    tally.failed_indices.resize(kShownFailedIndices);
  }
  return tally;
}

absl::Status InMemoryJobStore::UpdateJob(const Job& job, const std::optional<JobEvent>& event) {
  RM_RETURN_IF_ERROR(CheckJobAndEvent(job, event.has_value() ? &*event : nullptr));
  RM_ASSIGN_OR_RETURN(auto placement, SortedPlacement(job.placement));
  MutexLock lock(&mu_);
  auto it = jobs_.find(job.id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", job.id));
  StoredJob& stored = it->second;
  if (IsTerminal(stored.job.state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.id, " is ", JobStateName(stored.job.state), " and can no longer change"));
  }
  if (event.has_value() && stored.events.contains(event->seq)) {
    return absl::AlreadyExistsError(
        absl::StrCat("job ", job.id, " already has an event with seq ", event->seq));
  }
  CopyMutableFields(job, std::move(placement), stored.job);
  if (event.has_value()) stored.events.emplace(event->seq, ForJob(job, *event));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> InMemoryJobStore::TakeLeadership() {
  MutexLock lock(&mu_);
  return ++epoch_;
}

absl::StatusOr<CommitResult> InMemoryJobStore::Commit(const WriteBatch& batch, int64_t epoch) {
  RM_RETURN_IF_ERROR(store_internal::CheckBatch(batch, epoch));
  MutexLock lock(&mu_);
  if (epoch != epoch_) return FencedError(epoch, epoch_);
  // All or nothing, as one Postgres transaction: everything that can refuse the whole batch is
  // checked before anything changes.
  std::set<std::pair<std::string, int64_t>> new_events;
  std::set<std::string> new_ids;
  std::string repeated;  // the first event stored before, if any
  for (const JobWrite& w : batch.jobs) {
    if (w.kind == JobWrite::Kind::kCreate) {
      new_ids.insert(w.job.id);
      continue;
    }
    // A missing job's checkpoint or digest is dropped.
    if (w.kind == JobWrite::Kind::kCheckpoint || w.kind == JobWrite::Kind::kImageDigest) continue;
    RM_RETURN_IF_ERROR(SortedPlacement(w.job.placement).status());
    auto it = jobs_.find(w.job.id);
    if (it == jobs_.end() && !new_ids.contains(w.job.id)) {
      return absl::NotFoundError(absl::StrCat("no job ", w.job.id));
    }
    if (!new_events.insert({w.job.id, w.event.seq}).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("job ", w.job.id, " already has an event with seq ", w.event.seq));
    }
    if (it != jobs_.end() && it->second.events.contains(w.event.seq) && repeated.empty()) {
      repeated = absl::StrCat("job ", w.job.id, " already has an event with seq ", w.event.seq);
    }
  }
  if (!repeated.empty()) {
    // Stored by an earlier try of this batch whose answer was lost, or a real conflict.
    std::map<std::pair<std::string, int64_t>, JobEvent> stored;
    std::set<std::string> ended;
    for (const JobWrite& w : batch.jobs) {
      auto it = jobs_.find(w.job.id);
      if (w.kind != JobWrite::Kind::kUpdate || it == jobs_.end()) continue;
      if (auto e = it->second.events.find(w.event.seq); e != it->second.events.end()) {
        stored[{w.job.id, w.event.seq}] = e->second;
      }
      if (IsTerminal(it->second.job.state)) ended.insert(w.job.id);
    }
    if (auto before = store_internal::StoredBefore(batch, stored, ended)) return *before;
    return absl::AlreadyExistsError(repeated);
  }
  CommitResult result;
  std::set<std::string> skipped;
  for (const JobWrite& w : batch.jobs) {
    if (w.kind == JobWrite::Kind::kCreate) {
      if (auto own = jobs_.find(w.job.id);
          own != jobs_.end() && store_internal::SameCreate(own->second.job, w.job)) {
        // Stored by an earlier try of this write whose answer was lost.
        result.created.push_back(CreateJobResult{own->second.job, false});
        continue;
      }
      if (!w.job.request_id.empty()) {
        auto it = ids_by_request_.find(w.job.request_id);
        if (it != ids_by_request_.end()) {
          result.created.push_back(CreateJobResult{jobs_.at(it->second).job, true});
          continue;
        }
      }
      if (jobs_.contains(w.job.id)) {
        result.created.push_back(
            absl::AbortedError(absl::StrCat("job id ", w.job.id, " is taken; choose another")));
        continue;
      }
      StoredJob stored;
      stored.job = w.job;
      stored.job.seq = next_seq_++;
      stored.events.emplace(w.event.seq, ForJob(w.job, w.event));
      ids_by_seq_.emplace(stored.job.seq, w.job.id);
      if (!w.job.request_id.empty()) ids_by_request_.emplace(w.job.request_id, w.job.id);
      result.created.push_back(CreateJobResult{stored.job, false});
      jobs_.emplace(w.job.id, std::move(stored));
      continue;
    }
    if (w.kind == JobWrite::Kind::kImageDigest) {
      auto it = jobs_.find(w.job.id);
      if (it != jobs_.end() && it->second.job.image_digest.empty()) {
        it->second.job.image_digest = w.job.image_digest;
      }
      continue;
    }
    if (w.kind == JobWrite::Kind::kCheckpoint) {
      auto it = jobs_.find(w.job.id);
      if (it != jobs_.end() &&
          w.job.last_checkpoint_time_ms >= it->second.job.last_checkpoint_time_ms) {
        it->second.job.last_checkpoint_step = w.job.last_checkpoint_step;
        it->second.job.last_checkpoint_time_ms = w.job.last_checkpoint_time_ms;
      }
      continue;
    }
    StoredJob& stored = jobs_.at(w.job.id);
    if (skipped.contains(w.job.id) || IsTerminal(stored.job.state)) {
      if (skipped.insert(w.job.id).second) result.skipped.push_back(w.job.id);
      continue;
    }
    std::vector<RankPlacement> placement =
        w.placement_changed ? *SortedPlacement(w.job.placement) : stored.job.placement;
    CopyMutableFields(w.job, std::move(placement), stored.job);
    stored.events.emplace(w.event.seq, ForJob(w.job, w.event));
    if (w.usage) usage_[{w.usage->queue, w.usage->resource}] += w.usage->used_ms;
  }
  for (const Worker& worker : batch.workers) workers_[worker.id] = worker;
  return result;
}

absl::StatusOr<std::vector<JobEvent>> InMemoryJobStore::ListEvents(const std::string& job_id,
                                                                   int64_t after_seq) {
  MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  std::vector<JobEvent> out;
  for (auto e = it->second.events.upper_bound(after_seq); e != it->second.events.end(); ++e) {
    out.push_back(e->second);
  }
  return out;
}

absl::Status InMemoryJobStore::UpsertWorker(const Worker& worker) {
  if (worker.id.empty()) return absl::InvalidArgumentError("worker id is empty");
  MutexLock lock(&mu_);
  workers_[worker.id] = worker;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckBaseline>> InMemoryJobStore::ListCheckBaselines() {
  MutexLock lock(&mu_);
  std::vector<CheckBaseline> out;
  for (const auto& [shape, b] : baselines_) out.push_back(b);
  return out;
}

absl::Status InMemoryJobStore::PutCheckBaseline(const CheckBaseline& baseline) {
  if (baseline.shape.empty()) return absl::InvalidArgumentError("baseline shape is empty");
  MutexLock lock(&mu_);
  baselines_[baseline.shape] = baseline;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Worker>> InMemoryJobStore::ListWorkers() {
  MutexLock lock(&mu_);
  std::vector<Worker> out;
  out.reserve(workers_.size());
  for (const auto& [id, worker] : workers_) out.push_back(worker);
  return out;
}

absl::StatusOr<Queue> InMemoryJobStore::CreateQueue(const Queue& queue, int64_t epoch) {
  MutexLock lock(&mu_);
  if (epoch != epoch_) return FencedError(epoch, epoch_);
  if (!queues_.emplace(queue.name, queue).second) {
    return absl::AlreadyExistsError(absl::StrCat("queue ", queue.name, " already exists"));
  }
  return queue;
}

absl::StatusOr<Queue> InMemoryJobStore::UpdateQueue(const Queue& queue, int64_t epoch) {
  MutexLock lock(&mu_);
  if (epoch != epoch_) return FencedError(epoch, epoch_);
  auto it = queues_.find(queue.name);
  if (it == queues_.end()) return absl::NotFoundError(absl::StrCat("no queue ", queue.name));
  Queue stored = queue;
  stored.created_at_ms = it->second.created_at_ms;
  it->second = stored;
  return stored;
}

absl::StatusOr<Queue> InMemoryJobStore::GetQueue(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) return absl::NotFoundError(absl::StrCat("no queue ", name));
  return it->second;
}

absl::StatusOr<std::vector<Queue>> InMemoryJobStore::ListQueues() {
  MutexLock lock(&mu_);
  std::vector<Queue> queues;
  queues.reserve(queues_.size());
  for (const auto& [name, queue] : queues_) queues.push_back(queue);
  return queues;
}

absl::Status InMemoryJobStore::DeleteQueue(const std::string& name, int64_t epoch) {
  MutexLock lock(&mu_);
  if (epoch != epoch_) return FencedError(epoch, epoch_);
  if (name == kDefaultQueue) {
    return absl::FailedPreconditionError("queue default cannot be deleted");
  }
  auto it = queues_.find(name);
  if (it == queues_.end()) return absl::NotFoundError(absl::StrCat("no queue ", name));
  int64_t live = 0;
  for (const auto& [id, stored] : jobs_) {
    if (stored.job.spec.queue == name && !IsTerminal(stored.job.state)) ++live;
  }
  if (live > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("queue ", name, " has ", live,
                     " live jobs (PENDING, STARTING or RUNNING); cancel them "
                     "or wait for them to end first"));
  }
  queues_.erase(it);
  std::erase_if(usage_, [&](const auto& entry) { return entry.first.first == name; });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<QueueUsage>> InMemoryJobStore::ListQueueUsage() {
  MutexLock lock(&mu_);
  std::vector<QueueUsage> out;
  for (const auto& [key, ms] : usage_) out.push_back({key.first, key.second, ms});
  return out;
}

absl::StatusOr<Volume> InMemoryJobStore::CreateVolume(const Volume& volume, int64_t epoch) {
  MutexLock lock(&mu_);
  if (epoch != epoch_) return FencedError(epoch, epoch_);
  if (!volumes_.emplace(volume.name, volume).second) {
    return absl::AlreadyExistsError(absl::StrCat("volume ", volume.name, " already exists"));
  }
  return volume;
}

absl::StatusOr<Volume> InMemoryJobStore::UpdateVolume(const Volume& volume, int64_t epoch) {
  MutexLock lock(&mu_);
  if (epoch != epoch_) return FencedError(epoch, epoch_);
  auto it = volumes_.find(volume.name);
  if (it == volumes_.end()) return absl::NotFoundError(absl::StrCat("no volume ", volume.name));
  Volume stored = volume;
  stored.created_at_ms = it->second.created_at_ms;
  it->second = stored;
  return stored;
}

absl::StatusOr<Volume> InMemoryJobStore::GetVolume(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = volumes_.find(name);
  if (it == volumes_.end()) return absl::NotFoundError(absl::StrCat("no volume ", name));
  return it->second;
}

absl::StatusOr<std::vector<Volume>> InMemoryJobStore::ListVolumes() {
  MutexLock lock(&mu_);
  std::vector<Volume> out;
  out.reserve(volumes_.size());
  for (const auto& [name, volume] : volumes_) out.push_back(volume);
  return out;
}

absl::Status InMemoryJobStore::DeleteVolume(const std::string& name, int64_t epoch) {
  MutexLock lock(&mu_);
  if (epoch != epoch_) return FencedError(epoch, epoch_);
  auto it = volumes_.find(name);
  if (it == volumes_.end()) return absl::NotFoundError(absl::StrCat("no volume ", name));
  // The oldest live job that mounts it, as Postgres picks it (by seq).
  for (const auto& [seq, id] : ids_by_seq_) {
    const Job& job = jobs_.at(id).job;
    if (!IsTerminal(job.state) && MountsVolume(job.spec, name)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume ", name, " is mounted by job ", id, ", which is ", JobStateName(job.state),
          "; cancel it or wait for it to end first"));
    }
  }
  volumes_.erase(it);
  return absl::OkStatus();
}

absl::Status InMemoryJobStore::SetRegistryCredential(const StoredRegistryCredential& credential,
                                                     int64_t epoch) {
  MutexLock lock(&mu_);
  if (epoch != epoch_) return FencedError(epoch, epoch_);
  registry_credentials_[{credential.team, credential.registry}] = credential;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StoredRegistryCredential>> InMemoryJobStore::ListRegistryCredentials() {
  MutexLock lock(&mu_);
  std::vector<StoredRegistryCredential> out;
  out.reserve(registry_credentials_.size());
  for (const auto& [key, credential] : registry_credentials_) out.push_back(credential);
  return out;
}

absl::Status InMemoryJobStore::DeleteRegistryCredential(const std::string& team,
                                                        const std::string& registry,
                                                        int64_t epoch) {
  MutexLock lock(&mu_);
  if (epoch != epoch_) return FencedError(epoch, epoch_);
  if (registry_credentials_.erase({team, registry}) == 0) {
    return absl::NotFoundError(
        absl::StrCat("team ", team, " has no credentials for registry ", registry));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
