#include "scheduler/core/usage.h"

#include <algorithm>

#include "scheduler/core/fair_share.h"

namespace ringmaster::scheduler {

std::optional<QueueUsage> AttemptUsage(const Job& job, const ClusterState& cluster,
                                       int64_t now_ms) {
  if (job.state != JobState::kRunning || job.started_at_ms <= 0) return std::nullopt;
  Demand held = HeldDemand(job, cluster);
  // A placement whose workers the cluster no longer lists has no known GPU type.
  if (held.resource.empty()) held.resource = "gpu";
  // Resource-ms in whole units: a share of a GPU is charged its fraction.
  return QueueUsage{
      job.spec.queue, held.resource,
      held.amount * std::max<int64_t>(0, now_ms - job.started_at_ms) / QuotaScale(held.resource)};
}

UsageTotals WithRunning(UsageTotals stored, const std::vector<const Job*>& jobs,
                        const ClusterState& cluster, int64_t now_ms) {
  for (const Job* job : jobs) {
    if (auto used = AttemptUsage(*job, cluster, now_ms)) {
      stored[{used->queue, used->resource}] += used->used_ms;
    }
  }
  return stored;
}

}  // namespace ringmaster::scheduler
