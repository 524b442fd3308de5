#include "worker/core/run_as.h"

#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringmaster::worker {
namespace {

// Names as useradd and groupadd accept them (a leading letter or '_', then letters, digits,
// '.', '_', '-', an optional trailing '$'), or a number.
bool IsUserOrGroup(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  if (absl::c_all_of(s, [](char c) { return absl::ascii_isdigit(c); })) return true;
  if (!(absl::ascii_isalpha(s[0]) || s[0] == '_')) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-' ||
                    (c == '$' && i + 1 == s.size());
    if (!ok) return false;
  }
  return true;
}

// Team names as the scheduler makes them ([a-z0-9-]), with some slack for older ones.
bool IsTeam(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  return absl::c_all_of(
      s, [](char c) { return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.'; });
}

}  // namespace

absl::StatusOr<RunAsUser> ParseRunAsUser(const std::string& text, const std::string& flag) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", text, "' has more than one ':'; expected USER or USER:GROUP"));
  }
  RunAsUser user{parts[0], parts.size() == 2 ? parts[1] : ""};
  if (!IsUserOrGroup(user.user)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", user.user,
                     "' is not a user name or uid (a letter or '_', then letters, digits, "
                     "'.', '_', '-'; or a number)"));
  }
  if (parts.size() == 2 && !IsUserOrGroup(user.group)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", user.group, "' in '", text, "' is not a group name or gid"));
  }
  return user;
}

absl::StatusOr<RunAsConfig> ParseRunAs(const std::string& mapping,
                                       const std::string& default_user) {
  RunAsConfig config;
  for (absl::string_view raw : absl::StrSplit(mapping, ',')) {
    const std::string item(absl::StripAsciiWhitespace(raw));
    if (item.empty()) {
      if (absl::StripAsciiWhitespace(mapping).empty()) break;
      return absl::InvalidArgumentError(
          absl::StrCat("--run-as: empty item in '", mapping, "'; expected TEAM=USER[:GROUP],..."));
    }
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--run-as: '", item, "' has no '='; expected TEAM=USER[:GROUP]"));
    }
    const std::string team = item.substr(0, eq);
    if (!IsTeam(team)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--run-as: '", team, "' in '", item,
                       "' is not a team name (1..63 of letters, digits, '-', '_', '.')"));
    }
    absl::StatusOr<RunAsUser> user = ParseRunAsUser(item.substr(eq + 1), "--run-as");
    if (!user.ok()) return user.status();
    if (!config.teams.emplace(team, *user).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--run-as: team '", team, "' is listed twice"));
    }
  }
  const std::string fallback(absl::StripAsciiWhitespace(default_user));
  if (!fallback.empty()) {
    absl::StatusOr<RunAsUser> user = ParseRunAsUser(fallback, "--run-as-default");
    if (!user.ok()) return user.status();
    config.fallback = *user;
  }
  return config;
}

absl::StatusOr<RunAsUser> UserForTeam(const RunAsConfig& config, const std::string& team,
                                      const std::string& worker_id) {
  if (auto it = config.teams.find(team); it != config.teams.end()) return it->second;
  if (config.fallback) return *config.fallback;
  return NoUserForTeam(team, worker_id);
}

absl::Status NoUserForTeam(const std::string& team, const std::string& worker_id) {
  return absl::NotFoundError(absl::StrCat(
      "team '", team.empty() ? "(none)" : team, "' has no Unix user on worker ", worker_id,
      ": map it with --run-as ", team.empty() ? "TEAM" : team, "=USER or set --run-as-default"));
}

}  // namespace ringmaster::worker
