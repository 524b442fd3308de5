#include "worker/core/layout.h"

#include "absl/strings/str_cat.h"
#include "worker/core/launch.h"

namespace ringmaster::worker {
namespace {

uint32_t Fnv1a(const std::string& text) {
  uint32_t h = 2166136261u;
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  return h;
}

}  // namespace

std::string SessionSuffix(const std::string& worker_id) {
  return absl::StrCat(".", absl::Hex(Fnv1a(worker_id), absl::kZeroPad8));
}

std::string DefaultSessionRoot(uint32_t euid) { return absl::StrCat("/tmp/ringmaster-mpi-", euid); }

std::string WorkerLayout::AttemptDir(const std::string& job_id, int32_t attempt) const {
  return absl::StrCat(log_dir, "/", job_id, "/", attempt);
}

std::string WorkerLayout::RankLogPath(const std::string& job_id, int32_t attempt,
                                      int32_t rank) const {
  return absl::StrCat(log_dir, "/", RankLogRelativePath(job_id, attempt, rank));
}

std::string WorkerLayout::CheckResultPath(const std::string& job_id, int32_t attempt,
                                          bool as_team_user) const {
  const std::string dir = AttemptDir(job_id, attempt);
  return as_team_user ? dir + "/check/check.result" : dir + "/check.result";
}

std::string WorkerLayout::SessionBase(const std::string& job_id, int32_t attempt) const {
  return absl::StrCat(session_root, "/", job_id, ".", attempt, ".", session_suffix);
}

bool WorkerLayout::IsOwnSessionBase(const std::string& name) const {
  return name.size() > session_suffix.size() &&
         name.compare(name.size() - session_suffix.size(), session_suffix.size(), session_suffix) ==
             0;
}

std::string WorkerLayout::CheckpointDir(const std::string& job_id) const {
  return checkpoint_root.empty() ? "" : absl::StrCat(checkpoint_root, "/", job_id);
}

std::string WorkerLayout::MpsDir() const {
  return absl::StrCat(session_root, "/mps", session_suffix);
}

}  // namespace ringmaster::worker
