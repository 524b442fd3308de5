// Teams' registry credentials (see SetRegistryCredential in scheduler.h): validated, stored
// under registry_writes_ outside mu_, then applied to registry_credentials_, from which each
// assignment takes its job's one (scheduler_commit.cc). Log lines name the team and registry,
// never the user's secret.
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "core/authz.h"
#include "scheduler.h"

namespace ringmaster::scheduler {

absl::StatusOr<RegistryCredentialView> Scheduler::SetRegistryCredential(RegistryCredential in) {
  auto valid = ValidateRegistryCredential(std::move(in));
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  RegistryCredential credential = *std::move(valid);
  credential.updated_at_ms = clock_->NowMs();
  MutexLock writes(&registry_writes_);
  {
    MutexLock lock(&mu_);
    if (!registry_credentials_.contains({credential.team, credential.registry}) &&
        CountForTeam(registry_credentials_, credential.team) >= kMaxRegistryCredentialsPerTeam) {
      return absl::FailedPreconditionError(absl::StrCat(
          "team ", credential.team, " already has credentials for ", kMaxRegistryCredentialsPerTeam,
          " registries, the most a team may have; delete one "
          "first (ringctl registry delete)"));
    }
  }
  if (auto s = store_->SetRegistryCredential(credential, epoch_); !s.ok()) {
    return QueueWriteError(s);
  }
  MutexLock lock(&mu_);
  registry_credentials_[{credential.team, credential.registry}] = credential;
  RM_LOG(kInfo) << "registry credentials of team " << credential.team << " for "
                << credential.registry << " set (user " << credential.username << ")";
  return ViewOf(credential);
}

absl::StatusOr<std::vector<RegistryCredentialView>> Scheduler::ListRegistryCredentials(
    const std::string& team) {
  if (team != "*") {
    if (auto s = ValidateTeamName(team, "team"); !s.ok()) return s;
  }
  MutexLock lock(&mu_);
  std::vector<RegistryCredentialView> out;
  for (const auto& [key, credential] : registry_credentials_) {
    if (team == "*" || key.first == team) out.push_back(ViewOf(credential));
  }
  return out;
}

absl::Status Scheduler::DeleteRegistryCredential(const std::string& team,
                                                 const std::string& registry_in) {
  if (auto s = ValidateTeamName(team, "team"); !s.ok()) return s;
  auto registry = NormalizeRegistry(registry_in, "registry");
  if (!registry.ok()) return registry.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  MutexLock writes(&registry_writes_);
  if (auto s = store_->DeleteRegistryCredential(team, *registry, epoch_); !s.ok()) {
    return QueueWriteError(s);
  }
  MutexLock lock(&mu_);
  registry_credentials_.erase({team, *registry});
  RM_LOG(kInfo) << "registry credentials of team " << team << " for " << *registry << " deleted";
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
