// The launch of one job attempt, computed from its assignment: the gang's hosts in MPI order,
// the hostfile, the mpirun command line, and the environment of mpirun and of every rank.
// Plain data in, plain data out; the protocol that uses them is in agent.h.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_LAUNCH_H_
#define RINGMASTER_SERVICES_WORKER_CORE_LAUNCH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rank/rank_env.h"
#include "worker/core/types.h"

namespace ringmaster::worker {

// One worker of a gang, as the hostfile lists it.
struct GangHost {
  std::string worker_id;
  std::string address;
  int32_t port = 0;
  // Placed ranks on this worker, in MPI order (mpirun fills each host's slots in turn).
  std::vector<int32_t> ranks;
};

// Checks what the launch relies on: ranks 0..n-1 each placed once, every worker with one
// address and port, no two workers sharing an address (MPI would take them for one host).
// INVALID_ARGUMENT naming the problem.
absl::Status ValidatePlacement(const std::vector<RankPlacement>& placement);

// The gang's workers in hostfile order: ordered by their lowest rank. mpirun maps MPI ranks
// by slot, host after host, so MPI rank m is the m-th rank of this order; with the scheduler's
// packing (consecutive ranks per worker) MPI rank and placed rank are the same.
std::vector<GangHost> GangHosts(const std::vector<RankPlacement>& placement);

// Placed rank of every MPI rank (index: MPI rank).
std::vector<int32_t> PlacedRankOfMpiRank(const std::vector<GangHost>& hosts);

// "ADDRESS slots=N\n" per host.
std::string HostfileText(const std::vector<GangHost>& hosts);

// The value of RINGMASTER_AGENT_PORTS: "ADDRESS:PORT,ADDRESS:PORT" (how ringmaster-rsh finds
// the agent of the host mpirun names).
std::string AgentPortsValue(const std::vector<GangHost>& hosts);
// The port of `host` in such a value; NOT_FOUND when the host is not listed, INVALID_ARGUMENT
// when the value is malformed.
absl::StatusOr<int32_t> AgentPortOf(const std::string& agent_ports, const std::string& host);

// What every rank runs: the trainer with the spec's flags, or the command's argv. The trainer
// of a job with an image is the image's own (kImageTrainBinary on its PATH): the worker's
// binary and the libraries it links are not in the container.
// INVALID_ARGUMENT when the assignment has neither or an empty command.
inline constexpr char kImageTrainBinary[] = "ringmaster-train";
absl::StatusOr<std::vector<std::string>> WorkloadArgv(const Assignment& assignment,
                                                      const std::string& train_binary);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackAddress(const std::string& address);

// The interface MPI's TCP traffic uses: `flag` itself, except "auto" (lo when the launcher's
// address is a loopback address, else Open MPI's own choice) and "" (Open MPI's own choice).
std::string ResolveMpiInterface(const std::string& flag, const std::string& launcher_address);

struct MpirunOptions {
  std::string mpirun = "mpirun";
  std::string hostfile_path;
  // Path of ringmaster-rsh, mpirun's plm_rsh_agent.
  std::string rsh_agent;
  // Path of ringmaster-rank, which mpirun runs as every rank (the same path on every worker).
  std::string rank_binary;
  // "" leaves interface selection to Open MPI; "lo" also restricts the BTLs to tcp,self.
  std::string mpi_interface;
  bool allow_run_as_root = false;
  // Whether mpirun ends every rank once one exits non-zero (Open MPI's default). The job's
  // mpirun runs without it: the agents end a gang whose rank failed, and mpirun's abort would
  // cut short the ranks still saving in a preemption's grace once the first exits with 143.
  // The pre-run check keeps it: a check rank that fails must not leave the others blocked.
  bool abort_on_rank_failure = true;
  // Appended before the program (operator's --mpirun-args).
  std::vector<std::string> extra_args;
  // Exported with -x beside ExportedToRanks (RINGMASTER_IMAGE_DIGEST for a job with an image).
  std::vector<std::string> extra_exports;
};

// The digest the launcher resolved a job's image to, for every rank's wrapper.
inline constexpr char kImageDigestEnv[] = "RINGMASTER_IMAGE_DIGEST";

// A one-rank attempt started without mpirun (Assignment::start_directly): the launcher runs
// `RANK_BINARY -- WORKLOAD...` itself, and the wrapper, seeing kDirectStartEnv, takes itself for
// MPI rank 0 of 1 (there is no OMPI_COMM_WORLD_RANK).
inline constexpr char kDirectStartEnv[] = "RINGMASTER_DIRECT_START";
std::vector<std::string> DirectRankArgv(const std::string& rank_binary,
                                        const std::vector<std::string>& workload);
// `mpirun_env` (MpirunEnvironment) for that wrapper: kDirectStartEnv, and an MPI program in the
// rank initialises as a singleton without the orted it would otherwise fork to serve it (which
// only MPI_Comm_spawn needs; docs/workers.md).
std::map<std::string, std::string> DirectRankEnvironment(
    std::map<std::string, std::string> mpirun_env);

// Variables mpirun exports to every rank with -x (their values are in LauncherEnvironment).
std::vector<std::string> ExportedToRanks();

// The mpirun command line: `mpirun [options] RANK_BINARY -- WORKLOAD...`.
std::vector<std::string> MpirunArgv(const MpirunOptions& options, int32_t world_size,
                                    const std::vector<std::string>& workload);

// Environment set for mpirun (and through -x for every rank): job id, attempt, token, the
// agents' ports, MASTER_ADDR (rank 0's address), MASTER_PORT, WORLD_SIZE.
std::map<std::string, std::string> LauncherEnvironment(const Assignment& assignment,
                                                       const std::vector<GangHost>& hosts,
                                                       int32_t master_port);

// What the worker puts in the environment of every process of an attempt it starts (mpirun,
// Exec'd commands, and through them the ranks).
struct AttemptEnvOptions {
  // The agent's own environment without RINGMASTER_* variables (a clean slate: the worker's
  // flag fallbacks would leak into programs that read the same names).
  std::map<std::string, std::string> base;
  std::string worker_id;
  std::string agent_addr;  // HOST:PORT of the agent, RINGMASTER_AGENT_ADDR
  int check_delay_ms = 0;  // RINGMASTER_CHECK_DELAY_MS when > 0 (a slow host, for tests)
  // The worker's TLS settings (RINGMASTER_TLS_*, RINGMASTER_INSECURE).
  std::map<std::string, std::string> tls_env;
  // What of them a team's user gets: the CA (for the workloads to verify servers with) and
  // RINGMASTER_INSECURE, never the worker's certificate and key.
  std::map<std::string, std::string> team_tls_env;
  std::string agent_socket;  // RINGMASTER_AGENT_SOCKET for attempts of a team's user
};

// The team's Unix user an attempt runs as, as far as its environment cares.
struct EnvUser {
  std::string name;  // empty: USER and LOGNAME unset
  std::string home;  // empty: HOME=/
};

// The environment of an attempt's processes: the base, the attempt's tags, the worker's TLS
// settings. With `user` (--run-as), team_tls_env instead (a team's user cannot read the worker's
// key and must not learn where it is; its wrappers call the local socket instead), and the
// user's HOME, USER and LOGNAME.
std::map<std::string, std::string> AttemptEnvironment(const AttemptEnvOptions& options,
                                                      const std::string& job_id, int32_t attempt,
                                                      const std::optional<EnvUser>& user);

// `attempt_env` (AttemptEnvironment) with what mpirun needs on top: LauncherEnvironment and
// Open MPI defaults the operator's environment may override.
std::map<std::string, std::string> MpirunEnvironment(std::map<std::string, std::string> attempt_env,
                                                     const Assignment& assignment,
                                                     const std::vector<GangHost>& hosts,
                                                     int32_t master_port);

// What the worker a rank runs on adds to the rank's environment.
struct RankHost {
  // The worker's GPUs are CPU-backed slots: CUDA_VISIBLE_DEVICES is empty and the indices go
  // to RINGMASTER_SIMULATED_GPUS instead.
  bool simulated_gpus = false;
  // Type of each of the worker's GPUs by index (for RINGMASTER_GPU_TYPE).
  std::map<int32_t, std::string> gpu_types;
  // The UUID of each MIG instance by index: CUDA_VISIBLE_DEVICES names it so, not by index.
  std::map<int32_t, std::string> gpu_uuids;
  // ringmaster-metrics' ingest address for RINGMASTER_METRICS_ADDR; empty: not set.
  std::string metrics_addr;
  // The job's token for the metrics service, RINGMASTER_JOB_TOKEN (common/job_token.h); empty:
  // not set.
  std::string job_token;
  // The job's checkpoint directory for RINGMASTER_CHECKPOINT_DIR; empty: not set.
  std::string checkpoint_dir;
  // Where rank 0 writes an in-session check's result (RINGMASTER_PRECHECK_RESULT, set only
  // when ChecksInSession; every rank gets it, as every rank takes part).
  std::string check_result_path;
  // The pipe directory of this worker's MPS control daemon, for ranks of a job with a GPU share
  // on real GPUs (GpuShareEnvironment, core/gpu_share.h); empty on simulated GPUs or while no
  // daemon runs.
  std::string mps_pipe_directory;
};

// Whether the attempt's pre-run check runs inside the job's own MPI_Init (the rank wrapper's
// preloaded library) instead of as an mpirun of ringmaster-check before the job's: for the
// built-in trainer, which is known to call MPI_Init, and a command whose spec says it does
// (check_in_mpi_init). Any other program might never call it.
// Not for a job with an image: its ranks run in containers, where the check's result file is
// not. Not on real GPUs: the in-session check is MPI on the host, and a GPU ring is checked with
// NCCL on its GPUs by ringmaster-check. Not when the scheduler asks for ringmaster-check
// (check_separately): only a check the job's processes cannot write may mark or clear a worker.
bool ChecksInSession(const Assignment& assignment);
inline constexpr char kPrecheckResultEnv[] = RM_ENV_PRECHECK_RESULT;

// Environment of placed rank `rank` running on this worker, set by its wrapper over what it
// inherited. The command's own env comes first; ours wins on a clash. A rank of a job with a GPU
// share gets GpuShareEnvironment's variables too.
std::map<std::string, std::string> RankEnvironment(const Assignment& assignment, int32_t rank,
                                                   const RankHost& host);

// Words joined by single spaces, as ssh joins its command before the remote shell runs it.
std::string JoinCommand(const std::vector<std::string>& words);

// What the worker logs when it starts a process (a rank, mpirun, an Exec'd command): its argv
// (control characters escaped, so it stays one line; cut at 2000 bytes) and the NAMES of the
// environment variables it sets, never their values: a job's env may carry credentials, which
// only its team may read (docs/security.md).
std::string DescribeLaunch(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env);

// Checks an Exec request's command and environment against the limits in agent.proto.
absl::Status ValidateExecCommand(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& env);

// Names of the variables the worker sets on every process of a job attempt it starts; also
// how leftovers are found in /proc.
inline constexpr const char* kJobIdEnv = "RINGMASTER_JOB_ID";
inline constexpr const char* kAttemptEnv = "RINGMASTER_ATTEMPT";
inline constexpr const char* kWorkerIdEnv = RM_ENV_WORKER_ID;
inline constexpr const char* kTokenEnv = "RINGMASTER_TOKEN";
inline constexpr const char* kAgentAddrEnv = "RINGMASTER_AGENT_ADDR";
inline constexpr const char* kAgentPortsEnv = "RINGMASTER_AGENT_PORTS";
// "1" for an elastic job's ranks: a later attempt may run at another WORLD_SIZE.
inline constexpr const char* kElasticEnv = "RINGMASTER_ELASTIC";
// Set only for attempts that run as a team's Unix user: the agent's local socket, which
// ringmaster-rank and ringmaster-rsh call instead of the TCP port (they hold no certificate).
inline constexpr const char* kAgentSocketEnv = "RINGMASTER_AGENT_SOCKET";

// True when `job_id` can name a directory: 1..128 characters of [A-Za-z0-9._-], not starting
// with '.'. Job ids come from clients in ReadLogs; this keeps them inside the log directory.
bool IsSafeJobId(const std::string& job_id);

// Path of a rank's log below the worker's log directory: JOB/ATTEMPT/rank-R.log.
std::string RankLogRelativePath(const std::string& job_id, int32_t attempt, int32_t rank);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_LAUNCH_H_
