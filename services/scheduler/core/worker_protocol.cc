#include "scheduler/core/worker_protocol.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace ringmaster::scheduler {

bool PlacedOn(const Job& job, int32_t rank, const std::string& worker_id) {
  return std::any_of(job.placement.begin(), job.placement.end(), [&](const RankPlacement& r) {
    return r.rank == rank && r.worker_id == worker_id;
  });
}

std::optional<JobInput> InputOfRankReport(const Job& job, const std::string& worker_id,
                                          const RankReport& report, RankTracker& tracker) {
  const size_t world = job.placement.size();
  switch (report.kind) {
    case RankReport::Kind::kStarted:
      if (tracker.OnStarted(report.rank) && job.state == JobState::kStarting) {
        return JobInput{JobInput::Kind::kAllStarted, absl::StrCat("all ", world, " ranks started")};
      }
      return std::nullopt;
    case RankReport::Kind::kExited: {
      if (report.exit_code == 0 && report.signal == 0) {
        if (!tracker.OnSucceeded(report.rank)) return std::nullopt;
        return JobInput{JobInput::Kind::kAllSucceeded,
                        absl::StrCat("all ", world, " ranks exited 0")};
      }
      // The worker's word on it, when it has one ("cannot run ./train: No such file or
      // directory", a wrapper killed while the worker stopped the attempt, and why).
      const std::string why =
          report.message.empty() ? "" : absl::StrCat(": ", Utf8Prefix(report.message, 512));
      if (report.signal != 0) {
        return JobInput{JobInput::Kind::kFailed,
                        absl::StrCat("rank ", report.rank, " on ", worker_id,
                                     " was killed by signal ", report.signal, why),
                        128 + report.signal};
      }
      return JobInput{JobInput::Kind::kFailed,
                      absl::StrCat("rank ", report.rank, " on ", worker_id, " exited with code ",
                                   report.exit_code, why),
                      report.exit_code};
    }
    case RankReport::Kind::kLaunchFailed:
      return JobInput{JobInput::Kind::kFailed,
                      absl::StrCat("rank ", report.rank, " could not start on ", worker_id, ": ",
                                   Utf8Prefix(report.message, 512))};
    case RankReport::Kind::kProgress:
    case RankReport::Kind::kCheckpoint:
    case RankReport::Kind::kImageResolved:
      return std::nullopt;
  }
  return std::nullopt;
}

bool AcceptsCheckpoint(const Job& job, const RankReport& report, int64_t now_ms) {
  constexpr int64_t kClockSlackMs = 5 * 60 * 1000;
  return report.attempt <= job.attempt && report.rank == 0 &&
         report.checkpoint_time_ms <= now_ms + kClockSlackMs &&
         report.checkpoint_time_ms >= job.last_checkpoint_time_ms;
}

DigestVerdict JudgeImageDigest(const Job& job, const std::string& worker_id,
                               const RankReport& report) {
  // Only the current attempt's launcher resolves the image: a late report of an earlier
  // attempt pins nothing.
  if (job.attempt != report.attempt) return DigestVerdict::kIgnore;
  if (job.spec.image.empty() || !job.image_digest.empty()) return DigestVerdict::kIgnore;
  return PlacedOn(job, 0, worker_id) ? DigestVerdict::kPin : DigestVerdict::kNotLauncher;
}

Reconciliation ReconcileWorker(
    const std::string& worker_id, const std::vector<HeldRank>& held,
    const std::function<const Job*(const std::string&)>& live,
    const std::vector<const Job*>& placed,
    const std::function<bool(const std::string& job_id, int32_t rank)>& started) {
  Reconciliation out;
  std::set<std::tuple<std::string, int32_t, int32_t>> held_here;
  std::set<std::pair<std::string, int32_t>> attempts_held;
  for (const HeldRank& h : held) {
    const Job* job = live(h.job_id);
    if (job == nullptr || job->attempt != h.attempt || !PlacedOn(*job, h.rank, worker_id)) {
      out.orphans.push_back(h);
      continue;
    }
    held_here.insert({h.job_id, h.attempt, h.rank});
    attempts_held.insert({h.job_id, h.attempt});
  }
  const std::string reason = absl::StrCat("worker ", worker_id, " re-registered");
  for (const Job* job : placed) {
    std::vector<int32_t> here;
    for (const RankPlacement& r : job->placement) {
      if (r.worker_id == worker_id) here.push_back(r.rank);
    }
    auto gone = std::find_if(here.begin(), here.end(), [&](int32_t rank) {
      return !held_here.contains({job->id, job->attempt, rank});
    });
    if (gone == here.end()) continue;
    const bool never_started = std::none_of(here.begin(), here.end(),
                                            [&](int32_t rank) { return started(job->id, rank); });
    if (job->state == JobState::kStarting && !attempts_held.contains({job->id, job->attempt}) &&
        never_started) {
      out.ends.push_back({job->id,
                          {JobInput::Kind::kNotDelivered,
                           absl::StrCat(reason, " without attempt ", job->attempt,
                                        ", which never reached it; "
                                        "placing it again (not counted against backoff_limit)")}});
      continue;
    }
    out.ends.push_back(
        {job->id, {JobInput::Kind::kFailed, absl::StrCat(reason, ": rank ", *gone, " is gone")}});
  }
  for (const HeldRank& h : held) {
    if (!held_here.contains({h.job_id, h.attempt, h.rank})) continue;
    RankReport report{h.job_id, h.attempt, h.rank, RankReport::Kind::kStarted, 0, 0, "", 0, 0, {}};
    out.replay.push_back(report);
    if (h.exited) {
      report.kind = RankReport::Kind::kExited;
      report.exit_code = h.exit_code;
      out.replay.push_back(std::move(report));
    }
  }
  return out;
}

SilentWorkers SweepSilentWorkers(const std::map<std::string, Worker>& workers,
                                 const std::set<std::string>& alive, int64_t now_ms,
                                 int64_t timeout_ms) {
  SilentWorkers out;
  for (const auto& [id, w] : workers) {
    if (w.state != WorkerState::kReady || alive.contains(id)) continue;
    (now_ms - w.last_heartbeat_ms < timeout_ms ? out.beats : out.lost).push_back(id);
  }
  return out;
}

}  // namespace ringmaster::scheduler
