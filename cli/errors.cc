#include "errors.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace ringmaster::cli {

std::string SingleLine(absl::string_view text) {
  std::string line = absl::StrReplaceAll(text, {{"\r\n", " "}, {"\n", " "}, {"\r", " "}});
  return std::string(absl::StripAsciiWhitespace(line));
}

bool IsCertificateUntrusted(absl::string_view detail) {
  const std::string lower = absl::AsciiStrToLower(detail);
  return absl::StrContains(lower, "certificate verify failed") ||
         absl::StrContains(lower, "certificate_verify_failed");
}

std::string DescribeTlsFailure(absl::string_view detail, absl::string_view address) {
  const std::string lower = absl::AsciiStrToLower(detail);
  if (IsCertificateUntrusted(detail)) {
    return absl::StrCat(
        "the scheduler at ", address,
        " answered, but its TLS certificate is not trusted: give the CA that signed it with "
        "--tls-ca, RINGMASTER_TLS_CA or tls_ca in ${XDG_CONFIG_HOME:-~/.config}/ringmaster/config "
        "(the quickstart writes that file; without a CA the system's roots are used) (",
        detail, ")");
  }
  if (absl::StrContains(lower, "handshake failed") ||
      absl::StrContains(lower, "wrong_version_number") ||
      absl::StrContains(lower, "wrong version number")) {
    return absl::StrCat("the TLS handshake with the scheduler at ", address,
                        " failed: is it serving TLS? (a scheduler started with --insecure needs "
                        "ringctl --insecure) (",
                        detail, ")");
  }
  return "";
}

Failure DescribeRpcError(const absl::Status& status, absl::string_view action,
                         absl::string_view address, absl::string_view job_id) {
  const std::string detail = SingleLine(status.message());
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      if (const std::string tls = DescribeTlsFailure(detail, address); !tls.empty()) {
        return {kExitUnreachable, tls};
      }
      return {kExitUnreachable, absl::StrCat("scheduler unreachable at ", address, ": ", detail)};
    case absl::StatusCode::kDeadlineExceeded:
      return {kExitUnreachable, absl::StrCat("scheduler at ", address, " did not answer in time (",
                                             action, "): ", detail)};
    case absl::StatusCode::kNotFound:
      if (!job_id.empty()) return {kExitNotFound, absl::StrCat("job ", job_id, " not found")};
      return {kExitNotFound, absl::StrCat(action, ": not found: ", detail)};
    case absl::StatusCode::kInvalidArgument:
      // The scheduler's own words name the bad field; they are shown unchanged.
      if (action == "submit job") return {kExitUsage, absl::StrCat("invalid job spec: ", detail)};
      return {kExitUsage, absl::StrCat(action, ": invalid argument: ", detail)};
    case absl::StatusCode::kAlreadyExists:
      // The scheduler's message names the request id and the job that already holds it.
      return {kExitError, absl::StrCat(action, ": ", detail)};
    case absl::StatusCode::kFailedPrecondition:
      return {kExitError, absl::StrCat("cannot ", action, ": ", detail)};
    default:
      break;
  }
  return {kExitError,
          absl::StrCat(action, " failed: ", absl::StatusCodeToString(status.code()), ": ", detail)};
}

}  // namespace ringmaster::cli
