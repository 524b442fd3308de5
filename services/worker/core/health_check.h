// The pre-run allreduce check's result and its verdict (docs/health-check.md): what
// ringmaster-check wrote, parsed, and the decision whether the ring may run the job and, if
// not, which worker slowed it. Plain data in, plain data out; no I/O.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_HEALTH_CHECK_H_
#define RINGMASTER_SERVICES_WORKER_CORE_HEALTH_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::worker {

struct CheckRankTiming {
  int32_t rank = 0;
  std::string worker_id;
  // Seconds spent inside the check's allreduces, waiting for the others included.
  double wait_seconds = 0;
  bool operator==(const CheckRankTiming&) const = default;
};

struct CheckReport {
  std::string job_id;
  int32_t attempt = 0;
  bool completed = false;
  double busbw_gbps = 0;
  // Time of the timed allreduces (ringmaster-check's own figure), then replaced by the
  // launcher with the whole check's wall time, mpirun start to end.
  double seconds = 0;
  std::string transport = "cpu";
  std::vector<CheckRankTiming> ranks;
  bool passed = false;
  std::string culprit_worker_id;
  std::string message;
  // Run by the job's own ranks inside MPI_Init (ChecksInSession) rather than by ringmaster-check.
  bool in_session = false;
  bool operator==(const CheckReport&) const = default;
};

// Parses ringmaster-check's result file ("transport cpu", "busbw_gbps X", "elapsed_seconds X",
// "wrong N", then "rank R WORKER WAIT_SECONDS" per rank). INVALID_ARGUMENT naming the line
// that is malformed; a result with wrong elements is completed = false.
absl::StatusOr<CheckReport> ParseCheckResult(const std::string& text);

struct CheckPolicy {
  // Learned busbw of this gang's shape, GB/s; 0: none yet.
  double baseline_gbps = 0;
  // Below baseline x min_ratio the ring is too slow.
  double min_ratio = 0.5;
  // A worker is a straggler when its ranks wait at most this fraction of what every other
  // worker's ranks wait...
  double straggler_wait_ratio = 0.25;
  // ...while those others spend at least this fraction of the check waiting for it. Such a
  // ring fails even without a baseline: most of it stands idle for one host.
  double idle_fraction = 0.5;
  bool operator==(const CheckPolicy&) const = default;
};

// The straggler: the worker whose ranks waited least in the allreduces, when it waited at
// most policy.straggler_wait_ratio of every other worker's wait; empty when there is none or
// the ring has one worker (a single host cannot be told from the ring).
std::string ChooseCulprit(const CheckReport& report, const CheckPolicy& policy);

// Sets report.passed, culprit_worker_id and message:
//   - not completed: not passed, no culprit (the failure's cause is in `message`);
//   - busbw below baseline x min_ratio (with a baseline), or a straggler that kept the other
//     workers waiting for at least idle_fraction of the check: not passed, the straggler (if
//     any) is the culprit;
//   - otherwise passed.
void JudgeCheck(CheckReport& report, const CheckPolicy& policy);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_HEALTH_CHECK_H_
