#include "scheduler/core/authz.h"

#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kMember:
      return "member";
    case Role::kAdmin:
      return "admin";
  }
  return "viewer";
}

std::optional<Role> ParseRole(const std::string& name) {
  if (name == "viewer") return Role::kViewer;
  if (name == "member") return Role::kMember;
  if (name == "admin") return Role::kAdmin;
  return std::nullopt;
}

const char* ActionName(Action action) {
  switch (action) {
    case Action::kSubmitJob:
      return "SubmitJob";
    case Action::kGetJob:
      return "GetJob";
    case Action::kListJobs:
      return "ListJobs";
    case Action::kCancelJob:
      return "CancelJob";
    case Action::kWatchJob:
      return "WatchJob";
    case Action::kReadJobLogs:
      return "ReadJobLogs";
    case Action::kListWorkers:
      return "ListWorkers";
    case Action::kGetQueue:
      return "GetQueue";
    case Action::kListQueues:
      return "ListQueues";
    case Action::kCreateQueue:
      return "CreateQueue";
    case Action::kUpdateQueue:
      return "UpdateQueue";
    case Action::kDeleteQueue:
      return "DeleteQueue";
    case Action::kCreateToken:
      return "CreateToken";
    case Action::kListTokens:
      return "ListTokens";
    case Action::kRevokeToken:
      return "RevokeToken";
    case Action::kListAudit:
      return "ListAudit";
    case Action::kClearWorkerHealth:
      return "ClearWorkerHealth";
    case Action::kGetVolume:
      return "GetVolume";
    case Action::kListVolumes:
      return "ListVolumes";
    case Action::kCreateVolume:
      return "CreateVolume";
    case Action::kUpdateVolume:
      return "UpdateVolume";
    case Action::kDeleteVolume:
      return "DeleteVolume";
    case Action::kSetRegistryCredential:
      return "SetRegistryCredential";
    case Action::kListRegistryCredentials:
      return "ListRegistryCredentials";
    case Action::kDeleteRegistryCredential:
      return "DeleteRegistryCredential";
  }
  return "unknown";
}

namespace {

enum class Level { kRead, kWrite, kAdmin };

Level LevelOf(Action action) {
  switch (action) {
    case Action::kGetJob:
    case Action::kListJobs:
    case Action::kWatchJob:
    case Action::kListWorkers:
    case Action::kGetQueue:
    case Action::kListQueues:
    case Action::kGetVolume:
    case Action::kListVolumes:
    case Action::kListRegistryCredentials:
      return Level::kRead;
    case Action::kSubmitJob:
    case Action::kSetRegistryCredential:
    case Action::kDeleteRegistryCredential:
    case Action::kCancelJob:
    case Action::kReadJobLogs:
      return Level::kWrite;
    case Action::kCreateQueue:
    case Action::kUpdateQueue:
    case Action::kDeleteQueue:
    case Action::kCreateToken:
    case Action::kListTokens:
    case Action::kRevokeToken:
    case Action::kListAudit:
    case Action::kClearWorkerHealth:
    case Action::kCreateVolume:
    case Action::kUpdateVolume:
    case Action::kDeleteVolume:
      return Level::kAdmin;
  }
  return Level::kAdmin;
}

}  // namespace

const char* RequiredRight(Action action) {
  switch (action) {
    case Action::kGetJob:
    case Action::kListJobs:
    case Action::kWatchJob:
      return "jobs.read";
    case Action::kSubmitJob:
    case Action::kCancelJob:
      return "jobs.write";
    case Action::kReadJobLogs:
      return "jobs.logs";
    case Action::kListWorkers:
      return "workers.read";
    case Action::kGetQueue:
    case Action::kListQueues:
      return "queues.read";
    case Action::kCreateQueue:
    case Action::kUpdateQueue:
    case Action::kDeleteQueue:
      return "queues.admin";
    case Action::kCreateToken:
    case Action::kListTokens:
    case Action::kRevokeToken:
      return "tokens.admin";
    case Action::kListAudit:
      return "audit.read";
    case Action::kClearWorkerHealth:
      return "workers.admin";
    case Action::kGetVolume:
    case Action::kListVolumes:
      return "volumes.read";
    case Action::kCreateVolume:
    case Action::kUpdateVolume:
    case Action::kDeleteVolume:
      return "volumes.admin";
    case Action::kListRegistryCredentials:
      return "registries.read";
    case Action::kSetRegistryCredential:
    case Action::kDeleteRegistryCredential:
      return "registries.write";
  }
  return "admin";
}

absl::Status Authorize(const Principal& principal, Action action,
                       const std::string& resource_team) {
  if (principal.role == Role::kAdmin) return absl::OkStatus();
  const Level level = LevelOf(action);
  const bool allowed =
      (level == Level::kRead) || (level == Level::kWrite && principal.role == Role::kMember);
  if (allowed && (resource_team.empty() || resource_team == principal.team)) {
    return absl::OkStatus();
  }
  if (allowed) {
    return absl::PermissionDeniedError(absl::StrCat(
        "missing right ", RequiredRight(action), " on team \"", resource_team, "\" (token of ",
        RoleName(principal.role), " of team \"", principal.team, "\")"));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "missing right ", RequiredRight(action), " for ", ActionName(action), ": the token is a ",
      RoleName(principal.role), " of team \"", principal.team, "\"; ",
      level == Level::kWrite ? "it needs role member or admin" : "it needs role admin"));
}

bool SeesTeam(const Principal& principal, const std::string& team) {
  return principal.role == Role::kAdmin || team == principal.team;
}

bool MaySubmitToQueue(const Principal& principal, const std::vector<std::string>& queue_teams) {
  if (principal.role == Role::kAdmin || queue_teams.empty()) return true;
  for (const std::string& team : queue_teams) {
    if (team == principal.team) return true;
  }
  return false;
}

absl::Status ValidateTeamName(const std::string& team, const std::string& field) {
  bool ok = !team.empty() && team.size() <= 63 && team.front() != '-';
  for (char c : team) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      ok = false;
    }
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": \"", team,
                   "\" is not a team name (1 to 63 of a-z, 0-9 and '-', not starting with '-')"));
}

absl::Status ParseTokenLifetime(const std::string& text, const std::string& field,
                                int64_t* out_ms) {
  constexpr int64_t kMaxMs = int64_t{3650} * 24 * 3600 * 1000;
  int64_t unit_ms = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'd':
        unit_ms = 24 * 3600 * 1000;
        break;
      case 'h':
        unit_ms = 3600 * 1000;
        break;
      case 'm':
        unit_ms = 60 * 1000;
        break;
      case 's':
        unit_ms = 1000;
        break;
      default:
        break;
    }
  }
  int64_t count = 0;
  if (unit_ms == 0 || !absl::SimpleAtoi(text.substr(0, text.size() - 1), &count) || count < 1 ||
      count > kMaxMs / unit_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", text,
        "\" is not a lifetime; use a positive number with d, h, m or s (e.g. 30d, 12h), at most "
        "3650d"));
  }
  *out_ms = count * unit_ms;
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
