#include "scheduler/store/in_memory_coordination.h"

#include "common/status_macros.h"
#include "scheduler/store/store_checks.h"

namespace ringmaster::scheduler {

using store_internal::CheckBeat;
using store_internal::CheckLease;
using store_internal::CheckQueueEntry;

absl::Status InMemoryPendingQueue::Push(const QueueEntry& entry) {
  RM_RETURN_IF_ERROR(CheckQueueEntry(entry));
  MutexLock lock(&mu_);
  auto it = keys_.find(entry.job_id);
  if (it != keys_.end()) {
    order_.erase(it->second);
    keys_.erase(it);
  }
  Key key{-entry.priority, entry.seq, entry.job_id};
  order_.insert(key);
  keys_.emplace(entry.job_id, std::move(key));
  return absl::OkStatus();
}

absl::Status InMemoryPendingQueue::Remove(const std::string& job_id) {
  MutexLock lock(&mu_);
  auto it = keys_.find(job_id);
  if (it != keys_.end()) {
    order_.erase(it->second);
    keys_.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> InMemoryPendingQueue::List() {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  out.reserve(order_.size());
  for (const auto& key : order_) out.push_back(std::get<2>(key));
  return out;
}

absl::Status InMemoryPendingQueue::Rebuild(const std::vector<QueueEntry>& entries) {
  // All or nothing: check every entry before touching the queue.
  for (const auto& entry : entries) RM_RETURN_IF_ERROR(CheckQueueEntry(entry));
  MutexLock lock(&mu_);
  order_.clear();
  keys_.clear();
  for (const auto& entry : entries) {
    auto it = keys_.find(entry.job_id);
    if (it != keys_.end()) order_.erase(it->second);  // a later entry for a job wins
    Key key{-entry.priority, entry.seq, entry.job_id};
    order_.insert(key);
    keys_[entry.job_id] = std::move(key);
  }
  intact_ = true;
  ++rebuilds_;
  return absl::OkStatus();
}

int InMemoryPendingQueue::rebuilds() {
  MutexLock lock(&mu_);
  return rebuilds_;
}

absl::StatusOr<bool> InMemoryPendingQueue::Intact() {
  MutexLock lock(&mu_);
  return intact_;
}

void InMemoryPendingQueue::Lose() {
  MutexLock lock(&mu_);
  order_.clear();
  keys_.clear();
  intact_ = false;
}

InMemoryLiveness::InMemoryLiveness(const Clock* clock) : clock_(clock) {
  RM_CHECK(clock != nullptr);
}

absl::Status InMemoryLiveness::Beat(const std::string& worker_id, int64_t ttl_ms) {
  RM_RETURN_IF_ERROR(CheckBeat(worker_id, ttl_ms));
  MutexLock lock(&mu_);
  expires_at_ms_[worker_id] = clock_->NowMs() + ttl_ms;
  return absl::OkStatus();
}

absl::StatusOr<std::set<std::string>> InMemoryLiveness::Alive(
    const std::vector<std::string>& worker_ids) {
  MutexLock lock(&mu_);
  int64_t now = clock_->NowMs();
  std::set<std::string> alive;
  for (const auto& id : worker_ids) {
    auto it = expires_at_ms_.find(id);
    if (it != expires_at_ms_.end() && now < it->second) alive.insert(id);
  }
  return alive;
}

InMemoryLeaderLease::InMemoryLeaderLease(const Clock* clock) : clock_(clock) {
  RM_CHECK(clock != nullptr);
}

absl::StatusOr<bool> InMemoryLeaderLease::Hold(const std::string& holder, int64_t ttl_ms) {
  RM_RETURN_IF_ERROR(CheckLease(holder, ttl_ms));
  MutexLock lock(&mu_);
  const int64_t now = clock_->NowMs();
  if (holder_ != holder && !holder_.empty() && now < expires_at_ms_) return false;
  holder_ = holder;
  expires_at_ms_ = now + ttl_ms;
  return true;
}

absl::Status InMemoryLeaderLease::Release(const std::string& holder) {
  MutexLock lock(&mu_);
  if (holder_ == holder) holder_.clear();
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
