#include "core/run_watch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::scheduler {

RunWatch::RunWatch(int32_t world_size, int64_t since_ms)
    : world_size_(world_size), since_ms_(since_ms), last_busy_ms_(since_ms) {}

void RunWatch::OnReport(int32_t rank, const RankActivity& activity, int64_t now_ms) {
  if (rank < 0 || rank >= world_size_) return;
  Rank& r = ranks_[rank];
  const bool advanced = !r.reported ||
                        activity.collectives_completed > r.activity.collectives_completed ||
                        activity.progress_reports > r.activity.progress_reports;
  const bool alive = activity.collectives_entered > 0 || activity.progress_reports > 0;
  r.activity = activity;
  r.reported = true;
  if (activity.images_per_second.value_or(0) > 0) last_busy_ms_ = std::max(last_busy_ms_, now_ms);
  if (!alive) return;
  if (!life_ms_) life_ms_ = now_ms;
  if (advanced) {
    r.last_advance_ms = now_ms;
    last_advance_ms_ = std::max(last_advance_ms_, now_ms);
  }
}

WatchVerdict RunWatch::Judge(const WatchLimits& limits, int64_t now_ms) const {
  WatchVerdict v;
  if (limits.progress_timeout_ms > 0 && life_ms_ &&
      now_ms - last_advance_ms_ >= limits.progress_timeout_ms) {
    v.kind = WatchVerdict::Kind::kHung;
    // A rank that never reported entered nothing and last advanced never.
    auto entered = [&](int32_t rank) -> uint64_t {
      auto it = ranks_.find(rank);
      return it == ranks_.end() ? 0 : it->second.activity.collectives_entered;
    };
    auto advance = [&](int32_t rank) -> int64_t {
      auto it = ranks_.find(rank);
      return it == ranks_.end() || it->second.activity.collectives_entered +
                                           it->second.activity.progress_reports ==
                                       0
                 ? -1
                 : it->second.last_advance_ms;
    };
    uint64_t min_entered = UINT64_MAX, max_entered = 0;
    int64_t oldest = INT64_MAX, newest = INT64_MIN;
    for (int32_t r = 0; r < world_size_; ++r) {
      min_entered = std::min(min_entered, entered(r));
      max_entered = std::max(max_entered, entered(r));
      oldest = std::min(oldest, advance(r));
      newest = std::max(newest, advance(r));
    }
    std::string why;
    for (const auto& [rank, r] : ranks_) {
      if (r.activity.stopped) v.stalled_ranks.push_back(rank);
    }
    if (!v.stalled_ranks.empty()) {
      why = "its program is stopped: SIGSTOP or a debugger";
    } else if (min_entered != max_entered) {
      for (int32_t r = 0; r < world_size_; ++r) {
        if (entered(r) == min_entered) v.stalled_ranks.push_back(r);
      }
      why = absl::StrCat("entered ", min_entered, " collectives; the others entered up to ",
                         max_entered);
    } else if (oldest != newest) {
      for (int32_t r = 0; r < world_size_; ++r) {
        if (advance(r) == oldest) v.stalled_ranks.push_back(r);
      }
      why = oldest < 0 ? "never reported progress; the others did"
                       : absl::StrCat("stopped reporting progress first, ",
                                      (now_ms - oldest) / 1000, " s ago");
    } else {
      for (int32_t r = 0; r < world_size_; ++r) v.stalled_ranks.push_back(r);
      why = absl::StrCat("all stalled together after ", min_entered, " collectives");
    }
    v.reason = absl::StrCat("hung: no collective completed and no progress reported for ",
                            (now_ms - last_advance_ms_) / 1000, " s (progress_timeout_seconds ",
                            limits.progress_timeout_ms / 1000, "); waiting for rank",
                            v.stalled_ranks.size() == 1 ? " " : "s ",
                            absl::StrJoin(v.stalled_ranks, ","), " (", why, ")");
    return v;
  }
  if (limits.idle_timeout_ms > 0 && now_ms - last_busy_ms_ >= limits.idle_timeout_ms) {
    v.kind = WatchVerdict::Kind::kIdle;
    v.reason = absl::StrCat("idle: no non-zero images/sec for ", (now_ms - last_busy_ms_) / 1000,
                            " s (queue idle_timeout_seconds ", limits.idle_timeout_ms / 1000,
                            "); cancelled and its GPUs released");
  }
  return v;
}

}  // namespace ringmaster::scheduler
