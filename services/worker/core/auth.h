// Who may run what on a worker: the checks behind Exec, StartRank and ReportRank.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_AUTH_H_
#define RINGMASTER_SERVICES_WORKER_CORE_AUTH_H_

#include <string>

namespace ringmaster::worker {

// Compares two secrets in time that depends only on their lengths (no early exit at the first
// differing byte, which would let a caller find a token byte by byte).
bool SecretsEqual(const std::string& a, const std::string& b);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_AUTH_H_
