// Plain structs of the worker's world: what the scheduler assigns, what ranks report, what the
// worker holds. No gRPC or protobuf; rpc/convert.h translates.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_TYPES_H_
#define RINGMASTER_SERVICES_WORKER_CORE_TYPES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "worker/core/health_check.h"
#include "worker/core/progress.h"

namespace ringmaster::worker {

// Where one rank of a gang runs.
struct RankPlacement {
  int32_t rank = 0;
  std::string worker_id;
  std::string worker_address;
  int32_t worker_port = 0;
  std::vector<int32_t> gpu_indices;  // empty: a CPU rank
  bool operator==(const RankPlacement&) const = default;
};

struct TrainerWorkload {
  std::string model;                        // empty: the trainer's default
  int32_t batch_size = 0;                   // 0: the trainer's default
  int64_t steps = 0;                        // 0: the trainer's default
  std::optional<int32_t> checkpoint_every;  // unset: the trainer's default
};

struct CommandWorkload {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  // The program calls MPI_Init: its pre-run check runs there (ChecksInSession).
  bool check_in_mpi_init = false;
};

// A volume mount of an attempt's containers, as the scheduler resolved it.
struct AssignedMount {
  std::string volume;
  std::string host_path;
  std::string container_path;
  bool read_only = false;
  bool operator==(const AssignedMount&) const = default;
};

// The job's team's credential for the registry of its image (Assignment.registry_auth;
// docs/environments.md, "Private registries"). The secret goes to the runtime in a private file
// for the pull, and nowhere else: never into a log line, a command line or a message.
struct RegistryAuth {
  std::string registry;  // HOST[:PORT], lower-case
  std::string username;
  std::string secret;
  // Empty, or why the scheduler cannot read the team's stored credential: `secret` is empty
  // then, the pull goes without credentials, and its failure says so (RegistryAuth.problem).
  std::string problem{};
  bool operator==(const RegistryAuth&) const = default;
};

// The environment a job with an image runs in (JobSpec.image; docs/environments.md).
struct JobImage {
  std::string reference;  // as the spec gives it
  std::string digest;     // pinned by an earlier attempt; empty: the launcher resolves it
  std::vector<AssignedMount> mounts;
  int64_t shm_size_bytes = 0;
  std::string workdir;
  std::optional<RegistryAuth> registry_auth;
};

// One job attempt as the scheduler assigned it: every rank of the gang, on every worker.
struct Assignment {
  std::string job_id;
  int32_t attempt = 0;
  std::string queue;
  std::optional<TrainerWorkload> trainer;
  std::optional<CommandWorkload> command;
  std::vector<RankPlacement> placement;
  std::string token;
  // The pre-run allreduce check (core/health_check.h): run it, and judge it by this.
  bool run_check = false;
  CheckPolicy check_policy;
  // Every rank has real GPUs: the check is ringmaster-check's NCCL allreduce (an mpirun of its
  // own), never the in-session one, which is MPI on the host.
  bool check_on_gpus = false;
  // The scheduler wants ringmaster-check's own mpirun, never the in-session check (whose result
  // the job's processes write): a worker on probation, or a blame to verify.
  bool check_separately = false;
  // Authorises the Exec calls of ringmaster-check's mpirun, which runs as the worker's own user
  // (Agent::CheckBeforeLaunch); empty from a scheduler that mints none.
  std::string check_token;
  // Start the one rank directly with ringmaster-rank, without mpirun (AttemptLauncher).
  bool start_directly = false;
  // An elastic job (JobSpec.min_replicas/max_replicas): its ranks get RINGMASTER_ELASTIC=1, as
  // a later attempt may run at another size.
  bool elastic = false;
  // A share of one GPU (JobSpec.gpu_share, thousandths; 0: whole GPUs) and the device memory
  // each rank may use (JobSpec.gpu_memory, bytes; 0: no limit of its own). Every placed rank of
  // such a job has exactly one GPU index, which other shared ranks may be using too; its ranks
  // are told both (core/gpu_share.h) and, on real GPUs, run as MPS clients.
  int32_t gpu_share = 0;
  int64_t gpu_memory = 0;
  // The job's team: whose Unix user runs the attempt on a worker with --run-as.
  std::string team;
  // Set for a job with an image: every rank runs in a container of it.
  std::optional<JobImage> image;
};

// A rank's life as the worker reports it to the scheduler (RankStatus on the wire).
struct RankStatus {
  // kChecked: the attempt's pre-run check ended (`check`, sent as CheckResult).
  // kImageResolved: the launcher pinned the job's image to `image_digest`.
  enum class Kind {
    kStarted,
    kExited,
    kLaunchFailed,
    kCheckpoint,
    kProgress,
    kChecked,
    kImageResolved
  };
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  Kind kind = Kind::kStarted;
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string message;
  int64_t checkpoint_step = 0;  // kCheckpoint: from checkpoint.meta
  int64_t checkpoint_time_ms = 0;
  // kProgress only.
  RankProgress progress;
  std::optional<CheckReport> check;
  std::string image_digest;  // kImageResolved only
  bool operator==(const RankStatus&) const = default;
};

// A rank listed in RegisterWorker (RunningRank on the wire).
struct HeldRank {
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  bool exited = false;
  int32_t exit_code = 0;
  // Told to stop and still exiting (RunningRank.stopping), and the GPUs it was given.
  bool stopping = false;
  std::vector<int32_t> gpu_indices;
  bool operator==(const HeldRank&) const = default;
};

// One GPU (or simulated slot) the worker offers.
struct Gpu {
  int32_t index = 0;
  std::string type;
  int64_t memory_bytes = 0;
  bool simulated = false;
  // A MIG instance's UUID ("MIG-..."), by which CUDA_VISIBLE_DEVICES names it; empty for a
  // whole GPU, which its index names. A MIG instance's index is the worker's own number.
  std::string uuid;
};

// What the worker registers with.
struct Inventory {
  std::string worker_id;
  std::string address;
  int32_t port = 0;
  std::vector<Gpu> gpus;
  int32_t cpu_slots = 0;
  // RegisterWorker.shares_one_team: see SharesOneTeam (core/gpu_share.h).
  bool shares_one_team = false;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_TYPES_H_
