// PendingAnswers: the Submit and Cancel calls waiting for their write to be stored, and the
// deadline thread that answers those whose write is late.
//
// A Waiter is one such answer: its write carries it to the writer, which sets its result and
// settles it after the commit (Waiter::Settle); if write_wait_ms passes first, the deadline
// thread answers it UNAVAILABLE instead (the write may still land; a retry with the same
// request finds it). Whichever comes first answers; the other finds on_done taken.
//
// Threads: one, the deadline thread (Start to Stop), which calls on_done with no lock held.
// Locks: mu_ guards the deadline queue; a Waiter's own mu guards its answer. Neither is held
// while taking another lock.
#ifndef RINGMASTER_SERVICES_SCHEDULER_PENDING_ANSWERS_H_
#define RINGMASTER_SERVICES_SCHEDULER_PENDING_ANSWERS_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "store/job_store.h"

namespace ringmaster::scheduler {

// One Submit or Cancel waiting for its write. on_done is called once: by Settle after the
// commit (with `result`), or by the deadline thread when the write is late, whichever is first.
struct Waiter;
using WaiterDone = std::function<void(Waiter&, absl::StatusOr<CreateJobResult>)>;
struct Waiter {
  // Tells on_done the result (if the deadline did not come first), then marks it settled.
  void Settle();

  Mutex mu;
  CondVar cv;
  bool done ABSL_GUARDED_BY(mu) = false;  // settled: stored and taken into memory, or refused
  absl::StatusOr<CreateJobResult> result ABSL_GUARDED_BY(mu) = absl::UnknownError("not stored yet");
  // When its batch's commit began and ended (set by the writer before it settles, read after
  // under mu) and when the waiter was told (the writer's steady clock): a submit's wait, split
  // by stage (ringmaster_submit_wait_seconds).
  std::chrono::steady_clock::time_point commit_begun, committed;
  std::chrono::steady_clock::time_point told ABSL_GUARDED_BY(mu);
  std::string what;  // "job ID", for the timeout's message
  WaiterDone on_done ABSL_GUARDED_BY(mu);
  // A write dropped unstored (the writers stopping) still answers its submit.
  ~Waiter() {
    if (on_done) {
      on_done(*this, absl::UnavailableError(
                         "the scheduler stopped before storing it; retry with the same request"));
    }
  }
};

class PendingAnswers {
 public:
  explicit PendingAnswers(int64_t write_wait_ms) : write_wait_ms_(write_wait_ms) {}
  ~PendingAnswers() { Stop(); }
  PendingAnswers(const PendingAnswers&) = delete;
  PendingAnswers& operator=(const PendingAnswers&) = delete;

  void Start();
  // Answers every waiter still waiting (its write will not be stored by this process now).
  void Stop();

  // `waiter` is answered UNAVAILABLE at `deadline` unless settled before. Deadlines are
  // expected in order (each is write_wait_ms after its hand-over). false, with the waiter
  // answered at once: not started or stopping, so nothing would store it.
  bool Track(const std::shared_ptr<Waiter>& waiter, std::chrono::steady_clock::time_point deadline);

 private:
  // Answers a waiter whose write is still on its way (UNAVAILABLE), once.
  void TimeOut(Waiter& waiter, bool stopping) const;
  // Answers the waiters not settled by their deadline, oldest first; when stopping, every one
  // still waiting.
  void Loop();

  const int64_t write_wait_ms_;
  Mutex mu_;
  CondVar cv_;
  // Oldest first. Weak: a settled waiter's memory goes with its write, not after write_wait_ms.
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::weak_ptr<Waiter>>> deadlines_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = true;  // until Start: nothing would answer a waiter
  std::thread thread_;
};

// Starts an asynchronous call with a callback and waits for its one answer. SubmitAsync and
// CancelAsync answer within write_wait_ms at the latest (the deadline thread), or when stopping.
template <typename Answer, typename Begin>
Answer AwaitAnswer(Begin&& begin) {
  struct Shared {
    Mutex mu;
    CondVar cv;
    std::optional<Answer> answer ABSL_GUARDED_BY(mu);
  };
  auto shared = std::make_shared<Shared>();
  begin([shared](Answer answer) {
    {
      MutexLock lock(&shared->mu);
      shared->answer = std::move(answer);
    }
    shared->cv.NotifyAll();
  });
  MutexLock lock(&shared->mu);
  shared->cv.Wait(&shared->mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared->mu) {
    return shared->answer.has_value();
  });
  // Moved, not copied: a status shared between threads would be released across them (its
  // refcount lives in Abseil's uninstrumented library, where ThreadSanitizer cannot see it).
  return *std::move(shared->answer);
}

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_PENDING_ANSWERS_H_
