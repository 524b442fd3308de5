#include "worker/core/container.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "rank/rank_env.h"

namespace ringmaster::worker {
namespace {

bool IsLowerAlnum(char c) { return absl::ascii_islower(c) || absl::ascii_isdigit(c); }

// A path component of an image name: lower-case alphanumerics separated by '.', '_', '__' or
// runs of '-' (the distribution spec's grammar, slightly relaxed: any run of separators between
// alphanumerics).
bool IsNameComponent(absl::string_view c) {
  if (c.empty() || !IsLowerAlnum(c.front()) || !IsLowerAlnum(c.back())) return false;
  return std::all_of(c.begin(), c.end(),
                     [](char ch) { return IsLowerAlnum(ch) || ch == '.' || ch == '_' || ch == '-'; });
}

bool IsRegistryHost(absl::string_view host) {
  // host[:port]; a registry is told apart from a name component by a '.' or ':' or "localhost".
  absl::string_view name = host;
  if (size_t colon = host.find(':'); colon != absl::string_view::npos) {
    absl::string_view port = host.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return absl::ascii_isdigit(c); })) {
      return false;
    }
    name = host.substr(0, colon);
  }
  if (name.empty()) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty() || !absl::ascii_isalnum(label.front()) || !absl::ascii_isalnum(label.back())) {
      return false;
    }
    if (!std::all_of(label.begin(), label.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '-'; })) {
      return false;
    }
  }
  return true;
}

bool IsTag(absl::string_view tag) {
  if (tag.empty() || tag.size() > 128 || tag.front() == '.' || tag.front() == '-') return false;
  return std::all_of(tag.begin(), tag.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-';
  });
}

}  // namespace

bool IsImageDigest(const std::string& text) {
  constexpr absl::string_view kPrefix = "sha256:";
  if (text.size() != kPrefix.size() + 64 || !absl::StartsWith(text, kPrefix)) return false;
  return std::all_of(text.begin() + kPrefix.size(), text.end(), [](char c) {
    return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
  });
}

absl::StatusOr<ImageReference> ParseImageReference(const std::string& text,
                                                   const std::string& field) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", why, " (an OCI reference [REGISTRY[:PORT]/]NAME[:TAG][@sha256:DIGEST], "
        "such as registry.local:5000/team/pytorch:2.5)"));
  };
  if (text.empty()) return bad("must not be empty");
  if (text.size() > 512) return bad(absl::StrCat("at most 512 bytes, got ", text.size()));
  ImageReference ref;
  absl::string_view rest = text;
  if (size_t at = rest.find('@'); at != absl::string_view::npos) {
    ref.digest = std::string(rest.substr(at + 1));
    if (!IsImageDigest(ref.digest)) return bad("the digest must be sha256: and 64 lower-case hex digits");
    rest = rest.substr(0, at);
  }
  // A tag follows the last ':' after the last '/' (a ':' before it is a registry's port).
  const size_t slash = rest.rfind('/');
  const size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos && (slash == absl::string_view::npos || colon > slash)) {
    ref.tag = std::string(rest.substr(colon + 1));
    if (!IsTag(ref.tag)) {
      return bad("the tag must be 1..128 of [A-Za-z0-9_.-], not starting with '.' or '-'");
    }
    rest = rest.substr(0, colon);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  size_t first = 0;
  if (parts.size() > 1 && (absl::StrContains(parts[0], ".") || absl::StrContains(parts[0], ":") ||
                           parts[0] == "localhost")) {
    if (!IsRegistryHost(parts[0])) return bad(absl::StrCat("bad registry \"", parts[0], "\""));
    first = 1;
  }
  if (first == parts.size()) return bad("has no name");
  for (size_t i = first; i < parts.size(); ++i) {
    if (!IsNameComponent(parts[i])) {
      return bad(absl::StrCat("bad name component \"", parts[i],
                              "\": lower-case letters, digits and . _ - between them"));
    }
  }
  ref.repository = std::string(rest);
  return ref;
}

std::string PinnedImage(const ImageReference& reference, const std::string& digest) {
  return absl::StrCat(reference.repository, "@", digest);
}

