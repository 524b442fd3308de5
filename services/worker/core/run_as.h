// Which Unix user runs a team's job processes on this worker (--run-as, --run-as-default;
// docs/security.md, "Teams as Unix users"). Parsing and lookup only: resolving the names to
// uids and gids is host/users.h's. Plain values; thread-compatible.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_RUN_AS_H_
#define RINGMASTER_SERVICES_WORKER_CORE_RUN_AS_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster::worker {

// A user as the operator wrote it: a name or a numeric uid, and optionally a group (name or
// numeric gid; empty: the user's primary group).
struct RunAsUser {
  std::string user;
  std::string group;
  bool operator==(const RunAsUser&) const = default;
};

struct RunAsConfig {
  std::map<std::string, RunAsUser> teams;
  // For teams not listed; none: their jobs fail to launch here.
  std::optional<RunAsUser> fallback;
  // No mapping at all: everything runs as the worker's own user, as without the feature.
  bool empty() const { return teams.empty() && !fallback; }
};

// "USER[:GROUP]": INVALID_ARGUMENT naming `flag` for an empty or malformed part.
absl::StatusOr<RunAsUser> ParseRunAsUser(const std::string& text, const std::string& flag);

// `mapping` is "TEAM=USER[:GROUP],..." (spaces around items ignored; empty: none);
// `default_user` is "USER[:GROUP]" or empty. Errors (INVALID_ARGUMENT) name --run-as or
// --run-as-default, the item and what is allowed; a team listed twice is an error.
absl::StatusOr<RunAsConfig> ParseRunAs(const std::string& mapping, const std::string& default_user);

// NOT_FOUND for a team with neither an entry nor a fallback: names the team, the worker and
// the flags to set.
absl::Status NoUserForTeam(const std::string& team, const std::string& worker_id);

// The user for `team`: its own entry, else the fallback. NOT_FOUND, naming the team, the
// worker and the flags to set, when there is neither. Only meaningful when !config.empty().
absl::StatusOr<RunAsUser> UserForTeam(const RunAsConfig& config, const std::string& team,
                                      const std::string& worker_id);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_RUN_AS_H_
