#include "pending_answers.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

void Waiter::Settle() {
  WaiterDone answer;
  absl::StatusOr<CreateJobResult> stored = absl::UnknownError("not stored yet");
  {
    std::lock_guard<std::mutex> lock(mu);
    told = std::chrono::steady_clock::now();
    if (on_done) {
      answer = std::move(on_done);
      on_done = nullptr;
      stored = std::move(result);
    }
  }
  if (answer) answer(*this, std::move(stored));
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
}

void PendingAnswers::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void PendingAnswers::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool PendingAnswers::Track(const std::shared_ptr<Waiter>& waiter,
                           std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      deadlines_.emplace_back(deadline, waiter);
      if (deadlines_.size() == 1) cv_.notify_all();
      return true;
    }
  }
  TimeOut(*waiter, true);
  return false;
}

void PendingAnswers::TimeOut(Waiter& waiter, bool stopping) const {
  WaiterDone on_done;
  {
    std::lock_guard<std::mutex> lock(waiter.mu);
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
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (deadlines_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const auto at = deadlines_.front().first;
    if (std::chrono::steady_clock::now() < at) {
      cv_.wait_until(lock, at);
      continue;
    }
    std::shared_ptr<Waiter> waiter = deadlines_.front().second.lock();
    deadlines_.pop_front();
    if (!waiter) continue;  // settled, and its write gone
    lock.unlock();
    TimeOut(*waiter, false);
    waiter.reset();
    lock.lock();
  }
  auto left = std::move(deadlines_);
  deadlines_.clear();
  lock.unlock();
  for (auto& [at, weak] : left) {
    if (std::shared_ptr<Waiter> waiter = weak.lock()) TimeOut(*waiter, true);
  }
}

}  // namespace ringmaster::scheduler
