// The scheduler's side of the pre-run allreduce check (docs/health-check.md): the shape a
// check's bandwidth is compared within, the baseline learned per shape from recent checks,
// and the plan sent with an assignment. Plain data in, plain data out; no I/O.
//
// The protocol, once per job attempt:
//   1. The scheduler places the attempt (STARTING) and sends each worker its Assignment with
//      run_check, the baseline of the gang's shape and the --check-min-ratio.
//   2. The launcher (rank 0's worker) runs ringmaster-check under mpirun over the attempt's
//      hostfile, judges it (worker core/health_check.h) and sends a CheckResult.
//   3. The scheduler records the result as a job event and on /metrics. Completed with no
//      culprit: a sample of the shape's baseline (UpdateBaseline). Passed: the launcher
//      starts the ranks (-> RUNNING as usual).
//   4. Not passed with a culprit: the culprit worker is marked unhealthy (no new placements
//      until an admin clears it, or until, on probation after --unhealthy-recheck-s, a
//      checked job's check passes with it: core/placement.h), and the attempt goes back to
//      PENDING without counting against backoff_limit, to be placed elsewhere. Not passed
//      without a culprit: a check that completed runs the job anyway; one that could not run
//      fails the attempt.
//   5. A check run inside the job's MPI_Init (in_session) is written by the job's own
//      processes, so it marks and clears no worker: its blame re-places the job (not counted)
//      with CheckPlan::separately for the next attempt, whose ringmaster-check runs before
//      any of the job's processes and decides. A placement with a worker on probation is
//      always checked separately.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_HEALTH_CHECK_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_HEALTH_CHECK_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// What a check's bandwidth is comparable within: the number of workers, ranks per worker
// (the most on any one worker), the transport ("cpu": MPI, "gpu": NCCL) and where it ran. A
// check inside the job's MPI_Init times what fits in about 5 ms, wire-up still fresh, inside a
// program that is starting; ringmaster-check times 20 after 3 warm-ups. Their figures differed
// (0.56 against 1.37 GB/s on the quickstart's 2x2/cpu), so each kind is judged against its own
// baseline.
struct CheckShape {
  int32_t workers = 0;
  int32_t ranks_per_worker = 0;
  std::string transport = "cpu";
  bool in_session = false;
  // "2x1/cpu" (ringmaster-check), "2x1/cpu/mpi_init" (inside MPI_Init): the key baselines are
  // stored under.
  std::string Key() const;
  bool operator==(const CheckShape&) const = default;
};

// `transport` is the check's own ("cpu" or "gpu"; the ring decides) or, before it ran, the
// one expected of the placement (ExpectedTransport).
CheckShape ShapeOf(const std::vector<RankPlacement>& placement, const std::string& transport,
                   bool in_session = false);

// Whether the workers will check an attempt inside its MPI_Init (the worker's ChecksInSession,
// from what the scheduler knows): a workload that calls MPI_Init (the trainer, or a command
// with check_in_mpi_init), on the host (transport "cpu"), unless `separately`.
bool ChecksInSession(const JobSpec& spec, const std::string& transport, bool separately);

// "gpu" when every rank was placed GPUs and none of them is simulated (ringmaster-check then
// runs NCCL on them), else "cpu". `gpus_of` gives a worker's GPUs (null: unknown worker).
std::string ExpectedTransport(
    const std::vector<RankPlacement>& placement,
    const std::function<const std::vector<Gpu>*(const std::string& worker_id)>& gpus_of);

struct CheckBaseline {
  std::string shape;  // CheckShape::Key()
  double busbw_gbps = 0;
  int64_t samples = 0;
  int64_t updated_at_ms = 0;
  bool operator==(const CheckBaseline&) const = default;
};

// How many recent samples of a shape its baseline is the median of.
inline constexpr size_t kBaselineWindow = 15;

