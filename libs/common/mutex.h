// Mutex, SharedMutex, their scoped locks and CondVar: std::mutex, std::shared_mutex and
// std::condition_variable with Clang's thread-safety attributes, so that `-Wthread-safety` (the
// thread-safety stage, CMakePresets.json) checks every ABSL_GUARDED_BY field and every
// ABSL_EXCLUSIVE_LOCKS_REQUIRED function. The std types are not capabilities to Clang, so
// annotations naming them check nothing.
//
// Why wrappers and not absl::Mutex: the same pthread mutex and condition variable underneath,
// inlined, so behaviour and speed stay what they were (no change of fairness, spinning or
// wake-ups on the scheduler's hot paths); and ThreadSanitizer (the tsan stage) intercepts
// pthread's locks, but not absl::Mutex from Debian's uninstrumented Abseil, whose locking it
// would not see (it would take what the lock orders for races).
//
// Use them as Abseil's: `MutexLock lock(&mu_);`, `cv_.Wait(&mu_, pred)`. A predicate reads
// guarded fields in a lambda of its own, which the analysis checks apart from the caller: mark
// the lambda with the lock it runs under, `[this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {...}`.
//
// Thread-safety: as the std types they wrap.
#ifndef RINGMASTER_LIBS_COMMON_MUTEX_H_
#define RINGMASTER_LIBS_COMMON_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace ringmaster {

// Debian's Abseil is built with absl::Mutex's deadlock detection on: a lock-order graph updated
// on every lock taken inside gRPC (which uses absl::Mutex), a few per cent of every service's CPU
// in profiles. Each binary's main turns it off; the TSan and thread-safety stages check ours.
void TurnOffAbslDeadlockDetection();

class CondVar;

class ABSL_LOCKABLE Mutex {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the analysis the caller holds it where it cannot see so (checks nothing at run time).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope, like std::unique_lock: Unlock and Lock let go of it and take it
// again inside the scope (a slow call made without the lock).
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_->Lock();
    held_ = true;
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    held_ = false;
    mu_->Unlock();
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// Waits on a Mutex the caller holds; std::condition_variable's semantics (spurious wake-ups
// included where there is no predicate). The bool results are the predicate's at the end.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) {
    Adopted lock(mu);
    cv_.wait(lock.lock);
  }
  template <typename Clock, typename Duration>
  std::cv_status WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) {
    Adopted lock(mu);
    return cv_.wait_until(lock.lock, deadline);
  }
  template <typename Rep, typename Period>
  std::cv_status WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) {
    Adopted lock(mu);
    return cv_.wait_for(lock.lock, timeout);
  }

  // The predicate's own annotation (mu's field, `this->mu_`) is not one the analysis can match
  // to `*mu` here, so these are not analysed; callers still must hold *mu.
  template <typename Predicate>
  void Wait(Mutex* mu, Predicate pred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    cv_.wait(lock.lock, std::move(pred));
  }
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate pred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    return cv_.wait_until(lock.lock, deadline, std::move(pred));
  }
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout, Predicate pred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted lock(mu);
    return cv_.wait_for(lock.lock, timeout, std::move(pred));
  }

 private:
  // The caller's lock as the std::unique_lock std::condition_variable takes; the caller keeps
  // it when the wait returns.
  struct Adopted {
    explicit Adopted(Mutex* mu) : lock(mu->mu_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    std::unique_lock<std::mutex> lock;
  };

  std::condition_variable cv_;
};

// Readers share it, a writer holds it alone: std::shared_mutex.
class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  bool ReaderTryLock() ABSL_SHARED_TRYLOCK_FUNCTION(true) { return mu_.try_lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex alone for its scope.
class ABSL_SCOPED_LOCKABLE WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~WriterMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds a SharedMutex shared for its scope; with std::adopt_lock, one the caller took shared
// already (after a ReaderTryLock, say).
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ReaderMutexLock(SharedMutex* mu, std::adopt_lock_t) ABSL_SHARED_LOCKS_REQUIRED(mu) : mu_(mu) {}
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_MUTEX_H_
