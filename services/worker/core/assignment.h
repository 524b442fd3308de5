// What a worker does with an Assignment from the scheduler (the Launch protocol in agent.h,
// steps 1 and 2): which ranks are its own, whether it is the launcher, which attempts it holds
// the new one supersedes, and which Unix user runs the attempt's processes. Plain values in,
// plain values out; no I/O. Thread-compatible.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_ASSIGNMENT_H_
#define RINGMASTER_SERVICES_WORKER_CORE_ASSIGNMENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/core/run_as.h"
#include "worker/core/types.h"

namespace ringmaster::worker {

// An attempt the worker holds, as far as a new assignment cares.
struct HeldAttempt {
  std::string job_id;
  int32_t attempt = 0;
  bool stopping = false;  // told to stop (StopJob, superseded, shutdown)
};

struct AssignmentPlan {
  // The worker holds this attempt already: the assignment is a repeat, nothing to do.
  bool repeat = false;
  // Attempts of the same job the worker holds and must stop: an older attempt cannot be live
  // any more (its StopJob was lost). Decided even when nothing is placed here.
  std::vector<int32_t> superseded;
  // The placed ranks on this worker, in placement order; empty: the assignment is ignored.
  std::vector<int32_t> local_ranks;
  // Rank 0 is here: this worker runs mpirun.
  bool launcher = false;
};

AssignmentPlan PlanAssignment(const Assignment& assignment, const std::string& worker_id,
                              const std::vector<HeldAttempt>& held);

// Whom the processes of an attempt of `team` run as (--run-as, --run-as-default): nullopt for
// the worker's own user when no team has a user here; the team's entry, else the default; and
// with neither, NoUserForTeam's NOT_FOUND (the attempt fails its launch). `User` is whatever
// the caller resolved the names to (host/users.h's UnixUser).
template <typename User>
absl::StatusOr<std::optional<User>> UserOfAttempt(const std::map<std::string, User>& team_users,
                                                  const std::optional<User>& default_user,
                                                  const std::string& team,
                                                  const std::string& worker_id) {
  if (team_users.empty() && !default_user) return std::optional<User>();
  if (auto it = team_users.find(team); it != team_users.end()) {
    return std::optional<User>(it->second);
  }
  if (default_user) return default_user;
  return NoUserForTeam(team, worker_id);
}

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_ASSIGNMENT_H_
