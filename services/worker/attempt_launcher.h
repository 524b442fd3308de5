// AttemptLauncher: the launcher's part of the Launch protocol (agent.h, step 2) for an attempt
// whose rank 0 is here: the attempt's directory and hostfile, its MASTER_PORT, the pre-run
// check (before the job's mpirun, or inside its MPI_Init), and the job's mpirun, waited for
// until it exits. Also what the launcher reports while the job runs: the in-session check's
// result and the job's checkpoints.
//
// Threads: Launch runs on the attempt's own launcher thread (which the agent starts and the
// reaper joins; the record's in_flight counts it) and spawns mpirun there, so that
// PR_SET_PDEATHSIG kills mpirun if the worker dies. PollInSessionChecks and ReportCheckpoints
// run on the reaper's thread. Locks: the table's mutex, taken briefly; files are read, and
// processes waited for, without it.
#ifndef RINGMASTER_SERVICES_WORKER_ATTEMPT_LAUNCHER_H_
#define RINGMASTER_SERVICES_WORKER_ATTEMPT_LAUNCHER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "agent_metrics.h"
#include "attempt_table.h"
#include "core/launch.h"
#include "core/layout.h"
#include "host/ports.h"
#include "image_puller.h"
#include "host/users.h"

namespace ringmaster::worker {

struct AgentOptions;

// Creates `dir` and, for an attempt that runs as a team's user, gives it to that user (mode
// 0700): the session and checkpoint directories its processes write, closed to other teams.
absl::Status MakeDirsFor(const std::optional<UnixUser>& user, const std::string& dir);
// An attempt's log directory. For a team's user it stays root's with mode 0711: the ranks
// open their own (pre-created) logs there, but cannot list, read or replace anything else,
// mpirun.log (every rank's output) included.
absl::Status MakeAttemptDir(const std::optional<UnixUser>& user, const std::string& dir);

// The environment of an attempt's processes (AttemptEnvironment); `as_worker`: of the pre-run
// check's, which run as the worker's own user even when the attempt's run as a team's.
std::map<std::string, std::string> ProcessEnvironment(const AttemptEnvOptions& env,
                                                      const AttemptRecord& attempt,
                                                      bool as_worker = false);

class AttemptLauncher {
 public:
  // Everything is the agent's and outlives this; `env`'s agent address is read at each launch.
  AttemptLauncher(const AgentOptions& options, const WorkerLayout& layout,
                  const AttemptEnvOptions& env, AttemptTable& table, AgentMetrics& metrics,
                  PortPool& master_ports, ImagePuller& images)
      : options_(options),
        layout_(layout),
        env_(env),
        table_(table),
        metrics_(metrics),
        master_ports_(master_ports),
        images_(images) {}
  AttemptLauncher(const AttemptLauncher&) = delete;
  AttemptLauncher& operator=(const AttemptLauncher&) = delete;

  // The launcher thread's body; its last act is to decrement the record's in_flight.
  void Launch(AttemptRecord* attempt) ABSL_LOCKS_EXCLUDED(table_.mu());
  // Reports an in-session check's result once rank 0 wrote it, or that none came within
  // check_timeout of the launch (an event only: the job goes on).
  void PollInSessionChecks() ABSL_LOCKS_EXCLUDED(table_.mu());
  // Reports the job's checkpoint.meta whenever it changes (KIND_CHECKPOINT), and again to a
  // new scheduler session.
  void ReportCheckpoints() ABSL_LOCKS_EXCLUDED(table_.mu());
  // Where rank 0 of the attempt writes its check's result.
  std::string CheckResultPath(const AttemptRecord& attempt) const;

 private:
  // Runs the attempt's pre-run check and reports it; false when the attempt must not launch
  // (the check failed or the attempt is stopping; the failure is already applied).
  bool CheckBeforeLaunch(AttemptRecord* attempt, const MpirunOptions& mpirun,
                         const std::map<std::string, std::string>& env,
                         const std::string& session_dir, const std::vector<GangHost>& hosts,
                         int32_t master_port) ABSL_LOCKS_EXCLUDED(table_.mu());

  const AgentOptions& options_;
  const WorkerLayout& layout_;
  const AttemptEnvOptions& env_;
  AttemptTable& table_;
  AgentMetrics& metrics_;
  PortPool& master_ports_;
  ImagePuller& images_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_ATTEMPT_LAUNCHER_H_
