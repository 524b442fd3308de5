// Watching a running attempt: hang detection and idle reclaim (docs/health.md), as pure
// decisions over what the ranks reported, on the caller's clock.
//
// 1. Every rank's wrapper reports its cumulative counters (collectives entered and completed,
//    counted by the preloaded PMPI library; progress reports from ringmaster-progress or the
//    trainer; the last images/sec) when they change, at most once per second. OnReport
//    records them; a rank *advances* when its completed collectives, its progress reports or
//    the blocking MPI calls it entered grow (a new call means the previous one returned). With
//    the counters comes, from wrappers that have it, the rank's MPI position: inside a blocking
//    MPI call (point-to-point, wait, probe, collective) or not, which call, and for how long.
// 2. An attempt shows a sign of life at its first collective, blocking MPI call or progress
//    report. Before that it is never judged hung: a plain `sleep` job, or one that does its
//    own thing without MPI or the helper, runs as it always did.
// 3. Hung: after a sign of life, no rank advanced for progress_timeout. The ranks the others
//    wait for are named: those whose program is stopped (SIGSTOP, a debugger), else, when
//    every rank's MPI position is known, those outside MPI while others wait inside it, else
//    those that entered the fewest collectives when the counts differ, else those whose last
//    advance is oldest (they stopped reporting first), else all. The verdict also says which
//    call the ranks inside MPI wait in, and for how long.
// 4. Idle: idle_timeout > 0 and no rank reported a non-zero images/sec since the attempt was
//    first seen RUNNING (or since its last non-zero sample) for idle_timeout.
// Not thread-safe: the scheduler owns one per running attempt, under its lock.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_RUN_WATCH_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_RUN_WATCH_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster::scheduler {

struct JobSpec;  // core/types.h, which includes this header
struct Queue;

// Used when neither the job nor its queue sets progress_timeout_seconds.
inline constexpr int64_t kDefaultProgressTimeoutSeconds = 600;

// MpiPosition.call longer than this is refused (the wire contract, proto/.../agent.proto).
inline constexpr size_t kMaxMpiCallBytes = 64;

// Whether a rank is inside a blocking MPI call, as its wrapper last saw it.
struct MpiPosition {
  bool inside = false;
  std::string call;    // inside: this call; else the last one it left; empty: none yet
  int64_t for_ms = 0;  // inside `call`, or out of MPI since leaving it, when reported
  uint64_t calls_entered = 0;
};

struct RankActivity {
  uint64_t collectives_entered = 0;
  uint64_t collectives_completed = 0;
  uint64_t step = 0;
  uint64_t progress_reports = 0;
  // The rank's current throughput (printed images/sec, or the last progress report's), if any.
  std::optional<double> images_per_second;
  // Its program is stopped (SIGSTOP, a debugger), as its wrapper last saw it.
  bool stopped = false;
  // Absent from older wrappers and from ranks without the PMPI library.
  std::optional<MpiPosition> mpi;
};

struct WatchLimits {
  int64_t progress_timeout_ms = 0;  // 0: no hang detection
  int64_t idle_timeout_ms = 0;      // 0: no idle reclaim
};

// A job's limits: its own progress timeout, else its queue's, else the default; the idle
// timeout is its queue's. `queue` null: the job's queue is not known.
WatchLimits WatchLimitsOf(const JobSpec& spec, const Queue* queue);

struct WatchVerdict {
  enum class Kind { kFine, kHung, kIdle };
  Kind kind = Kind::kFine;
  // kHung: the ranks the others wait for, ascending.
  std::vector<int32_t> stalled_ranks;
  // The event's text, e.g. "hung: ... waiting for rank 1 (...)".
  std::string reason;
};

class RunWatch {
 public:
  // `world_size` ranks, first seen RUNNING at `since_ms`.
  RunWatch(int32_t world_size, int64_t since_ms);

  void OnReport(int32_t rank, const RankActivity& activity, int64_t now_ms);
  bool showed_life() const { return life_ms_.has_value(); }
  WatchVerdict Judge(const WatchLimits& limits, int64_t now_ms) const;

 private:
  struct Rank {
    RankActivity activity;
    bool reported = false;
    int64_t last_advance_ms = 0;
    int64_t mpi_since_ms = 0;  // on our clock: when the rank entered or left activity.mpi->call
  };
  std::string DescribeMpi(const std::vector<int32_t>& ranks, int64_t now_ms, bool inside) const;
  int32_t world_size_;
  std::optional<int64_t> life_ms_;
  int64_t last_advance_ms_ = 0;  // any rank
  int64_t last_busy_ms_ = 0;     // last non-zero throughput, or when first seen RUNNING
  std::map<int32_t, Rank> ranks_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_RUN_WATCH_H_
