// The programs and libraries the worker starts for its jobs (ringmaster-rsh, -rank, -train,
// -check, -progress, the collective counters, mpirun), checked once at start: a missing or
// unusable helper is the platform's fault, so the worker refuses to start naming the file and
// the flag that sets it, rather than failing every job that needs it with a message of
// mpirun's.
#ifndef RINGMASTER_SERVICES_WORKER_HOST_HELPERS_H_
#define RINGMASTER_SERVICES_WORKER_HOST_HELPERS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ringmaster::worker {

struct Helper {
  // What it is for, e.g. "ringmaster-check (the pre-run check of every job)".
  std::string what;
  // As configured: a path, or a bare name looked up on PATH.
  std::string path;
  // How to point the worker at another one, e.g. "--check-binary (RINGMASTER_CHECK_BINARY)".
  std::string set_by;
  // A program must be executable; a library (preloaded) only readable.
  bool library = false;
};

// The helpers of a worker configured with these paths. The counters and the progress reporter
// are found by ringmaster-rank in its own directory, so they are looked for beside `rank`.
std::vector<Helper> WorkerHelpers(const std::string& mpirun, const std::string& rsh,
                                  const std::string& rank, const std::string& train,
                                  const std::string& check);

// OK when every helper is a regular file the worker may execute (or read, for a library);
// else FAILED_PRECONDITION naming each one that is not, where it was looked for, why, and how
// to set it. `path_env` is the PATH that bare names are looked up on.
absl::Status CheckHelpers(const std::vector<Helper>& helpers, const std::string& path_env);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_HELPERS_H_
