#include "scheduler/convert/queue_convert.h"

#include "absl/strings/str_cat.h"
#include "scheduler/core/quota_ledger.h"

namespace ringmaster::scheduler {

absl::StatusOr<Queue> FromProto(const v1::Queue& queue) {
  Queue out;
  out.name = queue.name();
  out.cohort = queue.cohort();
  out.weight = queue.weight();
  out.teams.assign(queue.teams().begin(), queue.teams().end());
  for (const auto& [resource, quota] : queue.resources()) {
    ResourceQuota q;
    q.nominal = quota.nominal();
    if (quota.has_borrowing_limit()) q.borrowing_limit = quota.borrowing_limit();
    if (quota.has_lending_limit()) q.lending_limit = quota.lending_limit();
    out.quotas[resource] = q;
  }
  switch (queue.within_queue()) {
    case v1::PREEMPT_WITHIN_QUEUE_UNSPECIFIED:
    case v1::PREEMPT_WITHIN_QUEUE_NEVER:
      out.within_queue = PreemptWithinQueue::kNever;
      break;
    case v1::PREEMPT_WITHIN_QUEUE_LOWER_PRIORITY:
      out.within_queue = PreemptWithinQueue::kLowerPriority;
      break;
    case v1::PREEMPT_WITHIN_QUEUE_LOWER_OR_NEWER_EQUAL_PRIORITY:
      out.within_queue = PreemptWithinQueue::kLowerOrNewerEqualPriority;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("within_queue: unknown value ", static_cast<int>(queue.within_queue()),
                       "; allowed: NEVER, LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL_PRIORITY"));
  }
  switch (queue.reclaim_within_cohort()) {
    case v1::RECLAIM_WITHIN_COHORT_UNSPECIFIED:
    case v1::RECLAIM_WITHIN_COHORT_NEVER:
      out.reclaim_within_cohort = ReclaimWithinCohort::kNever;
      break;
    case v1::RECLAIM_WITHIN_COHORT_LOWER_PRIORITY:
      out.reclaim_within_cohort = ReclaimWithinCohort::kLowerPriority;
      break;
    case v1::RECLAIM_WITHIN_COHORT_ANY:
      out.reclaim_within_cohort = ReclaimWithinCohort::kAny;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "reclaim_within_cohort: unknown value ", static_cast<int>(queue.reclaim_within_cohort()),
          "; allowed: NEVER, LOWER_PRIORITY, ANY"));
  }
  out.min_runtime_seconds = queue.min_runtime_seconds();
  if (queue.has_progress_timeout_seconds()) {
    out.progress_timeout_seconds = queue.progress_timeout_seconds();
  }
  out.idle_timeout_seconds = queue.idle_timeout_seconds();
  if (queue.has_elastic_idle_delay_seconds()) {
    out.elastic_idle_delay_seconds = queue.elastic_idle_delay_seconds();
  }
  out.created_at_ms = queue.created_at_ms();
  out.updated_at_ms = queue.updated_at_ms();
  return out;
}

v1::Queue ToProto(const Queue& queue) {
  v1::Queue out;
  out.set_name(queue.name);
  out.set_cohort(queue.cohort);
  for (const std::string& team : queue.teams) out.add_teams(team);
  out.set_weight(queue.weight);
  for (const auto& [resource, quota] : queue.quotas) {
    v1::ResourceQuota& q = (*out.mutable_resources())[resource];
    q.set_nominal(quota.nominal);
    if (quota.borrowing_limit) q.set_borrowing_limit(*quota.borrowing_limit);
    if (quota.lending_limit) q.set_lending_limit(*quota.lending_limit);
  }
  switch (queue.within_queue) {
    case PreemptWithinQueue::kNever:
      out.set_within_queue(v1::PREEMPT_WITHIN_QUEUE_NEVER);
      break;
    case PreemptWithinQueue::kLowerPriority:
      out.set_within_queue(v1::PREEMPT_WITHIN_QUEUE_LOWER_PRIORITY);
      break;
    case PreemptWithinQueue::kLowerOrNewerEqualPriority:
      out.set_within_queue(v1::PREEMPT_WITHIN_QUEUE_LOWER_OR_NEWER_EQUAL_PRIORITY);
      break;
  }
  switch (queue.reclaim_within_cohort) {
    case ReclaimWithinCohort::kNever:
      out.set_reclaim_within_cohort(v1::RECLAIM_WITHIN_COHORT_NEVER);
      break;
    case ReclaimWithinCohort::kLowerPriority:
      out.set_reclaim_within_cohort(v1::RECLAIM_WITHIN_COHORT_LOWER_PRIORITY);
      break;
    case ReclaimWithinCohort::kAny:
      out.set_reclaim_within_cohort(v1::RECLAIM_WITHIN_COHORT_ANY);
      break;
  }
  out.set_min_runtime_seconds(queue.min_runtime_seconds);
  if (queue.progress_timeout_seconds) {
    out.set_progress_timeout_seconds(*queue.progress_timeout_seconds);
  }
  out.set_idle_timeout_seconds(queue.idle_timeout_seconds);
  if (queue.elastic_idle_delay_seconds) {
    out.set_elastic_idle_delay_seconds(*queue.elastic_idle_delay_seconds);
  }
  out.set_created_at_ms(queue.created_at_ms);
  out.set_updated_at_ms(queue.updated_at_ms);
  return out;
}

v1::QueueStatus ToProto(const QueueStatus& status) {
  v1::QueueStatus out;
  for (const auto& [resource, usage] : status.resources) {
    v1::ResourceStatus& r = (*out.mutable_resources())[resource];
    // The ledger counts GPUs in thousandths (shares), CPU slots whole.
    const int64_t scale = QuotaScale(resource);
    auto whole = [&](int64_t units) { return (units + scale - 1) / scale; };
    r.set_in_use(whole(usage.in_use));
    r.set_borrowed(whole(usage.borrowed));
    r.set_lent(whole(usage.lent));
    r.set_in_use_thousandths(usage.in_use * 1000 / scale);
    r.set_borrowed_thousandths(usage.borrowed * 1000 / scale);
    r.set_lent_thousandths(usage.lent * 1000 / scale);
    r.set_used_seconds(usage.used_seconds);
  }
  out.set_pending_jobs(status.pending_jobs);
  out.set_weighted_share(status.weighted_share);
  return out;
}

}  // namespace ringmaster::scheduler
