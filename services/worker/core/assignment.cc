#include "worker/core/assignment.h"

namespace ringmaster::worker {

AssignmentPlan PlanAssignment(const Assignment& assignment, const std::string& worker_id,
                              const std::vector<HeldAttempt>& held) {
  AssignmentPlan plan;
  for (const HeldAttempt& h : held) {
    if (h.job_id == assignment.job_id && h.attempt == assignment.attempt) {
      plan.repeat = true;
      return plan;
    }
  }
  for (const HeldAttempt& h : held) {
    if (h.job_id == assignment.job_id && !h.stopping) plan.superseded.push_back(h.attempt);
  }
  for (const RankPlacement& r : assignment.placement) {
    if (r.worker_id != worker_id) continue;
    plan.local_ranks.push_back(r.rank);
    plan.launcher = plan.launcher || r.rank == 0;
  }
  return plan;
}

}  // namespace ringmaster::worker
