// Agent: the worker's side of every job attempt placed on it. It holds the assignments the
// scheduler sent, launches the gang (on the worker holding rank 0), runs the commands peers ask
// for with the attempt's token, learns about its ranks from their wrappers, reports rank
// starts and exits to the scheduler, and stops every process of an attempt when told to or
// when a local rank fails.
//
// Protocols (written once, here; docs/workers.md tells the same story for operators):
// Launch  1. the scheduler sends every worker of the gang the Assignment (job, attempt, spec,
//            full placement, token); each worker records it and reports nothing yet. A job
//            with a GPU share on this worker's real GPUs first needs the MPS control daemon
//            (host/mps_daemon.h): started here if it does not run yet; where it cannot be, the
//            attempt fails to launch, naming the worker and why;
//         2. the worker holding rank 0 is the launcher: it writes LOG_DIR/JOB/ATTEMPT/hostfile
//            (`ADDRESS slots=N` per worker, in rank order), takes a MASTER_PORT from its pool
//            (held until the attempt is forgotten: no two attempts share one) and runs
//            mpirun in a session of its own, with ringmaster-rsh as plm_rsh_agent, the agents'
//            ports in RINGMASTER_AGENT_PORTS and the job id, attempt and token exported (-x) to
//            every rank; the program of every rank is `ringmaster-rank -- WORKLOAD...`.
//            With run_check, the same mpirun of `ringmaster-check` comes first; its result goes
//            to the scheduler, and the job's mpirun starts only when the check lets it
//            (CheckBeforeLaunch; the protocol is at scheduler/core/health_check.h). The built-in
//            trainer is checked inside its own MPI_Init instead (ChecksInSession): every rank
//            gets RINGMASTER_PRECHECK_RESULT, rank 0 writes the result there, and the Reaper
//            reports it (PollInSessionChecks);
//            With --run-as, mpirun and everything below it run as the team's Unix user
//            (resolved at the assignment; a team without one fails its launch here), with no
//            TLS identity: their calls go to the local socket (RINGMASTER_AGENT_SOCKET), where
//            the caller's uid must be the attempt's (CheckLocalCaller);
//         3. mpirun calls `ringmaster-rsh HOST orted ...` for every host of the hostfile that is
//            not this machine's own name; ringmaster-rsh calls Exec on HOST's agent (with
//            --run-as: through the local socket, which forwards it), which
//            checks the token against its own copy of the assignment (waiting a little for the
//            assignment when the launcher was faster; at most max_exec_waiters calls wait at
//            once), runs `bash -c "orted ..."` in a new
//            session tagged with RINGMASTER_WORKER_ID/JOB_ID/ATTEMPT, and streams its output;
//         4. orted starts the local ranks; each rank's wrapper calls StartRank on the agent it
//            was started under (RINGMASTER_AGENT_ADDR), which maps its MPI rank to the placed
//            rank, reports the rank STARTED to the scheduler, and answers with the rank's log
//            path and environment (RANK, LOCAL_RANK, CUDA_VISIBLE_DEVICES, ...);
//         5. the wrapper runs the workload, tees its output to the log and to orted, reports
//            throughput samples, then its exit (ReportRank), which the agent forwards as
//            EXITED;
//         6. when mpirun ends, the launcher fails every local rank that never started
//            (LAUNCH_FAILED with mpirun's last words); a wrapper that vanished without
//            reporting counts as killed by SIGKILL.
// Stop    1. StopJob (cancel, failure elsewhere, lost worker, runtime limit, and the normal end
//            of every attempt) or a failure seen here (GangState) starts a teardown;
//         2. when it is the normal end (every local rank exited 0), mpirun and orted are still
//            tearing down the job on their own (PMIx finalize, session directories, the orteds'
//            exit reports): they get clean_exit_wait to exit by themselves, and most do at
//            once. Signalling them in the middle of that makes mpirun exit with code 1, or
//            crash in its own signal-time cleanup, for a job that succeeded;
//         3. then SIGTERM to every process of the attempt still on this worker: the sessions
//            it started (mpirun, Exec'd orted, and the ranks below them) and any process
//            carrying its tags (ranks that left the session); 4. SIGKILL to whatever is left
//            after the grace period;
//         5. after a StopJob the attempt is forgotten once nothing of it runs (its MASTER_PORT
//            goes back to the pool then); logs stay.
// Restart of the scheduler: the session re-registers listing every rank of every attempt not
//         yet forgotten (ended ones with their exit status) and drops the statuses it had not
//         sent, since the registration carries them; nothing is sent twice.
// Restart of the worker: processes tagged with this worker's id from an earlier life are
//         killed at start; the scheduler fails their attempts when the worker registers
//         without them.
//
// Parts (each header says more; docs/workers.md has the map): AttemptTable holds the attempts
// and the outbox; AttemptLauncher is step 2 (on a launcher thread per attempt); Exec and its
// session pump (exec_session.h) are step 3; the Reaper's thread does the Stop protocol's
// signals and forgets attempts; LogReader serves logs; AgentMetrics is /metrics. Agent is the
// front: it takes the calls, authorises them against the table and wires the parts.
//
// Thread-safe: RPC threads, the scheduler session and the reaper's thread call in
// concurrently; one mutex, the table's, guards the attempts. Lock order: the table's mutex,
// then AgentMetrics', PortPool's or the reaper's loop mutex (leaves, never held together).
// Processes are spawned by the thread that waits for them (mpirun: a launcher thread per
// attempt; Exec: the RPC's thread), so that PR_SET_PDEATHSIG kills them if the worker dies.
#ifndef RINGMASTER_SERVICES_WORKER_AGENT_H_
#define RINGMASTER_SERVICES_WORKER_AGENT_H_

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent_metrics.h"
#include "attempt_launcher.h"
#include "attempt_table.h"
#include "common/mutex.h"
#include "core/container.h"
#include "core/gang.h"
#include "core/health_check.h"
#include "core/launch.h"
#include "core/layout.h"
#include "core/types.h"
#include "exec_session.h"
#include "host/mps_daemon.h"
#include "host/ports.h"
#include "host/process.h"
#include "host/users.h"
#include "image_puller.h"
#include "log_reader.h"
#include "reaper.h"

