// Reconnect backoff: doubling waits between a floor and a ceiling, with jitter so that many
// workers reconnecting to a restarted scheduler do not arrive in step. Randomness comes in as
// a number in [0, 1) so tests are deterministic. Not thread-safe.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_BACKOFF_H_
#define RINGMASTER_SERVICES_WORKER_CORE_BACKOFF_H_

#include <chrono>

namespace ringmaster::worker {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max)
      : initial_(initial), max_(max), next_(initial) {}
  // The wait before the next try: the current step scaled by 0.5 + jitter/2 (jitter in
  // [0, 1)); the step then doubles, up to the ceiling.
  std::chrono::milliseconds Next(double jitter);
  // After a success: back to the floor.
  void Reset() { next_ = initial_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds next_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_BACKOFF_H_
