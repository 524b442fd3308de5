#include "aside_writer.h"

#include "common/log.h"

namespace ringmaster::scheduler {

AsideWriter::AsideWriter(JobStore* store, Liveness* liveness, int64_t heartbeat_timeout_ms,
                         bool background)
    : store_(store),
      liveness_(liveness),
      heartbeat_timeout_ms_(heartbeat_timeout_ms),
      background_(background) {}

void AsideWriter::Start() {
  if (background_) thread_ = std::thread([this] { Loop(); });
}

void AsideWriter::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void AsideWriter::Beat(const std::string& worker_id) {
  if (!background_) {
    if (auto s = liveness_->Beat(worker_id, heartbeat_timeout_ms_); !s.ok()) {
      RM_LOG(kWarning) << "heartbeat of " << worker_id << " not recorded: " << s;
    }
    return;
  }
  {
    MutexLock lock(&mu_);
    beats_due_.insert(worker_id);
  }
  cv_.NotifyOne();
}

void AsideWriter::StoreBaseline(const CheckBaseline& baseline) {
  if (!background_) {
    if (auto s = store_->PutCheckBaseline(baseline); !s.ok()) {
      RM_LOG(kWarning) << "baseline of shape " << baseline.shape << " not stored: " << s;
    }
    return;
  }
  {
    MutexLock lock(&mu_);
    baselines_due_.push_back(baseline);
  }
  cv_.NotifyOne();
}

void AsideWriter::Loop() {
  while (true) {
    std::set<std::string> beats;
    std::deque<CheckBaseline> baselines;
    {
      MutexLock lock(&mu_);
      cv_.Wait(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !beats_due_.empty() || !baselines_due_.empty() || stopping_;
      });
      if (stopping_ && baselines_due_.empty()) return;
      if (!stopping_) beats.swap(beats_due_);
      baselines.swap(baselines_due_);
    }
    // A beat that fails is not retried: the next heartbeat brings another, and a pass re-beats
    // a worker whose key vanished while its heartbeats kept coming.
    for (const std::string& id : beats) {
      if (auto s = liveness_->Beat(id, heartbeat_timeout_ms_); !s.ok()) {
        RM_LOG(kWarning) << "heartbeat of " << id << " not recorded: " << s;
      }
    }
    for (const CheckBaseline& b : baselines) {
      if (auto s = store_->PutCheckBaseline(b); !s.ok()) {
        RM_LOG(kWarning) << "baseline of shape " << b.shape << " not stored: " << s;
      }
    }
  }
}

}  // namespace ringmaster::scheduler
