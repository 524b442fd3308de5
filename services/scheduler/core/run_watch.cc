#include "scheduler/core/run_watch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

WatchLimits WatchLimitsOf(const JobSpec& spec, const Queue* queue) {
  int64_t progress_s = kDefaultProgressTimeoutSeconds;
  if (spec.progress_timeout_seconds) {
    progress_s = *spec.progress_timeout_seconds;
  } else if (queue != nullptr && queue->progress_timeout_seconds) {
    progress_s = *queue->progress_timeout_seconds;
  }
  return {progress_s * 1000, queue == nullptr ? 0 : queue->idle_timeout_seconds * 1000};
}

// "rank 0 in MPI_Recv for 21 s, ranks 2,3 in MPI_Allreduce for 20-21 s" (inside), or for ranks
// out of MPI "left MPI_Allreduce 21 s ago" (one group) / "rank 1 left MPI_Allreduce 21 s ago,
// rank 3 made no blocking MPI call yet": `ranks` grouped by call, in rank order.
std::string RunWatch::DescribeMpi(const std::vector<int32_t>& ranks, int64_t now_ms,
                                  bool inside) const {
  struct Group {
    std::vector<int32_t> ranks;
    int64_t shortest_s = INT64_MAX;
    int64_t longest_s = 0;
  };
  std::vector<std::pair<std::string, Group>> groups;  // by call, in order of first rank
  for (int32_t rank : ranks) {
    const Rank& r = ranks_.at(rank);
    const std::string& call = r.activity.mpi->call;
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == call; });
    if (it == groups.end()) it = groups.insert(groups.end(), {call, Group{}});
    const int64_t seconds = std::max<int64_t>(0, now_ms - r.mpi_since_ms) / 1000;
    it->second.ranks.push_back(rank);
    it->second.shortest_s = std::min(it->second.shortest_s, seconds);
    it->second.longest_s = std::max(it->second.longest_s, seconds);
  }
  std::vector<std::string> parts;
  for (const auto& [call, g] : groups) {
    const std::string span = g.shortest_s == g.longest_s
                                 ? absl::StrCat(g.longest_s, " s")
                                 : absl::StrCat(g.shortest_s, "-", g.longest_s, " s");
    std::string who;
    if (inside || groups.size() > 1) {
      who =
          absl::StrCat(g.ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(g.ranks, ","), " ");
    }
    if (inside) {
      parts.push_back(absl::StrCat(who, "in ", call, " for ", span));
    } else if (call.empty()) {
      parts.push_back(absl::StrCat(who, "no blocking MPI call yet"));
    } else {
      parts.push_back(absl::StrCat(who, "left ", call, " ", span, " ago"));
    }
  }
  return absl::StrJoin(parts, ", ");
}

RunWatch::RunWatch(int32_t world_size, int64_t since_ms)
    : world_size_(world_size), last_busy_ms_(since_ms) {}

void RunWatch::OnReport(int32_t rank, const RankActivity& activity, int64_t now_ms) {
  if (rank < 0 || rank >= world_size_) return;
  Rank& r = ranks_[rank];
  const uint64_t mpi_calls = activity.mpi ? activity.mpi->calls_entered : 0;
  const bool advanced = !r.reported ||
                        activity.collectives_completed > r.activity.collectives_completed ||
                        activity.progress_reports > r.activity.progress_reports ||
                        mpi_calls > (r.activity.mpi ? r.activity.mpi->calls_entered : 0);
  const bool alive =
      activity.collectives_entered > 0 || activity.progress_reports > 0 || mpi_calls > 0;
  r.activity = activity;
  r.reported = true;
  if (activity.mpi) r.mpi_since_ms = now_ms - activity.mpi->for_ms;
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
      if (it == ranks_.end()) return -1;
      const RankActivity& a = it->second.activity;
      const uint64_t mpi_calls = a.mpi ? a.mpi->calls_entered : 0;
      return a.collectives_entered + a.progress_reports + mpi_calls == 0
                 ? -1
                 : it->second.last_advance_ms;
    };
    // Where each rank is with respect to MPI, when every rank's wrapper says.
    std::vector<int32_t> inside, outside;
    bool positions_known = true;
    for (int32_t r = 0; r < world_size_; ++r) {
      auto it = ranks_.find(r);
      if (it == ranks_.end() || !it->second.activity.mpi) {
        positions_known = false;
        continue;
      }
      (it->second.activity.mpi->inside ? inside : outside).push_back(r);
    }
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
    } else if (positions_known && !inside.empty() && !outside.empty()) {
      // The others wait inside MPI (a collective, or a receive from one of these) for ranks
      // that are not in MPI at all: those are stuck in their own code.
      v.stalled_ranks = outside;
      why = absl::StrCat("not in MPI: ", DescribeMpi(outside, now_ms, /*inside=*/false));
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
    v.reason =
        absl::StrCat("hung: no collective or MPI call completed and no progress reported for ",
                     (now_ms - last_advance_ms_) / 1000, " s (progress_timeout_seconds ",
                     limits.progress_timeout_ms / 1000, "); waiting for rank",
                     v.stalled_ranks.size() == 1 ? " " : "s ", absl::StrJoin(v.stalled_ranks, ","),
                     " (", why, ")");
    if (!inside.empty()) {
      absl::StrAppend(&v.reason, "; waiting in MPI: ", DescribeMpi(inside, now_ms, true));
    }
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
