#include "worker/core/gpu_share.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/thousandths.h"

namespace ringmaster::worker {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int32_t kMaxThreadPercentage = 100;

}  // namespace

int32_t MpsActiveThreadPercentage(int32_t thousandths) {
  const int32_t percent = (thousandths + 9) / 10;
  return std::clamp(percent, int32_t{1}, kMaxThreadPercentage);
}

std::string MpsPinnedDeviceMemLimit(int64_t bytes) {
  return absl::StrCat("0=", std::max<int64_t>(1, bytes / kMiB), "M");
}

bool SharesOneTeam(bool runs_teams_as_users, bool simulated_gpus, bool has_gpus) {
  return runs_teams_as_users && !simulated_gpus && has_gpus;
}

bool PlacesSharedRankOn(const Assignment& assignment, const std::string& worker_id) {
  if (assignment.gpu_share <= 0) return false;
  return std::any_of(
      assignment.placement.begin(), assignment.placement.end(),
      [&](const RankPlacement& r) { return r.worker_id == worker_id && !r.gpu_indices.empty(); });
}

std::map<std::string, std::string> GpuShareEnvironment(const Assignment& assignment,
                                                       const RankPlacement& rank,
                                                       const std::string& mps_pipe_directory) {
  std::map<std::string, std::string> env;
  if (assignment.gpu_share <= 0 || rank.gpu_indices.empty()) return env;
  env[kGpuShareEnv] = ThousandthsText(assignment.gpu_share);
  if (assignment.gpu_memory > 0) env[kGpuMemoryEnv] = absl::StrCat(assignment.gpu_memory);
  if (mps_pipe_directory.empty()) return env;
  env[kMpsPipeDirectoryEnv] = mps_pipe_directory;
  env[kMpsActiveThreadPercentageEnv] =
      absl::StrCat(MpsActiveThreadPercentage(assignment.gpu_share));
  if (assignment.gpu_memory > 0) {
    env[kMpsPinnedDeviceMemLimitEnv] = MpsPinnedDeviceMemLimit(assignment.gpu_memory);
  }
  return env;
}

MpsDirectories MpsDirectoriesUnder(const std::string& base) {
  return {.pipe = absl::StrCat(base, "/pipe"), .log = absl::StrCat(base, "/log")};
}

std::map<std::string, std::string> MpsDaemonEnvironment(std::map<std::string, std::string> base,
                                                        const MpsDirectories& dirs) {
  base.erase("CUDA_VISIBLE_DEVICES");
  base[kMpsPipeDirectoryEnv] = dirs.pipe;
  base[kMpsLogDirectoryEnv] = dirs.log;
  base["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  return base;
}

std::vector<std::string> MpsStartArgv(const std::string& control_binary) {
  return {control_binary, "-d"};
}

std::vector<std::string> MpsQuitArgv(const std::string& control_binary) {
  // The control program reads its commands on stdin; $0 keeps the path out of the script text.
  return {"/bin/sh", "-c", "echo quit | exec \"$0\"", control_binary};
}

}  // namespace ringmaster::worker
