// How a rank of a job with an image runs in a container (docs/environments.md): the image
// reference and its pinned form, what of the worker's state a volume may not cover, which of a
// rank's environment variables enter its container, and the runtime's command line. Plain data
// in, plain data out; the agent and the rank wrapper run the result.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_CONTAINER_H_
#define RINGMASTER_SERVICES_WORKER_CORE_CONTAINER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/core/types.h"

namespace ringmaster::worker {

// [REGISTRY[:PORT]/]NAME[:TAG][@sha256:HEX], split.
struct ImageReference {
  std::string repository;  // REGISTRY[:PORT]/NAME, or NAME
  std::string tag;         // empty when none was given
  std::string digest;      // "sha256:..." when one was given
};

// INVALID_ARGUMENT naming `field` for anything that is not such a reference (JobSpec.image's
// rules: lower-case path components, a tag of [A-Za-z0-9_.-] starting with neither '.' nor '-',
// at most 128 characters, a sha256 digest of 64 lower-case hex digits, at most 512 bytes).
absl::StatusOr<ImageReference> ParseImageReference(const std::string& text,
                                                   const std::string& field = "image");

// "sha256:" and 64 lower-case hex digits.
bool IsImageDigest(const std::string& text);

// REPOSITORY@DIGEST: the bytes every rank of every attempt runs, whatever the tag points at by
// then.
std::string PinnedImage(const ImageReference& reference, const std::string& digest);

// What a worker pulls for a job: REPOSITORY@DIGEST once a digest is pinned, else the reference.
std::string ImageToPull(const JobImage& image);

// A volume's or any mount's path on the host.
struct ContainerMount {
  std::string host_path;
  std::string container_path;
  bool read_only = false;
  bool operator==(const ContainerMount&) const = default;
};

// True when `path` is `dir` or below it (both absolute and normalised).
bool PathCovers(const std::string& dir, const std::string& path);

// A volume's host path (already resolved: symlinks followed) must not cover, or lie inside,
// what the worker keeps for itself (its state, certificates, logs): FAILED_PRECONDITION naming
// the volume and the directory.
absl::Status CheckVolumePath(const std::string& volume, const std::string& resolved_host_path,
                             const std::vector<std::string>& protected_paths);

// Which variables of a rank's environment enter its container: the rank's own (RANK,
// MASTER_ADDR, a command's env: `rank_env`), the rendezvous variables mpirun exports
// (MASTER_PORT, WORLD_SIZE), Open MPI's and PMIx's (OMPI_*, OPAL_*, ORTE_*,
// PMIX_*), the platform's (RINGMASTER_*), CUDA_* and NCCL_*, and LD_PRELOAD (the collective
// counters, mounted at the same path). Never the host's PATH, HOME, LD_LIBRARY_PATH, TMPDIR and
// the like: the image has its own. Sorted.
std::vector<std::string> ContainerEnvNames(const std::map<std::string, std::string>& env,
                                           const std::map<std::string, std::string>& rank_env);

// Everything the runtime is told for one rank.
struct ContainerRun {
  std::string runtime = "podman";
  std::string image;  // pinned: REPOSITORY@DIGEST
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<ContainerMount> mounts;
  std::vector<std::string> devices;
  int64_t shm_size_bytes = 0;  // 0: /dev/shm is the host's (host IPC)
  std::string workdir;
  std::string user;  // "UID:GID"
  // Explicit limits at or below the worker's own hard limits: a runtime's defaults may exceed
  // what the worker may set (podman's nofile 1048576 fails without CAP_SYS_RESOURCE).
  uint64_t nofile_soft = 1024, nofile_hard = 4096;
  uint64_t nproc_soft = 4096, nproc_hard = 4096;
  std::vector<std::string> env_names;  // passed by name: values come from the runtime's env
  // Set inside the container whatever the rank's environment says (non-secret values only: they
  // are on the runtime's command line).
  std::map<std::string, std::string> env_values;
  std::vector<std::string> extra_args;  // the operator's --container-args
  std::vector<std::string> program;
};

// `RUNTIME run --rm ... IMAGE PROGRAM...`: the host's network, IPC and process namespaces (MPI's
// TCP and shared memory, NCCL, and Open MPI's shared-memory segments, which are named by
// process id), every capability dropped, no new privileges, the runtime's default seccomp
// profile, no image pull (the worker pulled it), the program's signals proxied. With a
// shm_size, /dev/shm is a private tmpfs of that size instead of the host's.
std::vector<std::string> ContainerRunArgv(const ContainerRun& run);

// What the worker contributes to every rank container it starts.
struct ContainerHost {
  std::string runtime = "podman";
  std::string worker_id;
  std::string user;  // "UID:GID" of the attempt's processes
  // The platform's own paths a rank reads or writes, mounted at the same path inside: the job's
  // checkpoint directory, the attempt's Open MPI session directory, the CA file.
  std::vector<ContainerMount> platform_mounts;
  // The attempt's Open MPI session directory (one of platform_mounts): with a private /dev/shm
  // (a shm_size), Open MPI's shared-memory files go there, where every rank here sees them.
  std::string session_dir;
  // The GPU driver's control devices (/dev/nvidiactl, /dev/nvidia-uvm...) and user-space
  // libraries (bound read-only at the same path), present on this host.
  std::vector<std::string> control_devices;
  std::vector<ContainerMount> driver_mounts;
  bool simulated_gpus = false;
  std::vector<std::string> extra_args;
  // The workers' Open MPI version ("4.1.4"; empty: unknown), which an MPI rank's image must
  // match in its release series: its MPI_Init checks (RINGMASTER_HOST_OPEN_MPI).
  std::string host_open_mpi;
  // The worker's MPS pipe directory (host/mps_daemon.h), mounted at the same path into the
  // containers of shared ranks on real GPUs, where their CUDA_MPS_PIPE_DIRECTORY points; empty:
  // no daemon runs.
  std::string mps_pipe_directory;
  // The worker's GPU indices that are MIG instances: a rank in a container cannot have one yet
  // (it would need the instance's /dev/nvidia-caps devices beside its GPU's; not built).
  std::set<int32_t> mig_indices;
};

// "4.1.4" from `mpirun --version`'s first line ("mpirun (Open MPI) 4.1.4"); empty when it is
// not Open MPI's.
std::string OpenMpiVersion(const std::string& mpirun_version_output);

// The container of placed rank `rank` of `assignment` (which has an image), running
// REPOSITORY@`digest`: the job's volumes, the platform's mounts, the rank's GPUs (only its own:
// /dev/nvidiaN of each placed index, numbered from 0 inside as CUDA_VISIBLE_DEVICES says), the
// labels and name; for a rank of a job with a GPU share on real GPUs, the MPS pipe directory
// (the container shares the host's IPC namespace already, as MPS clients need). The program,
// environment names and the wrapper's own mounts are the wrapper's to add. INVALID_ARGUMENT for a
// bad reference or digest.
absl::StatusOr<ContainerRun> PlanRankContainer(const Assignment& assignment, int32_t rank,
                                               const std::string& digest,
                                               const ContainerHost& host);

// rm-JOB-ATTEMPT-RANK, with characters a runtime refuses in a name replaced.
std::string RankContainerName(const std::string& job_id, int32_t attempt, int32_t rank);

// Labels every container of the worker carries (ringmaster.worker and the rank's tags).
inline constexpr char kWorkerLabel[] = "ringmaster.worker";
std::map<std::string, std::string> RankContainerLabels(const std::string& worker_id,
                                                       const std::string& job_id,
                                                       int32_t attempt, int32_t rank);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_CONTAINER_H_
