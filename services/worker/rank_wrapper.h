// The rank wrapper (ringmaster-rank): what mpirun runs as every rank of a job. It asks the
// worker it runs on which placed rank it is (StartRank), sets the rank's environment, runs the
// workload with the output teed to the rank's log and to its own stdout/stderr (which orted
// forwards to mpirun), reports throughput lines and, at the end, the exit status. It is the
// rank's own supervisor:
//  - signals it receives (SIGTERM from orted or the worker) go to the workload's process group,
//    and SIGKILL follows after 5 s;
//  - if its parent (orted) dies it gets SIGTERM itself (PR_SET_PDEATHSIG), so a rank never
//    outlives its worker's processes; the workload gets SIGKILL if the wrapper dies;
//  - when the workload's main process ends, whatever it left running (its process group, and
//    processes carrying the rank's RINGMASTER_* tags) is stopped before the exit is reported.
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
