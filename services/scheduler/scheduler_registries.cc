// Teams' registry credentials (see SetRegistryCredential in scheduler.h): validated, sealed
// with SchedulerOptions::secrets, stored under registry_writes_ outside mu_, then applied to
// registry_credentials_, from which each assignment takes its job's one (scheduler_commit.cc).
// Log lines and errors name the team and registry, never the user's secret.
#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "core/authz.h"
#include "scheduler.h"

namespace ringmaster::scheduler {
namespace {

constexpr char kNoKey[] = "this scheduler has no secrets key (--secrets-key-file)";

// What an operator reads about a secret that does not open: the reason, and the two ways out.
std::string UnreadableProblem(const absl::Status& opened) {
  return absl::StrCat("the stored secret cannot be read: ", opened.message(),
                      ". Start the scheduler with the key it was sealed with "
                      "(--secrets-key-file), or set the credential again (ringctl registry set)");
}

}  // namespace

absl::StatusOr<Scheduler::OpenedRegistryCredentials> Scheduler::OpenRegistryCredentials(
    std::vector<StoredRegistryCredential> stored) {
  OpenedRegistryCredentials out;
  int sealed_now = 0;
  for (StoredRegistryCredential& s : stored) {
    RegistryCredential c{.team = s.team,
                         .registry = s.registry,
                         .username = s.username,
                         .secret = {},
                         .updated_at_ms = s.updated_at_ms};
    const std::string context = SealingContext(s.team, s.registry);
    if (s.sealed_secret.empty() && options_.secrets) {
      // Stored in plaintext by a scheduler before migration 15: seal it in place, keeping
      // updated_at_ms (the credential did not change).
      auto sealed = options_.secrets->Seal(s.plaintext_secret, context);
      if (!sealed.ok()) return sealed.status();
      StoredRegistryCredential again = s;
      again.plaintext_secret.clear();
      again.sealed_secret = *std::move(sealed);
      if (auto w = store_->SetRegistryCredential(again, epoch_); !w.ok()) {
        return absl::Status(w.code(), absl::StrCat("sealing the registry credential of team ",
                                                   s.team, " for ", s.registry, ": ", w.message()));
      }
      c.secret = std::move(s.plaintext_secret);
      ++sealed_now;
      out.readable.push_back(std::move(c));
      continue;
    }
    absl::StatusOr<std::string> opened = absl::FailedPreconditionError(kNoKey);
    if (options_.secrets) opened = options_.secrets->Open(s.sealed_secret, context);
    if (opened.ok()) {
      c.secret = *std::move(opened);
      out.readable.push_back(std::move(c));
      continue;
    }
    RegistryCredentialView view = ViewOf(c);
    view.problem = UnreadableProblem(opened.status());
    RM_LOG(kError) << "registry credentials of team " << s.team << " for " << s.registry << ": "
                   << view.problem;
    out.unreadable.push_back(std::move(view));
  }
  if (sealed_now > 0) {
    RM_LOG(kInfo) << "sealed " << sealed_now
                  << " registry secret(s) stored in plaintext by an older scheduler (key id "
                  << options_.secrets->key_id() << ")";
  }
  return out;
}

absl::StatusOr<RegistryCredentialView> Scheduler::SetRegistryCredential(RegistryCredential in) {
  auto valid = ValidateRegistryCredential(std::move(in));
  if (!valid.ok()) return valid.status();
  if (writer_.fenced()) {
    return absl::UnavailableError("this scheduler is no longer the leader; retry");
  }
  if (!options_.secrets) return absl::FailedPreconditionError(kNoKey);
  RegistryCredential credential = *std::move(valid);
  credential.updated_at_ms = clock_->NowMs();
  auto sealed = options_.secrets->Seal(credential.secret,
                                       SealingContext(credential.team, credential.registry));
  if (!sealed.ok()) return sealed.status();
  const StoredRegistryCredential stored{.team = credential.team,
                                        .registry = credential.registry,
                                        .username = credential.username,
                                        .sealed_secret = *std::move(sealed),
                                        .updated_at_ms = credential.updated_at_ms};
  MutexLock writes(&registry_writes_);
  {
    MutexLock lock(&mu_);
    const std::pair<std::string, std::string> key{credential.team, credential.registry};
    const size_t unreadable = static_cast<size_t>(std::count_if(
        unreadable_registry_credentials_.begin(), unreadable_registry_credentials_.end(),
        [&](const auto& entry) { return entry.first.first == credential.team; }));
    if (!registry_credentials_.contains(key) && !unreadable_registry_credentials_.contains(key) &&
        CountForTeam(registry_credentials_, credential.team) + unreadable >=
            kMaxRegistryCredentialsPerTeam) {
      return absl::FailedPreconditionError(absl::StrCat(
          "team ", credential.team, " already has credentials for ", kMaxRegistryCredentialsPerTeam,
          " registries, the most a team may have; delete one "
          "first (ringctl registry delete)"));
    }
  }
  if (auto s = store_->SetRegistryCredential(stored, epoch_); !s.ok()) {
    return QueueWriteError(s);
  }
  MutexLock lock(&mu_);
  unreadable_registry_credentials_.erase({credential.team, credential.registry});
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
  for (const auto& [key, view] : unreadable_registry_credentials_) {
    if (team == "*" || key.first == team) out.push_back(view);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.team, a.registry) < std::tie(b.team, b.registry);
  });
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
  unreadable_registry_credentials_.erase({team, *registry});
  RM_LOG(kInfo) << "registry credentials of team " << team << " for " << *registry << " deleted";
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
