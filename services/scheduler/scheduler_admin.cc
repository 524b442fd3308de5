// Queue and volume administration (see "Queues" and "Volumes"): validated, stored under
// queue_writes_ outside mu_, then applied to the live state.
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "core/validation.h"
#include "scheduler.h"

namespace ringmaster::scheduler {

std::optional<std::vector<std::string>> Scheduler::QueueTeams(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) return std::nullopt;
  return it->second.teams;
}

Scheduler::QueueTallies Scheduler::TallyQueuesLocked() const {
  QueueTallies tallies;
  std::vector<const Job*> running;
  for (const auto& [key, n] : live_counts_) {
    if (key.first == JobState::kPending) tallies.pending[key.second] += n;
  }
  for (const std::string& id : placed_ids_) {
    const Job& job = jobs_.at(id);
    if (job.state == JobState::kRunning) running.push_back(&job);
  }
  tallies.used_ms = WithRunning(usage_ms_, running, cluster_, clock_->NowMs());
  return tallies;
}

QueueStatus Scheduler::QueueStatusLocked(const Queue& queue, const QueueTallies& tallies) const {
  // As of the last pass (its ledger), and the jobs waiting and running now.
  QueueStatus status;
  for (const auto& [resource, u] : ledger_.UsageOf(queue.name)) {
    status.resources[resource] = ResourceUsage{u.used, u.borrowed, u.lent, 0};
  }
  for (auto it = tallies.used_ms.lower_bound({queue.name, ""});
       it != tallies.used_ms.end() && it->first.first == queue.name; ++it) {
    status.resources[it->first.second].used_seconds = static_cast<double>(it->second) / 1000.0;
  }
  auto it = tallies.pending.find(queue.name);
  status.pending_jobs = it == tallies.pending.end() ? 0 : it->second;
  status.weighted_share = ledger_.Share(queue.name);
  return status;
}

absl::Status Scheduler::QueueWriteError(const absl::Status& stored) const {
  if (IsFenced(stored)) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  return stored;
}

absl::StatusOr<QueueView> Scheduler::CreateQueue(const Queue& in) {
  auto valid = ValidateQueue(in);
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  Queue queue = *std::move(valid);
  queue.created_at_ms = queue.updated_at_ms = clock_->NowMs();
  WriterMutexLock writes(&queue_writes_);
  auto stored = store_->CreateQueue(queue, epoch_);
  if (!stored.ok()) return QueueWriteError(stored.status());
  MutexLock lock(&mu_);
  queues_[stored->name] = *stored;
  RM_LOG(kInfo) << "queue " << stored->name << " created";
  return QueueView{*stored, QueueStatusLocked(*stored, TallyQueuesLocked())};
}

absl::StatusOr<QueueView> Scheduler::UpdateQueue(const Queue& in) {
  auto valid = ValidateQueue(in);
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  Queue queue = *std::move(valid);
  queue.updated_at_ms = clock_->NowMs();
  WriterMutexLock writes(&queue_writes_);
  {
    MutexLock lock(&mu_);
    auto it = queues_.find(queue.name);
    if (it == queues_.end()) {
      return absl::NotFoundError(absl::StrCat("no queue '", queue.name, "'"));
    }
    queue.created_at_ms = it->second.created_at_ms;
  }
  auto stored = store_->UpdateQueue(queue, epoch_);
  if (!stored.ok()) return QueueWriteError(stored.status());
  QueueView view;
  {
    MutexLock lock(&mu_);
    queues_[stored->name] = *stored;
    RM_LOG(kInfo) << "queue " << stored->name << " updated";
    // New quotas or weights may let waiting jobs start: the next pass looks at all of them.
    capacity_grew_ = true;
    view = {*stored, QueueStatusLocked(*stored, TallyQueuesLocked())};
  }
  Wake();
  return view;
}

absl::StatusOr<QueueView> Scheduler::GetQueue(const std::string& name) {
  if (auto s = ValidateQueueName(name, "name"); !s.ok()) return s;
  MutexLock lock(&mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) return absl::NotFoundError(absl::StrCat("no queue '", name, "'"));
  return QueueView{it->second, QueueStatusLocked(it->second, TallyQueuesLocked())};
}

std::vector<QueueView> Scheduler::ListQueues() {
  MutexLock lock(&mu_);
  std::vector<QueueView> out;
  out.reserve(queues_.size());
  const QueueTallies tallies = TallyQueuesLocked();
  for (const auto& [name, queue] : queues_) {
    out.push_back({queue, QueueStatusLocked(queue, tallies)});
  }
  return out;
}

