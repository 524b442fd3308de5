// How ringctl ends: its exit codes, and the one line on stderr that explains a failed call.
#ifndef RINGMASTER_CLI_ERRORS_H_
#define RINGMASTER_CLI_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringmaster::cli {

// Documented in docs/ringctl.md; scripts depend on them, so never renumber.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,
  // Bad flags, a bad YAML spec, or a spec the scheduler rejected (INVALID_ARGUMENT).
  kExitUsage = 2,
  kExitUnreachable = 3,
  kExitNotFound = 4,
  // `ringctl watch`: the job ended FAILED or CANCELLED.
  kExitJobUnsuccessful = 5,
};

struct Failure {
  int exit_code = kExitError;
  // One line, without the "ringctl: " prefix.
  std::string message;
};

// Describes a failed call to the scheduler at `address`. `action` says what was attempted
// ("submit job", "get job"); `job_id` (may be empty) is the job the call was about.
Failure DescribeRpcError(const absl::Status& status, absl::string_view action,
                         absl::string_view address, absl::string_view job_id);

// What a failed TLS handshake with the scheduler at `address` means and how to fix it, from
// gRPC's message `detail`; empty when `detail` tells of no TLS failure. A scheduler whose
// certificate is not trusted was reached: "unreachable" would send the user the wrong way.
std::string DescribeTlsFailure(absl::string_view detail, absl::string_view address);

// True when gRPC's message `detail` says the server's certificate did not verify.
bool IsCertificateUntrusted(absl::string_view detail);

// Removes line breaks so that a message fits the one line ringctl promises on stderr.
std::string SingleLine(absl::string_view text);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_ERRORS_H_
