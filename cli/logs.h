// `ringctl logs`: a rank's output, read through the scheduler (JobService.ReadJobLogs in
// proto/ringmaster/v1/job.proto). The scheduler checks the caller's right to the job's logs,
// finds the worker that ran the rank and relays its log over mutual TLS; ringctl needs no
// certificate of its own for it.
#ifndef RINGMASTER_CLI_LOGS_H_
#define RINGMASTER_CLI_LOGS_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "client.h"
#include "errors.h"

namespace ringmaster::cli {

struct LogsOptions {
  std::string job_id;
  int32_t rank = 0;
  // Unset: the job's current (or last) attempt.
  std::optional<int32_t> attempt;
  bool follow = false;
  // For messages: the scheduler's address.
  std::string scheduler;
};

// Writes the rank's log to `out` (flushed chunk by chunk); nullopt when it worked, else how
// ringctl should fail.
std::optional<Failure> PrintRankLog(const LogsOptions& options, SchedulerClient& scheduler,
                                    std::ostream& out);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_LOGS_H_