absl::Status Scheduler::DeleteQueue(const std::string& name) {
  if (auto s = ValidateQueueName(name, "name"); !s.ok()) return s;
  if (name == kDefaultQueue) {
    return absl::FailedPreconditionError(
        "queue default cannot be deleted: jobs without a queue go there");
  }
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  WriterMutexLock writes(&queue_writes_);
  // Live jobs of the queue, wherever they are on their way: no submit to it is between its
  // queue check and its hand-over now (writes is held); those handed over are among the
  // writer's creates in flight, answered or not, until settled, and a job is settled only after
  // the writer added it to jobs_, so jobs_ is read after.
  int64_t live = writer_.CreatesInFlight(name);
  {
    MutexLock lock(&mu_);
    if (!queues_.contains(name)) {
      return absl::NotFoundError(absl::StrCat("no queue '", name, "'"));
    }
    // Decided in memory, perhaps not stored yet; the store counts what it has.
    for (const auto& [key, n] : live_counts_) live += key.second == name ? n : 0;
  }
  if (live > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("queue ", name, " has ", live,
                     " live jobs (PENDING, STARTING or RUNNING); cancel them "
                     "or wait for them to end first"));
  }
  if (auto s = store_->DeleteQueue(name, epoch_); !s.ok()) return QueueWriteError(s);
  MutexLock lock(&mu_);
  queues_.erase(name);
  std::erase_if(usage_ms_, [&](const auto& entry) { return entry.first.first == name; });
  RM_LOG(kInfo) << "queue " << name << " deleted";
  return absl::OkStatus();
}

std::map<std::string, Queue> Scheduler::QueuesSnapshot() {
  MutexLock lock(&mu_);
  return queues_;
}

absl::StatusOr<Volume> Scheduler::CreateVolume(const Volume& in) {
  auto valid = ValidateVolume(in);
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  Volume volume = *std::move(valid);
  volume.created_at_ms = volume.updated_at_ms = clock_->NowMs();
  WriterMutexLock writes(&queue_writes_);
  auto stored = store_->CreateVolume(volume, epoch_);
  if (!stored.ok()) return QueueWriteError(stored.status());
  MutexLock lock(&mu_);
  volumes_[stored->name] = *stored;
  RM_LOG(kInfo) << "volume " << stored->name << " created at " << stored->host_path;
  return *stored;
}

absl::StatusOr<Volume> Scheduler::UpdateVolume(const Volume& in) {
  auto valid = ValidateVolume(in);
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  Volume volume = *std::move(valid);
  volume.updated_at_ms = clock_->NowMs();
  WriterMutexLock writes(&queue_writes_);
  {
    MutexLock lock(&mu_);
    auto it = volumes_.find(volume.name);
    if (it == volumes_.end()) {
      return absl::NotFoundError(absl::StrCat("no volume '", volume.name, "'"));
    }
    volume.created_at_ms = it->second.created_at_ms;
  }
  auto stored = store_->UpdateVolume(volume, epoch_);
  if (!stored.ok()) return QueueWriteError(stored.status());
  MutexLock lock(&mu_);
  // Jobs placed from now on mount the new host path; running ones keep what they were given.
  volumes_[stored->name] = *stored;
  RM_LOG(kInfo) << "volume " << stored->name << " updated";
  return *stored;
}

absl::StatusOr<Volume> Scheduler::GetVolume(const std::string& name, const std::string& team,
                                            bool admin) {
  if (auto s = ValidateVolumeName(name, "name"); !s.ok()) return s;
  MutexLock lock(&mu_);
  auto it = volumes_.find(name);
  // One not granted to the caller's team reads as one that does not exist.
  if (it == volumes_.end() || !VolumeVisibleTo(it->second, team, admin)) {
    return absl::NotFoundError(absl::StrCat("no volume '", name, "'"));
  }
  return it->second;
}

std::vector<Volume> Scheduler::ListVolumes(const std::string& team, bool admin) {
  MutexLock lock(&mu_);
  std::vector<Volume> out;
  for (const auto& [name, volume] : volumes_) {
    if (VolumeVisibleTo(volume, team, admin)) out.push_back(volume);
  }
  return out;
}

absl::Status Scheduler::DeleteVolume(const std::string& name) {
  if (auto s = ValidateVolumeName(name, "name"); !s.ok()) return s;
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  WriterMutexLock writes(&queue_writes_);
  // As for a queue (DeleteQueue): no submit is between its mount check and its hand-over now;
  // those handed over are in flight until settled, and only then in jobs_, read after.
  std::string mounting = writer_.CreateInFlightMounting(name);
  {
    MutexLock lock(&mu_);
    if (!volumes_.contains(name))
      return absl::NotFoundError(absl::StrCat("no volume '", name, "'"));
    for (const auto& [id, job] : jobs_) {
      if (!mounting.empty()) break;
      if (!IsTerminal(job.state) && MountsVolume(job.spec, name)) mounting = id;
    }
  }
  if (!mounting.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("volume ", name, " is mounted by job ", mounting,
                     ", which is live (PENDING, STARTING or RUNNING); cancel it or wait for it "
                     "to end first"));
  }
  if (auto s = store_->DeleteVolume(name, epoch_); !s.ok()) return QueueWriteError(s);
  MutexLock lock(&mu_);
  volumes_.erase(name);
  RM_LOG(kInfo) << "volume " << name << " deleted";
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
