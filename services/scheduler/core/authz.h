// Who may do what: the authorization rule of every scheduler RPC, as one pure function.
//
// A principal is a bearer token's holder: a role within a team. `admin` may do everything,
// whatever its team; `member` reads and writes what belongs to its own team (submit to the
// queues bound to the team, get, list, watch and cancel the team's jobs, read their logs);
// `viewer` only reads its own team's things, and not the ranks' logs (a rank's output is the
// team's program talking, and may print what it was given: credentials, data paths). Things of another team are not refused but invisible: the caller
// gets NOT_FOUND, as for a job that does not exist (the adapters apply that; see
// `SeesTeam`). No I/O; thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_AUTHZ_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_AUTHZ_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ringmaster::scheduler {

enum class Role { kViewer, kMember, kAdmin };
const char* RoleName(Role role);
std::optional<Role> ParseRole(const std::string& name);

struct Principal {
  std::string token_id;  // who, for the audit trail and logs (never the secret)
  std::string team;
  Role role = Role::kViewer;
};

// One per RPC that needs a right (the worker stream is admitted by certificate instead).
enum class Action {
  kSubmitJob,
  kGetJob,
  kListJobs,
  kCancelJob,
  kWatchJob,
  kReadJobLogs,
  kListWorkers,
  kGetQueue,
  kListQueues,
  kCreateQueue,
  kUpdateQueue,
  kDeleteQueue,
  kCreateToken,
  kListTokens,
  kRevokeToken,
  kListAudit,
  kClearWorkerHealth,
  kGetVolume,
  kListVolumes,
  kCreateVolume,
  kUpdateVolume,
  kDeleteVolume,
  kSetRegistryCredential,
  kListRegistryCredentials,
  kDeleteRegistryCredential,
};
const char* ActionName(Action action);

// The right an action needs, as PERMISSION_DENIED names it: "jobs.write", "queues.admin", ...
const char* RequiredRight(Action action);

// OK when `principal` may do `action`; PERMISSION_DENIED naming the missing right, the role and
// the team otherwise. `resource_team` is the team the action acts on (the submitter's team for
// a new job, the job's team, ...) or empty when the action has none.
absl::Status Authorize(const Principal& principal, Action action,
                       const std::string& resource_team = "");

// True when things of `team` are visible to `principal` (admins see every team).
bool SeesTeam(const Principal& principal, const std::string& team);

// True when `principal` may submit to a queue bound to `queue_teams` (empty: every team).
bool MaySubmitToQueue(const Principal& principal, const std::vector<std::string>& queue_teams);

// Team names: 1..63 of [a-z0-9-], starting with a letter or digit. INVALID_ARGUMENT naming
// `field` otherwise.
absl::Status ValidateTeamName(const std::string& team, const std::string& field);

// "30d", "12h", "90m", "3600s" -> milliseconds (1 s .. 3650 d); INVALID_ARGUMENT naming `field`
// and the accepted forms otherwise.
absl::Status ParseTokenLifetime(const std::string& text, const std::string& field, int64_t* out_ms);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_AUTHZ_H_