std::string ImageToPull(const JobImage& image) {
  if (image.digest.empty()) return image.reference;
  absl::StatusOr<ImageReference> ref = ParseImageReference(image.reference);
  return ref.ok() ? PinnedImage(*ref, image.digest) : image.reference;
}

bool PathCovers(const std::string& dir, const std::string& path) {
  if (dir == "/") return true;
  return path == dir || (absl::StartsWith(path, dir) && path[dir.size()] == '/');
}

absl::Status CheckVolumePath(const std::string& volume, const std::string& resolved_host_path,
                             const std::vector<std::string>& protected_paths) {
  for (const std::string& kept : protected_paths) {
    if (kept.empty()) continue;
    if (PathCovers(resolved_host_path, kept) || PathCovers(kept, resolved_host_path)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume ", volume, " (", resolved_host_path, " on this worker) overlaps ", kept,
          ", which the worker keeps for itself (its state, certificates or logs); "
          "no job may mount it"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ContainerEnvNames(const std::map<std::string, std::string>& env,
                                           const std::map<std::string, std::string>& rank_env) {
  // mpirun's -x exports (core/launch.h) and the rank's own: what torch-style rendezvous reads.
  static const std::set<std::string> kRendezvous = {
      RM_ENV_MASTER_ADDR, RM_ENV_MASTER_PORT, RM_ENV_WORLD_SIZE,
      RM_ENV_RANK,        RM_ENV_LOCAL_RANK,  RM_ENV_LOCAL_WORLD_SIZE};
  static constexpr absl::string_view kPrefixes[] = {"OMPI_", "OPAL_", "ORTE_", "PMIX_",
                                                   "RINGMASTER_", "CUDA_", "NCCL_"};
  std::vector<std::string> names;
  for (const auto& entry : env) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture one
    const bool passed =
        rank_env.count(name) > 0 || name == "LD_PRELOAD" || kRendezvous.count(name) > 0 ||
        std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                    [&](absl::string_view p) { return absl::StartsWith(name, p); });
    if (passed) names.push_back(name);
  }
  return names;  // env is a map: sorted already
}

std::vector<std::string> ContainerRunArgv(const ContainerRun& run) {
  std::vector<std::string> argv = {run.runtime, "run", "--rm", "--name", run.name};
  for (const auto& [key, value] : run.labels) {
    argv.push_back("--label");
    argv.push_back(absl::StrCat(key, "=", value));
  }
  for (const char* flag : {"--network=host", "--ipc=host", "--pid=host", "--cap-drop=all",
                           "--security-opt=no-new-privileges", "--pull=never", "--sig-proxy=true",
                           "--log-driver=none"}) {
    argv.push_back(flag);
  }
  argv.push_back(absl::StrCat("--ulimit=nofile=", run.nofile_soft, ":", run.nofile_hard));
  argv.push_back(absl::StrCat("--ulimit=nproc=", run.nproc_soft, ":", run.nproc_hard));
  if (!run.user.empty()) argv.push_back(absl::StrCat("--user=", run.user));
  if (!run.workdir.empty()) argv.push_back(absl::StrCat("--workdir=", run.workdir));
  if (run.shm_size_bytes > 0) {
    argv.push_back(absl::StrCat("--mount=type=tmpfs,destination=/dev/shm,tmpfs-size=",
                                run.shm_size_bytes));
  }
  for (const ContainerMount& m : run.mounts) {
    argv.push_back(absl::StrCat("--mount=type=bind,source=", m.host_path,
                                ",destination=", m.container_path, m.read_only ? ",ro=true" : ""));
  }
  for (const std::string& device : run.devices) argv.push_back(absl::StrCat("--device=", device));
  for (const std::string& name : run.env_names) {
    if (run.env_values.count(name) > 0) continue;
    argv.push_back("--env");
    argv.push_back(name);
  }
  for (const auto& [name, value] : run.env_values) {
    argv.push_back("--env");
    argv.push_back(absl::StrCat(name, "=", value));
  }
  argv.insert(argv.end(), run.extra_args.begin(), run.extra_args.end());
  argv.push_back(run.image);
  argv.insert(argv.end(), run.program.begin(), run.program.end());
  return argv;
}

absl::StatusOr<ContainerRun> PlanRankContainer(const Assignment& assignment, int32_t rank,
                                               const std::string& digest,
                                               const ContainerHost& host) {
  if (!assignment.image) {
    return absl::InvalidArgumentError(absl::StrCat("job ", assignment.job_id, " has no image"));
  }
  const JobImage& image = *assignment.image;
  absl::StatusOr<ImageReference> ref = ParseImageReference(image.reference);
  if (!ref.ok()) return ref.status();
  if (!IsImageDigest(digest)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image digest \"", digest, "\" of ", image.reference, " is not sha256: and 64 hex digits"));
  }
  ContainerRun run;
  run.runtime = host.runtime;
  run.image = PinnedImage(*ref, digest);
  run.name = RankContainerName(assignment.job_id, assignment.attempt, rank);
  run.labels = RankContainerLabels(host.worker_id, assignment.job_id, assignment.attempt, rank);
  run.mounts = host.platform_mounts;
  for (const AssignedMount& m : image.mounts) {
    run.mounts.push_back({m.host_path, m.container_path, m.read_only});
  }
  run.shm_size_bytes = image.shm_size_bytes;
  if (!host.host_open_mpi.empty()) run.env_values[RM_ENV_HOST_OPEN_MPI] = host.host_open_mpi;
  if (run.shm_size_bytes > 0 && !host.session_dir.empty()) {
    run.env_values["OMPI_MCA_btl_vader_backing_directory"] = host.session_dir;
  }
  run.workdir = image.workdir;
  run.user = host.user;
  run.extra_args = host.extra_args;
  const RankPlacement* placed = nullptr;
  for (const RankPlacement& p : assignment.placement) {
    if (p.rank == rank) placed = &p;
  }
  if (placed != nullptr && !placed->gpu_indices.empty() && !host.simulated_gpus) {
    std::vector<std::string> visible;
    for (int32_t index : placed->gpu_indices) {
      if (host.mig_indices.contains(index)) {
        return absl::FailedPreconditionError(
            absl::StrCat("GPU ", index, " of worker ", host.worker_id,
                         " is a MIG instance; a job with an image cannot run on MIG instances yet "
                         "(docs/gpu-sharing.md, MIG)"));
      }
      run.devices.push_back(absl::StrCat("/dev/nvidia", index));
      visible.push_back(absl::StrCat(visible.size()));
    }
    run.devices.insert(run.devices.end(), host.control_devices.begin(), host.control_devices.end());
    run.mounts.insert(run.mounts.end(), host.driver_mounts.begin(), host.driver_mounts.end());
    // Only the rank's device nodes exist inside, and CUDA numbers what it can open from 0.
    run.env_values["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(visible, ",");
    // The rank is an MPS client (core/gpu_share.h): the daemon's pipes at the path it is told.
    if (assignment.gpu_share > 0 && !host.mps_pipe_directory.empty()) {
      run.mounts.push_back({host.mps_pipe_directory, host.mps_pipe_directory, false});
    }
  }
  return run;
}

std::string OpenMpiVersion(const std::string& mpirun_version_output) {
  const std::string kMarker = "(Open MPI) ";
  const size_t at = mpirun_version_output.find(kMarker);
  if (at == std::string::npos) return "";
  std::string version;
  for (size_t i = at + kMarker.size(); i < mpirun_version_output.size(); ++i) {
    const char c = mpirun_version_output[i];
    if (!absl::ascii_isdigit(c) && c != '.') break;
    version.push_back(c);
  }
  return version;
}

std::string RankContainerName(const std::string& job_id, int32_t attempt, int32_t rank) {
  std::string name = absl::StrCat("rm-", job_id, "-", attempt, "-", rank);
  for (char& c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') c = '-';
  }
  return name;
}

std::map<std::string, std::string> RankContainerLabels(const std::string& worker_id,
                                                       const std::string& job_id,
                                                       int32_t attempt, int32_t rank) {
  return {{kWorkerLabel, worker_id},
          {"ringmaster.job", job_id},
          {"ringmaster.attempt", absl::StrCat(attempt)},
          {"ringmaster.rank", absl::StrCat(rank)}};
}

}  // namespace ringmaster::worker
