#include "worker/host/helpers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster::worker {
namespace {

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Why `path` cannot serve as the helper; empty when it can.
std::string Unusable(const std::string& path, bool library) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (access(path.c_str(), library ? R_OK : X_OK) != 0) {
    return absl::StrCat(library ? "not readable: " : "not executable: ", std::strerror(errno));
  }
  return "";
}

}  // namespace

std::vector<Helper> WorkerHelpers(const std::string& mpirun, const std::string& rsh,
                                  const std::string& rank, const std::string& train,
                                  const std::string& check) {
  std::string beside = Directory(rank);
  beside = beside.empty() ? "" : beside + "/";
  const std::string rank_set_by =
      "--rank-binary (RINGMASTER_RANK_BINARY): it is looked for beside ringmaster-rank";
  return {
      {"mpirun (launches every job)", mpirun, "--mpirun (RINGMASTER_MPIRUN)"},
      {"ringmaster-rsh (mpirun's remote launcher)", rsh, "--rsh-binary (RINGMASTER_RSH_BINARY)"},
      {"ringmaster-rank (wraps every rank)", rank, "--rank-binary (RINGMASTER_RANK_BINARY)"},
      {"ringmaster-train (the built-in trainer)", train,
       "--train-binary (RINGMASTER_TRAIN_BINARY)"},
      {"ringmaster-check (the pre-run check of every command job)", check,
       "--check-binary (RINGMASTER_CHECK_BINARY)"},
      {"ringmaster-progress (a command's progress reporter)", beside + "ringmaster-progress",
       rank_set_by},
      {"libringmaster_pmpi.so (the MPI collective counter of hang detection)",
       beside + "libringmaster_pmpi.so", rank_set_by, /*library=*/true},
      {"libringmaster_nccl.so (the NCCL collective counter of hang detection)",
       beside + "libringmaster_nccl.so", rank_set_by, /*library=*/true},
  };
}

absl::Status CheckHelpers(const std::vector<Helper>& helpers, const std::string& path_env) {
  std::vector<std::string> problems;
  for (const Helper& helper : helpers) {
    if (helper.path.empty()) {
      problems.push_back(absl::StrCat(helper.what, ": no path given (set ", helper.set_by, ")"));
      continue;
    }
    std::string why;
    if (helper.path.find('/') != std::string::npos) {
      why = Unusable(helper.path, helper.library);
    } else {
      // A bare name, as mpirun and the shell find it.
      why = "not found on PATH";
      for (absl::string_view dir : absl::StrSplit(path_env, ':', absl::SkipEmpty())) {
        const std::string candidate = absl::StrCat(dir, "/", helper.path);
        if (Unusable(candidate, helper.library).empty()) {
          why.clear();
          break;
        }
      }
    }
    if (!why.empty()) {
      problems.push_back(
          absl::StrCat(helper.what, " at ", helper.path, ": ", why, " (set ", helper.set_by, ")"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the worker cannot run jobs without its helpers; ", problems.size(),
                   problems.size() == 1 ? " is" : " are",
                   " missing or unusable: ", absl::StrJoin(problems, "; ")));
}

}  // namespace ringmaster::worker