namespace prometheus {
class Registry;
}

namespace ringmaster::worker {

struct AgentOptions {
  Inventory inventory;
  // The worker's GPUs are simulated (CPU-backed) slots.
  bool simulated_gpus = false;
  // Root of the rank logs: LOG_DIR/JOB/ATTEMPT/rank-R.log (and mpirun.log on the launcher).
  std::string log_dir = "/tmp/ringmaster-logs";
  std::string mpirun = "mpirun";
  std::string rsh_agent;
  std::string rank_binary;
  std::string train_binary = "ringmaster-train";
  // See ResolveMpiInterface (core/launch.h).
  std::string mpi_interface = "auto";
  // ringmaster-metrics' ingest address, passed to ranks as RINGMASTER_METRICS_ADDR.
  std::string metrics_service;
  // Parent of each job's checkpoint directory (RINGMASTER_CHECKPOINT_DIR = <this>/<job id>,
  // kept across attempts). Empty: not set.
  std::string checkpoint_root;
  // Parent of Open MPI's session directories (see WorkerLayout, core/layout.h). Empty:
  // /tmp/ringmaster-mpi-UID.
  std::string mpi_tmpdir;
  // Added to the environment of mpirun and orted: the worker's own TLS settings
  // (RINGMASTER_TLS_*, RINGMASTER_INSECURE), for ringmaster-rsh and ringmaster-rank to call the
  // agents with. ringmaster-rank keeps the certificate and key away from the workload.
  std::map<std::string, std::string> tls_env;
  std::vector<std::string> mpirun_args;
  // SIGTERM -> SIGKILL.
  std::chrono::milliseconds kill_grace{5000};
  // How long Exec waits for the assignment of an attempt it does not know yet.
  std::chrono::milliseconds exec_wait{10000};
  // How many Exec calls may wait so at once. Each holds an RPC thread for up to exec_wait, so
  // a stream of calls for attempts that never come (junk, or a confused peer) would otherwise
  // take every thread of the agent; past the bound Exec answers RESOURCE_EXHAUSTED at once.
  // A real gang needs one waiter per peer worker at most, briefly.
  int max_exec_waiters = 16;
  // After a StopJob for an attempt whose local ranks all exited 0, how long mpirun and orted
  // get to finish by themselves before the teardown signals them (see the Stop protocol).
  std::chrono::milliseconds clean_exit_wait{5000};
  // MASTER_PORTs handed to attempts launched here (see host/ports.h).
  int master_port_first = 29500;
  int master_port_last = 29999;
  // Period of the vanish check and of teardown progress.
  std::chrono::milliseconds check_interval{200};
  // The clock of the agent's timers: the clean-exit wait, SIGTERM -> SIGKILL, the in-session
  // check's deadline and the expiry of forgotten jobs' gauges (unset: steady_clock). Tests
  // move it by hand; waits on processes and pipes stay on real time.
  std::function<std::chrono::steady_clock::time_point()> now;
  // How long throughput gauges of a forgotten attempt stay on /metrics.
  std::chrono::milliseconds metrics_retention{std::chrono::minutes(5)};
  // The pre-run allreduce check (docs/health-check.md): ringmaster-check's path, the bound
  // on one check, and a delay this worker's check ranks add before every allreduce (a slow
  // host on purpose, for tests: RINGMASTER_CHECK_DELAY_MS).
  std::string check_binary;
  std::chrono::milliseconds check_timeout{10000};
  int check_delay_ms = 0;
  // Teams' Unix users (--run-as, --run-as-default; docs/security.md). Both empty: every
  // process runs as the worker's own user, as it always did. Otherwise each attempt's
  // mpirun, Exec'd commands and ranks run as its team's user; an attempt of a team with
  // neither fails its launch here, naming the team.
  std::map<std::string, UnixUser> team_users;
  std::optional<UnixUser> default_user;
  // The local socket those attempts' processes call (RINGMASTER_AGENT_SOCKET).
  std::string agent_socket;
  // Jobs with an image (docs/environments.md): the container runtime (empty: this worker runs
  // none, and such jobs fail to launch here saying so), flags added to every rank's `run` and
  // every `pull`, and the time limit of one pull.
  std::string container_runtime;
  std::vector<std::string> container_args;
  std::vector<std::string> image_pull_args;
  std::chrono::milliseconds image_pull_timeout{std::chrono::minutes(10)};
  int64_t image_cache_bytes = 0;  // the image store's bound; 0: none
  // The runtime's environment (the worker's own, for PATH and the runtime's settings).
  std::map<std::string, std::string> runtime_env;
  // Paths no volume may cover or lie in (the worker's certificates, state and the like), beside
  // its log, checkpoint and session directories, which are always kept out.
  std::vector<std::string> protected_paths;
  // The Open MPI version of `mpirun` ("4.1.4"), which containers' MPI must match in its series.
  std::string host_open_mpi;
  // NVIDIA's MPS control program, which enforces GPU shares on real GPUs (--mps-control;
  // host/mps_daemon.h). Unused with simulated GPUs.
  std::string mps_control = kMpsControlBinary;
};

struct StartedRank {
  int32_t rank = 0;
  std::string log_path;
  std::map<std::string, std::string> env;
  // Set for a job with an image: the container the wrapper runs the program in.
  std::optional<ContainerRun> container;
};

struct RankExit {
  int32_t rank = 0;
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string message;
  std::optional<double> images_per_second;
};

class Agent {
 public:
  // `registry` may be null (no metrics); it must outlive the agent.
  Agent(AgentOptions options, prometheus::Registry* registry);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Kills leftovers of an earlier life of this worker and starts the reaper's thread.
  void Start();
  // Stops every attempt's processes (TERM, then KILL after the grace) and the thread.
  void Shutdown();

