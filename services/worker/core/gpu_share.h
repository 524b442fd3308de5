// What a rank holding a share of one GPU is told, and how the worker runs the NVIDIA MPS
// control daemon that enforces shares on real GPUs (docs/gpu-sharing.md). Plain data in, plain
// data out: nothing here starts a process or touches a file; host/mps_daemon.h runs what these
// compute.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_GPU_SHARE_H_
#define RINGMASTER_SERVICES_WORKER_CORE_GPU_SHARE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rank/rank_env.h"
#include "worker/core/types.h"

namespace ringmaster::worker {

// JobSpec.gpu_share counts thousandths of one GPU.
inline constexpr int32_t kThousandthsPerGpu = 1000;

inline constexpr char kGpuShareEnv[] = RM_ENV_GPU_SHARE;
inline constexpr char kGpuMemoryEnv[] = RM_ENV_GPU_MEMORY;
// NVIDIA's names (the MPS guide, "Environment Variables").
inline constexpr char kMpsPipeDirectoryEnv[] = "CUDA_MPS_PIPE_DIRECTORY";
inline constexpr char kMpsLogDirectoryEnv[] = "CUDA_MPS_LOG_DIRECTORY";
inline constexpr char kMpsActiveThreadPercentageEnv[] = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
inline constexpr char kMpsPinnedDeviceMemLimitEnv[] = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";
inline constexpr char kMpsControlBinary[] = "nvidia-cuda-mps-control";

// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for a share: ceil(thousandths / 10), within 1..100. Rounded
// up, so that no share gets less of the SMs than it was given.
int32_t MpsActiveThreadPercentage(int32_t thousandths);

// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT for `bytes` on a rank's one visible device: "0=NM", the
// client's device ordinal 0 (a shared rank sees exactly one device) and N whole MiB, rounded
// down so that MPS never allows more than the job asked for, and at least 1.
std::string MpsPinnedDeviceMemLimit(int64_t bytes);

// RegisterWorker.shares_one_team: a worker that runs teams as their own Unix users (--run-as)
// with real GPUs, whose shares one MPS daemon enforces, and MPS serves one user at a time.
// Simulated GPUs have no daemon, so shares of several teams run side by side there.
bool SharesOneTeam(bool runs_teams_as_users, bool simulated_gpus, bool has_gpus);

// Whether `assignment` is of a job with a GPU share that places a rank with a GPU on worker
// `worker_id`: the attempts that need the MPS daemon on a worker with real GPUs.
bool PlacesSharedRankOn(const Assignment& assignment, const std::string& worker_id);

// The variables placed rank `rank` gets for its share, beside the rest of its environment
// (RankEnvironment): none for a whole-GPU job or a rank without a GPU; otherwise
// RINGMASTER_GPU_SHARE, RINGMASTER_GPU_MEMORY when the job limits memory, and, when
// `mps_pipe_directory` is not empty (a real GPU, the worker's MPS daemon running), the MPS
// client's CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and, with a memory limit,
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT.
std::map<std::string, std::string> GpuShareEnvironment(const Assignment& assignment,
                                                       const RankPlacement& rank,
                                                       const std::string& mps_pipe_directory);

// Where the worker's MPS control daemon keeps its pipes (and its clients find them) and its
// logs: `base`/pipe and `base`/log (base: WorkerLayout::MpsDir()).
struct MpsDirectories {
  std::string pipe;
  std::string log;
  bool operator==(const MpsDirectories&) const = default;
};
MpsDirectories MpsDirectoriesUnder(const std::string& base);

// The daemon's environment (and that of `echo quit | nvidia-cuda-mps-control`): `base` with
// CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY set to `dirs`, CUDA_DEVICE_ORDER=PCI_BUS_ID
// (the order the worker numbers its GPUs in, as its ranks are told), and without
// CUDA_VISIBLE_DEVICES: the daemon must see every device, because a daemon started with some
// hidden renumbers the devices its clients see, and a rank's CUDA_VISIBLE_DEVICES (the worker's
// index) would then name another device or none.
std::map<std::string, std::string> MpsDaemonEnvironment(std::map<std::string, std::string> base,
                                                        const MpsDirectories& dirs);

// `CONTROL -d`: starts the daemon in the background.
std::vector<std::string> MpsStartArgv(const std::string& control_binary);
// `echo quit | CONTROL` through /bin/sh: stops the daemon (and the MPS servers it started).
std::vector<std::string> MpsQuitArgv(const std::string& control_binary);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_GPU_SHARE_H_
