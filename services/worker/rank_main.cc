// ringmaster-rank: the wrapper mpirun runs as every rank. See rank_wrapper.h.
#include <cstdio>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/mutex.h"
#include "core/launch.h"
#include "rank_wrapper.h"

int main(int argc, char** argv) {
  using namespace ringmaster::worker;  // NOLINT(build/namespaces): main only
  ringmaster::TurnOffAbslDeadlockDetection();
  ringmaster::Flags flags("ringmaster-rank",
                          "The wrapper mpirun runs as every rank of a job: runs PROGRAM as the "
                          "rank the worker placed here and reports how it ends.");
  flags.SetArguments("[--] PROGRAM [ARGS...]",
                     "PROGRAM and its ARGS are the rank's workload, run as given; the exit "
                     "status is the program's (128 + signal).",
                     /*pass_through=*/true);
  flags.AddEnvironment(kAgentAddrEnv, "the worker's agent address (set by the worker)");
  flags.AddEnvironment(kJobIdEnv, "the job (set by the worker)");
  flags.AddEnvironment(kAttemptEnv, "the job's attempt (set by the worker)");
  flags.AddEnvironment(kTokenEnv, "the job's token (set by the worker)");
  flags.AddEnvironment("OMPI_COMM_WORLD_RANK", "this rank's MPI rank (set by mpirun)");
  if (absl::Status parsed = flags.Parse(argc, argv); !parsed.ok()) {
    std::fprintf(stderr, "ringmaster-rank: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  if (flags.positional().empty()) {
    std::fprintf(stderr, "ringmaster-rank: expected PROGRAM (see ringmaster-rank --help)\n");
    return 2;
  }
  return RunRank(flags.positional());
}
