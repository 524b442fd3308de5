// Who may run what on a worker: the checks behind Exec, StartRank and ReportRank.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_AUTH_H_
#define RINGMASTER_SERVICES_WORKER_CORE_AUTH_H_

#include <string>

namespace ringmaster::worker {

// Compares two secrets in time that depends only on their lengths (no early exit at the first
// differing byte, which would let a caller find a token byte by byte).
bool SecretsEqual(const std::string& a, const std::string& b);

// Which of an attempt's tokens a caller presented.
enum class TokenRole {
  kNone,   // neither (or empty): PERMISSION_DENIED
  kJob,    // the attempt's own token: every call of its processes
  kCheck,  // the pre-run check's token: Exec of the check's orted only
};

// The check-token rule: `token` is the job's when it equals `job_token`; the check's when it
// equals a non-empty `check_token` and the check is not over yet (`check_over`: an Exec with the
// job's own token came, so the job's mpirun runs and the check's is done). An empty token is
// never taken, whatever the attempt holds. Compared with SecretsEqual.
TokenRole RoleOfToken(const std::string& token, const std::string& job_token,
                      const std::string& check_token, bool check_over);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_AUTH_H_
