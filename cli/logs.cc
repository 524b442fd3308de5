#include "logs.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::cli {

std::optional<Failure> PrintRankLog(const LogsOptions& options, SchedulerClient& scheduler,
                                    std::ostream& out) {
  v1::ReadJobLogsRequest request;
  request.set_job_id(options.job_id);
  request.set_rank(options.rank);
  if (options.attempt) request.set_attempt(*options.attempt);
  request.set_follow(options.follow);
  absl::Status status = scheduler.ReadJobLogs(
      request, [&out](const v1::LogChunk& chunk) { out << chunk.data() << std::flush; });
  if (status.ok()) return std::nullopt;
  const std::string message(status.message());
  // The scheduler names the request's field; ringctl names its flag.
  if (absl::IsInvalidArgument(status)) {
    for (const char* field : {"rank", "attempt"}) {
      if (absl::StartsWith(message, absl::StrCat(field, ": "))) {
        return Failure{kExitUsage, absl::StrCat("--", message)};
      }
    }
  }
  // The scheduler answered, about the worker or the log: its words say which and why.
  const bool about_the_log = absl::StartsWith(message, "reading the log of job ") ||
                             absl::StartsWith(message, "no worker has a log of job ");
  if (about_the_log) {
    int code = kExitError;
    if (absl::IsUnavailable(status)) code = kExitUnreachable;
    if (absl::IsNotFound(status)) code = kExitNotFound;
    return Failure{code, message};
  }
  return DescribeRpcError(status, "read the log of job " + options.job_id, options.scheduler,
                          options.job_id);
}

}  // namespace ringmaster::cli
