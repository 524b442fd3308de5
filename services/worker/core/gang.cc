#include "worker/core/gang.h"

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace ringmaster::worker {
namespace {
constexpr size_t kMaxMessage = 1024;
}  // namespace

GangState::GangState(std::string job_id, int32_t attempt, std::vector<int32_t> local_ranks,
                     std::string launcher)
    : job_id_(std::move(job_id)), attempt_(attempt), launcher_(std::move(launcher)) {
  for (int32_t r : local_ranks) ranks_[r] = Rank{};
}

RankStatus GangState::Status(int32_t rank, RankStatus::Kind kind) const {
  RankStatus s;
  s.job_id = job_id_;
  s.attempt = attempt_;
  s.rank = rank;
  s.kind = kind;
  return s;
}

GangState::Phase GangState::phase(int32_t rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? Phase::kAssigned : it->second.phase;
}

GangState::Decision GangState::OnStarted(int32_t rank, int32_t pid) {
  Decision d;
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || it->second.phase != Phase::kAssigned) return d;
  it->second.phase = Phase::kStarted;
  it->second.pid = pid;
  d.reports.push_back(Status(rank, RankStatus::Kind::kStarted));
  return d;
}

GangState::Decision GangState::OnExited(int32_t rank, int32_t exit_code, int32_t signal,
                                        const std::string& message) {
  Decision d;
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return d;
  Rank& r = it->second;
  if (r.phase == Phase::kExited || r.phase == Phase::kLaunchFailed) return d;
  r.phase = Phase::kExited;
  r.exit_code = signal != 0 ? 0 : exit_code;
  r.signal = signal;
  RankStatus s = Status(rank, RankStatus::Kind::kExited);
  s.exit_code = r.exit_code;
  s.signal = signal;
  s.message = Utf8Prefix(message, kMaxMessage);
  d.reports.push_back(std::move(s));
  d.stop_local = (exit_code != 0 || signal != 0) && !stopping_;
  if (d.stop_local) {
    d.why = signal != 0 ? absl::StrCat("rank ", rank, " was killed by signal ", signal)
                        : absl::StrCat("rank ", rank, " exited with code ", exit_code);
  }
  return d;
}

GangState::Decision GangState::OnVanished(int32_t rank) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || it->second.phase != Phase::kStarted) return {};
  constexpr int32_t kSigKill = 9;
  return OnExited(rank, 0, kSigKill, "the rank's process vanished without reporting its exit");
}

GangState::Decision GangState::OnLauncherExited(int32_t exit_code, int32_t signal,
                                                const std::string& output_tail) {
  Decision d;
  const std::string how = signal != 0 ? absl::StrCat("was killed by signal ", signal)
                                      : absl::StrCat("exited with code ", exit_code);
  for (auto& [rank, r] : ranks_) {
    if (r.phase != Phase::kAssigned) continue;
    r.phase = Phase::kLaunchFailed;
    RankStatus s = Status(rank, RankStatus::Kind::kLaunchFailed);
    s.message = Utf8Prefix(
        absl::StrCat(launcher_, " ", how, " before rank ", rank, " started: ", output_tail),
        kMaxMessage);
    d.reports.push_back(std::move(s));
  }
  d.stop_local = (exit_code != 0 || signal != 0 || !d.reports.empty()) && !stopping_;
  if (d.stop_local) d.why = absl::StrCat(launcher_, " ", how);
  return d;
}

GangState::Decision GangState::OnLaunchFailed(const std::string& why) {
  Decision d;
  for (auto& [rank, r] : ranks_) {
    if (r.phase != Phase::kAssigned) continue;
    r.phase = Phase::kLaunchFailed;
    RankStatus s = Status(rank, RankStatus::Kind::kLaunchFailed);
    s.message = Utf8Prefix(why, kMaxMessage);
    d.reports.push_back(std::move(s));
  }
  d.stop_local = !stopping_;
  if (d.stop_local) d.why = absl::StrCat(launcher_, " could not be started: ", why);
  return d;
}

GangState::Decision GangState::OnExecExited(int32_t exit_code, int32_t signal) {
  Decision d;
  // The launcher's mpirun decides about ranks that never started; a failed orted here only
  // means nothing of this attempt should be left running on this worker.
  d.stop_local = (exit_code != 0 || signal != 0) && !stopping_;
  if (d.stop_local) {
    d.why = absl::StrCat("a command Exec'd for the attempt (orted) ",
                         signal != 0 ? absl::StrCat("was killed by signal ", signal)
                                     : absl::StrCat("exited with code ", exit_code));
  }
  return d;
}

GangState::Decision GangState::OnTornDown(int32_t signal_sent) {
  Decision d;
  constexpr int32_t kSigKill = 9;
  // The wrapper's own end is unknown; the signal the worker sent is the likeliest cause.
  const int32_t signal = signal_sent != 0 ? signal_sent : kSigKill;
  for (auto& [rank, r] : ranks_) {
    if (r.phase == Phase::kStarted) {
      Decision one = OnExited(rank, 0, signal,
                              absl::StrCat("the rank's wrapper was killed before it could report "
                                           "its exit, while the worker stopped the attempt: ",
                                           stop_why_));
      for (RankStatus& s : one.reports) d.reports.push_back(std::move(s));
    } else if (r.phase == Phase::kAssigned) {
      r.phase = Phase::kLaunchFailed;
      RankStatus s = Status(rank, RankStatus::Kind::kLaunchFailed);
      s.message = absl::StrCat("the worker stopped the attempt before rank ", rank,
                               " started: ", stop_why_);
      d.reports.push_back(std::move(s));
    }
  }
  d.stop_local = false;  // already stopped
  return d;
}

bool GangState::AllEnded() const {
  for (const auto& [rank, r] : ranks_) {
    if (r.phase == Phase::kAssigned || r.phase == Phase::kStarted) return false;
  }
  return true;
}

bool GangState::AllSucceeded() const {
  for (const auto& [rank, r] : ranks_) {
    if (r.phase != Phase::kExited || r.exit_code != 0 || r.signal != 0) return false;
  }
  return true;
}

std::map<int32_t, int32_t> GangState::RunningPids() const {
  std::map<int32_t, int32_t> pids;
  for (const auto& [rank, r] : ranks_) {
    if (r.phase == Phase::kStarted && r.pid > 0) pids[rank] = r.pid;
  }
  return pids;
}

std::vector<HeldRank> GangState::Held() const {
  std::vector<HeldRank> held;
  for (const auto& [rank, r] : ranks_) {
    HeldRank h{job_id_, attempt_, rank, false, 0, false, {}};
    if (r.phase == Phase::kExited) {
      h.exited = true;
      h.exit_code = r.signal != 0 ? 128 + r.signal : r.exit_code;
    } else if (r.phase == Phase::kLaunchFailed) {
      h.exited = true;
      h.exit_code = kLaunchFailedExitCode;
    }
    held.push_back(h);
  }
  return held;
}

}  // namespace ringmaster::worker
