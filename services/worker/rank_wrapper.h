// The rank wrapper (ringmaster-rank): what mpirun runs as every rank of a job. It asks the
// worker it runs on which placed rank it is (StartRank), sets the rank's environment, runs the
// workload with the output teed to the rank's log and to its own stdout/stderr (which orted
// forwards to mpirun), reports throughput lines and, at the end, the exit status. Signals it
// receives (SIGTERM from orted or the worker) are passed on to the workload; if the wrapper's
// parent dies it gets SIGTERM itself, and the workload gets SIGKILL if the wrapper dies.
#ifndef RINGMASTER_SERVICES_WORKER_RANK_WRAPPER_H_
#define RINGMASTER_SERVICES_WORKER_RANK_WRAPPER_H_

#include <string>
#include <vector>

namespace ringmaster::worker {

// Runs `program` as a rank; returns the wrapper's exit code (the program's, or 128 + signal).
// Needs RINGMASTER_AGENT_ADDR, RINGMASTER_JOB_ID, RINGMASTER_ATTEMPT, RINGMASTER_TOKEN and
// OMPI_COMM_WORLD_RANK in the environment.
int RunRank(const std::vector<std::string>& program);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_RANK_WRAPPER_H_
