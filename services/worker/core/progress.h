// A rank's activity counters (RankProgress on the wire) and the worker's rule for forwarding
// them to the scheduler: only on change, and no more often than a minimum interval per rank
// (the rank wrapper already sends at most one per second; this bounds a misbehaving one).
// Plain values; ProgressForwarder is not thread-safe (the agent calls it under its mutex).
#ifndef RINGMASTER_SERVICES_WORKER_CORE_PROGRESS_H_
#define RINGMASTER_SERVICES_WORKER_CORE_PROGRESS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ringmaster::worker {

// MpiPosition.call longer than this is refused (the wire contract, proto/.../agent.proto).
inline constexpr size_t kMaxMpiCallBytes = 64;

// Whether the rank is inside a blocking MPI call (MpiPosition on the wire).
struct MpiPosition {
  bool inside = false;
  std::string call;    // inside: this call; else the last one left; empty: none yet
  int64_t for_ms = 0;  // inside `call`, or out of MPI since leaving it, as of the report
  uint64_t calls_entered = 0;
  bool operator==(const MpiPosition&) const = default;
};

struct RankProgress {
  uint64_t collectives_entered = 0;
  uint64_t collectives_completed = 0;
  uint64_t step = 0;
  uint64_t progress_reports = 0;
  std::optional<double> step_images_per_second;  // came with the last progress report
  std::optional<double> images_per_second;       // last images/sec line the rank printed
  bool stopped = false;                          // the program is stopped (SIGSTOP, a tracer)
  std::optional<MpiPosition> mpi;                // absent: not known (no PMPI library)
  bool operator==(const RankProgress&) const = default;
};

class ProgressForwarder {
 public:
  explicit ProgressForwarder(int64_t min_interval_ms = 500) : min_interval_ms_(min_interval_ms) {}
  // True when `progress` of `rank` should go to the scheduler now (and records it as sent).
  bool ShouldForward(int32_t rank, const RankProgress& progress, int64_t now_ms);

 private:
  struct Sent {
    RankProgress progress;
    int64_t at_ms = 0;
  };
  int64_t min_interval_ms_;
  std::map<int32_t, Sent> sent_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_PROGRESS_H_
