// Where a rank's log lies, and how the scheduler reads it for a client (JobService.ReadJobLogs).
//
// Each worker keeps the logs of the ranks it ran (LOG_DIR/JOB/ATTEMPT/rank-R.log), across
// attempts and after the job ended; the scheduler keeps only the current attempt's placement.
// So:
//   1. the current attempt of a placed job: the worker its placement names for the rank is the
//      only source, and whatever it answers (a failure too) is the answer;
//   2. an earlier attempt, or a job without a placement (ended, or waiting to restart): every
//      worker the scheduler knows is asked in turn, by id; the first that streams the log is
//      the answer. One that fails after it began streaming ends the read; one that has no log
//      (NOT_FOUND) or cannot be reached is passed over;
//   3. nobody had it: NOT_FOUND naming the job, rank and attempt (and why, where that is known).
// Plain C++: the reads themselves come in as a function. No I/O; thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_LOG_SOURCES_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_LOG_SOURCES_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

// One worker agent that may hold the log.
struct LogSource {
  std::string worker_id;
  std::string address;  // HOST:PORT of its agent service
};

struct LogPlan {
  std::string job_id;
  int32_t rank = 0;
  int32_t attempt = 0;  // resolved: the request's, else the job's current one
  // Step 1 above: `sources` is the one worker of the placement.
  bool placed = false;
  std::vector<LogSource> sources;
  // For the NOT_FOUND of step 3: the job waits for the attempt's placement.
  bool pending = false;
};

// The plan for reading `rank` of `attempt` (nullopt: the job's current one) of `job`, given the
// workers the scheduler knows. INVALID_ARGUMENT naming `rank` or `attempt` and the job's range
// when they are outside it.
absl::StatusOr<LogPlan> PlanLogRead(const Job& job, int32_t rank, std::optional<int32_t> attempt,
                                    const std::vector<Worker>& workers);

// Reads one source: streams what it has to the caller and sets `*wrote` once anything was
// streamed. Its status is the agent's (OK once the log was sent whole).
using LogSourceReader = std::function<absl::Status(const LogSource& source, bool* wrote)>;

// Steps 1 to 3 over `plan`. A refusal by an agent (PERMISSION_DENIED, UNAUTHENTICATED: its
// --log-reader-names do not name the scheduler's certificate) comes back as
// FAILED_PRECONDITION, so that a caller does not read it as a missing right of its own token;
// CANCELLED (the caller went away) ends the walk at once.
absl::Status ReadFromSources(const LogPlan& plan, const LogSourceReader& read);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_LOG_SOURCES_H_
