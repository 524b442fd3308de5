#include "pending_answers.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

void Waiter::Settle() {
  WaiterDone answer;
  absl::StatusOr<CreateJobResult> stored = absl::UnknownError("not stored yet");
  {
    MutexLock lock(&mu);
    told = std::chrono::steady_clock::now();
    if (on_done) {
      answer = std::move(on_done);
      on_done = nullptr;
      stored = std::move(result);
    }
  }
  if (answer) answer(*this, std::move(stored));
  {
    MutexLock lock(&mu);
    done = true;
  }
  cv.NotifyAll();
}

void PendingAnswers::Start() {
  {
    MutexLock lock(&mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void PendingAnswers::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

bool PendingAnswers::Track(const std::shared_ptr<Waiter>& waiter,
                           std::chrono::steady_clock::time_point deadline) {
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      deadlines_.emplace_back(deadline, waiter);
      if (deadlines_.size() == 1) cv_.NotifyAll();
      return true;
    }
  }
  TimeOut(*waiter, true);
  return false;
}

void PendingAnswers::TimeOut(Waiter& waiter, bool stopping) const {
  WaiterDone on_done;
  {
    MutexLock lock(&waiter.mu);
    if (waiter.done || !waiter.on_done) return;
    on_done = std::move(waiter.on_done);
    waiter.on_done = nullptr;
  }
  // A submit's job is still in the writer's creates in flight: a delete of its queue waits
  // until it is settled.
  on_done(waiter,
          absl::UnavailableError(
              stopping ? absl::StrCat(waiter.what,
                                      " not stored: the scheduler is stopping; it may still be "
                                      "stored: retry with the same request")
                       : absl::StrCat(waiter.what, " not stored within ", write_wait_ms_,
                                      " ms (postgres slow or away); it may still be stored: "
                                      "retry with the same request")));
}

void PendingAnswers::Loop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    if (deadlines_.empty()) {
      cv_.Wait(&mu_);
      continue;
    }
    const auto at = deadlines_.front().first;
    if (std::chrono::steady_clock::now() < at) {
      cv_.WaitUntil(&mu_, at);
      continue;
    }
    std::shared_ptr<Waiter> waiter = deadlines_.front().second.lock();
    deadlines_.pop_front();
    if (!waiter) continue;  // settled, and its write gone
    lock.Unlock();
    TimeOut(*waiter, false);
    waiter.reset();
    lock.Lock();
  }
  auto left = std::move(deadlines_);
  deadlines_.clear();
  lock.Unlock();
  for (auto& [at, weak] : left) {
    if (std::shared_ptr<Waiter> waiter = weak.lock()) TimeOut(*waiter, true);
  }
}

}  // namespace ringmaster::scheduler
