#include "worker/core/progress.h"

namespace ringmaster::worker {

bool ProgressForwarder::ShouldForward(int32_t rank, const RankProgress& progress, int64_t now_ms) {
  auto it = sent_.find(rank);
  if (it != sent_.end()) {
    if (it->second.progress == progress) return false;
    if (now_ms - it->second.at_ms < min_interval_ms_) return false;
  }
  sent_[rank] = {progress, now_ms};
  return true;
}

}  // namespace ringmaster::worker
