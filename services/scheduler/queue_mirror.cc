#include "queue_mirror.h"

#include <chrono>

#include "common/log.h"

namespace ringmaster::scheduler {

QueueMirror::QueueMirror(PendingQueue* queue,
                         std::function<std::vector<QueueEntry>()> stored_pending,
                         std::function<void()> rebuilt)
    : queue_(queue), stored_pending_(std::move(stored_pending)), rebuilt_(std::move(rebuilt)) {}

void QueueMirror::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void QueueMirror::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void QueueMirror::Update(std::vector<Change> changes) {
  if (changes.empty()) return;
  {
    MutexLock lock(&mu_);
    for (auto& [id, entry] : changes) changes_[id] = std::move(entry);
  }
  cv_.NotifyAll();
}

// The mirror's protocol:
//  1. wait (at most a second; not before the first round) for stored queue changes;
//  2. when the queue lost its contents (first run, a Redis flush or an empty restart), rebuild it
//     from the stored pending jobs and renew the liveness keys of connected workers, which went
//     with it;
//  3. else apply the changes; while Redis is away keep them (newer ones replace older).
void QueueMirror::Loop() {
  bool rebuilt = false;
  bool first = true;
  while (true) {
    PendingQueue::Changes ops;
    {
      MutexLock lock(&mu_);
      // The first round is at once: the mirror is rebuilt as the leader starts (no worker is
      // connected yet), not after the first change or a second later.
      if (!first) {
        cv_.WaitFor(&mu_, std::chrono::seconds(1), [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !changes_.empty() || stopping_;
        });
      }
      first = false;
      if (stopping_) return;
      ops.swap(changes_);
    }
    auto intact = queue_->Intact();
    bool applied = intact.ok();
    if (intact.ok() && (!*intact || !rebuilt)) {
      std::vector<QueueEntry> entries = stored_pending_();
      if (rebuilt) {
        RM_LOG(kWarning) << "pending queue lost its contents (Redis flushed or restarted); rebuilt";
      }
      applied = queue_->Rebuild(entries).ok();
      if (applied) {
        rebuilt = true;
        rebuilt_();
      }
    } else if (intact.ok()) {
      // One round trip for the lot: one per job was most of this thread's time in a burst of
      // submits.
      applied = queue_->Apply(ops).ok();
    }
    if (!applied) {
      MutexLock lock(&mu_);
      for (auto& [id, entry] : ops) changes_.try_emplace(id, std::move(entry));
    }
  }
}

}  // namespace ringmaster::scheduler