// Learns from one completed check that named no culprit (passed, or below the baseline): the
// baseline is the median of the shape's last kBaselineWindow samples, kept in `window` (oldest
// first; updated here). So one odd run, a bad ring or a forged result moves it not at all:
// moving it takes most of the recent checks, and a cluster that drifts is followed within
// about half a window. A check inside the job's MPI_Init is the job's own word
// (docs/health-check.md), which is why the median and not an average: a job must outnumber the
// honest checks of its shape to move it. After a restart `window` is empty and the stored
// baseline stands in for kBaselineWindow / 2 + 1 samples. With an even count, the lower median.
CheckBaseline UpdateBaseline(const CheckBaseline& old, std::deque<double>& window,
                             double busbw_gbps, int64_t now_ms);

// The check settings of one assignment.
struct CheckPlan {
  bool run = false;
  double baseline_gbps = 0;  // 0: none known
  double min_ratio = 0.5;
  std::string transport = "cpu";  // ExpectedTransport of the placement
  // ringmaster-check's own mpirun, never a check inside the job's MPI_Init (step 5 above).
  bool separately = false;
  // Authorises the Exec calls of ringmaster-check's mpirun (Assignment.check_token); minted
  // per attempt, and only when run.
  std::string token;
};

// Whether a job's attempts are checked: the spec's health_check (unset: yes) and the
// scheduler's --health-check; never a job that starts without mpirun (StartsDirectly).
bool ChecksJob(const JobSpec& spec, bool enabled);

// The check settings of `job`'s new attempt, one plan for the whole gang (every worker must
// agree on it), without its token (minted by the caller when `run`): checked unless the spec or
// `enabled` (--health-check) says not; separately from the job's MPI_Init when a blame is to
// be verified this attempt or a worker of the placement is on probation; the baseline of the
// shape it will run as. `transport` is ExpectedTransport of the placement.
CheckPlan PlanCheck(const Job& job, bool enabled, double min_ratio, const std::string& transport,
                    const std::function<bool(const std::string& worker_id)>& on_probation,
                    const std::function<double(const std::string& key)>& baseline_of);

// A check result as the scheduler receives it (CheckResult on the wire).
struct CheckOutcome {
  std::string job_id;
  int32_t attempt = 0;
  bool completed = false;
  bool passed = false;
  double busbw_gbps = 0;
  double seconds = 0;
  std::string transport = "cpu";
  std::string culprit_worker_id;
  std::string message;
  // Run inside the job's own MPI_Init rather than by an mpirun of its own (docs/health-check.md).
  bool in_session = false;
};

// The job event's text for a check, e.g. "pre-run check passed: busbw 1.234 GB/s (baseline
// 1.300 GB/s, shape 2x1/cpu) in 0.41 s", with " inside the job's MPI_Init" after the time when
// it ran there.
std::string CheckEventText(const CheckOutcome& outcome, const CheckShape& shape,
                           double baseline_gbps);

// What a check result of a job's current attempt decides (steps 3 to 5 above).
struct CheckDecision {
  // Not sent by the attempt's launcher (rank 0's worker): nothing is decided.
  bool ignored = false;
  CheckShape shape;          // the ring's, as it ran
  double baseline_gbps = 0;  // the shape's baseline it was judged against (0: none)
  // Completed and blamed nobody: a sample of the shape's baseline (UpdateBaseline).
  bool learn = false;
  // The kChecked event's text.
  std::string text;
  // Workers on probation the check passed with: healthy again.
  std::vector<std::string> cleared;
  // A blamed worker of the placement: kVerify re-places the job with a separate check first
  // (the blame came from inside the job's own MPI_Init), kMark marks it unhealthy; both re-place
  // the job without counting it (kCheckFailed, replace_reason).
  enum class Blame { kNone, kVerify, kMark };
  Blame blame = Blame::kNone;
  std::string culprit;
  std::string replace_reason;
  std::string unhealthy_reason;  // kMark
};

// `worker_id` sent `outcome` for `job`'s current attempt. `baseline_of` gives a shape key's
// baseline (0: none), `on_probation` whether a worker is on probation, and `known` whether a
// worker id is one the scheduler knows.
CheckDecision DecideCheck(const Job& job, const std::string& worker_id, const CheckOutcome& outcome,
                          const std::function<double(const std::string& key)>& baseline_of,
                          const std::function<bool(const std::string& worker_id)>& on_probation,
                          const std::function<bool(const std::string& worker_id)>& known);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_HEALTH_CHECK_H_