  // The agent service's port, once the server is bound (before Start()).
  void SetPort(int32_t port);
  const Inventory& inventory() const { return options_.inventory; }

  // --- From the scheduler (rpc/scheduler_session.h).
  void OnAssignment(const Assignment& assignment);
  // `grace`: SIGTERM to SIGKILL for this attempt; 0: kill_grace.
  void OnStop(const std::string& job_id, int32_t attempt, const std::string& reason,
              std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  // Every held rank, for RegisterWorker; drops unsent statuses, which the list carries.
  std::vector<HeldRank> TakeRegistration();
  // The statuses to send to the scheduler: those queued now, in order, up to `max` (waits up
  // to `timeout` for the first; none when none came): what one message carries. A check
  // result travels alone, so the list ends before it and holds only it when it comes first.
  std::vector<RankStatus> NextStatuses(size_t max, std::chrono::milliseconds timeout);
  void SetSchedulerConnected(bool connected);

  // --- From peers, wrappers and clients (rpc/agent_service.h).
  using Stream = ExecStream;
  // Runs `bash -c JOIN(argv)` for a job attempt placed here (see the Launch protocol) and
  // calls `output` with its output until it exits; `output` returning false or `cancelled`
  // returning true stops the command. Errors as documented in agent.proto.
  absl::StatusOr<ExitInfo> Exec(const std::string& job_id, int32_t attempt,
                                const std::string& token, const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env,
                                const std::function<bool(Stream, std::string_view)>& output,
                                const std::function<bool()>& cancelled);
  // `image_digest`: what the launcher resolved the job's image to (the wrapper's
  // RINGMASTER_IMAGE_DIGEST); waits for this worker's pull of it.
  absl::StatusOr<StartedRank> StartRank(const std::string& job_id, int32_t attempt,
                                        const std::string& token, int32_t mpi_rank, pid_t pid,
                                        const std::string& image_digest = "");
  absl::Status ReportExit(const std::string& job_id, int32_t attempt, const std::string& token,
                          const RankExit& exit);
  absl::Status ReportThroughput(const std::string& job_id, int32_t attempt,
                                const std::string& token, int32_t rank, double images_per_second);
  // A rank's activity counters from its wrapper: forwarded to the scheduler as a kProgress
  // RankStatus when they changed (ProgressForwarder). Errors as for ReportExit.
  absl::Status ReportProgress(const std::string& job_id, int32_t attempt, const std::string& token,
                              int32_t rank, const RankProgress& progress);
  // For calls on the local socket (attempts that run as a team's user): OK when `token` is
  // the attempt's and `uid` (the caller's, from the kernel) is the user the attempt runs as
  // here; PERMISSION_DENIED otherwise, NOT_FOUND when the attempt is not held.
  absl::Status CheckLocalCaller(const std::string& job_id, int32_t attempt,
                                const std::string& token, uid_t uid);
  // OK when `target` (HOST:PORT) is the agent of a worker of the attempt's placement: the
  // only peers an Exec may be forwarded to with this worker's certificate.
  absl::Status CheckForwardTarget(const std::string& job_id, int32_t attempt,
                                  const std::string& target);
  // How many Exec calls wait for an assignment right now (bounded by max_exec_waiters).
  int ExecWaiters();
  // Streams a rank's log (see ReadLogsRequest). `write(data, attempt)` returning false ends it.
  absl::Status ReadLogs(const std::string& job_id, int32_t rank, std::optional<int32_t> attempt,
                        bool follow, const std::function<bool(std::string_view, int32_t)>& write,
                        const std::function<bool()>& cancelled);

 private:
  // A job token for `job_id`'s ranks (common/job_token.h), signed with this worker's TLS
  // certificate and key; empty without a metrics service, in plaintext, or when it cannot be
  // made (logged).
  std::string JobToken(const std::string& job_id) const;
  // The container placed rank `rank` of `assignment` runs in (docs/environments.md): waits for
  // this worker's pull of the image at `reported_digest`, checks the volumes' host paths here.
  absl::StatusOr<ContainerRun> RankContainer(const Assignment& assignment, int32_t rank,
                                             const std::string& reported_digest,
                                             const std::optional<UnixUser>& user);
  // Each of a job's volumes is, symlinks followed, a directory here that neither covers nor lies
  // in what the worker keeps for itself (FAILED_PRECONDITION naming the volume otherwise).
  absl::Status CheckVolumes(const Assignment& assignment) const;
  // Whether rank `rank` of the attempt may still write to its log (LogReader's question).
  bool RankMayWrite(const std::string& job_id, int32_t attempt, int32_t rank)
      ABSL_LOCKS_EXCLUDED(table_.mu());

  // Construction order is the order of use: each part below holds references to those above.
  AgentOptions options_;
  AgentMetrics metrics_;
  // Where the attempts' files are (logs, session and checkpoint directories).
  const WorkerLayout layout_;
  // What every process of an attempt gets in its environment; the agent's address is set once
  // its port is known (SetPort).
  AttemptEnvOptions env_options_;
  LogReader log_reader_;
  PortPool master_ports_;  // thread-safe
  ImagePuller images_;     // thread-safe
  AttemptTable table_;
  AttemptLauncher launcher_;
  Reaper reaper_;
  // Started by the first attempt with a GPU share on this worker's real GPUs; stopped at
  // Shutdown. Thread-safe; never called under table_.mu() (its start takes seconds).
  MpsDaemon mps_;

  CondVar assignments_cv_;  // Exec waiting for an assignment, on table_.mu()
  int exec_waiters_ ABSL_GUARDED_BY(table_.mu()) = 0;  // how many do
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_AGENT_H_
