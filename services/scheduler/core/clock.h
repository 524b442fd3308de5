// Time comes in through Clock so core logic and its tests stay deterministic.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_CLOCK_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ringmaster::scheduler {

class Clock {
 public:
  virtual ~Clock() = default;
  // Unix time in milliseconds.
  virtual int64_t NowMs() const = 0;
};

class SystemClock : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock the test moves by hand. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_; }
  void Advance(int64_t ms) { now_ms_ += ms; }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_CLOCK_H_
