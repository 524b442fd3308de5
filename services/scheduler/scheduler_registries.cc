// Teams' registry credentials (see SetRegistryCredential in scheduler.h): validated, sealed
// with SchedulerOptions::secrets (and, at Start, resealed from previous_secrets), stored under
// registry_writes_ outside mu_, then applied to registry_credentials_, from which each
// assignment takes its job's one (scheduler_commit.cc). Log lines and errors name the team and
// registry, never the user's secret.
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/secret_box.h"
#include "core/authz.h"
#include "core/registry_credentials.h"
#include "scheduler.h"

namespace ringmaster::scheduler {
namespace {

constexpr char kNoKey[] = "this scheduler has no secrets key (--secrets-key-file)";

// What an operator reads about a secret that does not open: the reason, and the two ways out.
std::string UnreadableProblem(const absl::Status& opened) {
  return absl::StrCat("the stored secret cannot be read: ", opened.message(),
                      ". Start the scheduler with the key it was sealed with "
                      "(--secrets-key-file; during a key rotation, the old key as "
                      "--previous-secrets-key-file beside the new one), or set the credential "
                      "again (ringctl registry set)");
}

}  // namespace

absl::StatusOr<Scheduler::OpenedRegistryCredentials> Scheduler::OpenRegistryCredentials(
    std::vector<StoredRegistryCredential> stored) {
  const SecretBox* current = options_.secrets.get();
  const SecretBox* previous = options_.previous_secrets.get();
  OpenedRegistryCredentials out;
  int sealed_now = 0;
  int resealed = 0;
  int left_with_previous = 0;
  for (StoredRegistryCredential& s : stored) {
    RegistryCredential c{.team = s.team,
                         .registry = s.registry,
                         .username = s.username,
                         .secret = {},
                         .updated_at_ms = s.updated_at_ms};
    const std::string context = SealingContext(s.team, s.registry);
    const StoredSecretStep step =
        PlanStoredSecret(s, current ? current->key_id() : "", previous ? previous->key_id() : "");
    absl::StatusOr<std::string> opened = absl::FailedPreconditionError(kNoKey);
    switch (step) {
      case StoredSecretStep::kSeal:
        opened = std::move(s.plaintext_secret);
        break;
      case StoredSecretStep::kReseal:
        opened = previous->Open(s.sealed_secret, context);
        break;
      case StoredSecretStep::kOpen:
        opened = current->Open(s.sealed_secret, context);
        if (const std::string sealed_with = SealedKeyId(s.sealed_secret);
            !opened.ok() && previous && !sealed_with.empty() && sealed_with != current->key_id()) {
          opened = absl::Status(
              opened.status().code(),
              absl::StrCat(opened.status().message(), "; nor is it the previous key (key id ",
                           previous->key_id(), ", --previous-secrets-key-file)"));
        }
        break;
      case StoredSecretStep::kNoKey:
        break;
    }
    if (!opened.ok()) {
      if (step == StoredSecretStep::kReseal) ++left_with_previous;
      RegistryCredentialView view = ViewOf(c);
      view.problem = UnreadableProblem(opened.status());
      RM_LOG(kError) << "registry credentials of team " << s.team << " for " << s.registry << ": "
                     << view.problem;
      out.unreadable.push_back(std::move(view));
      continue;
    }
    if (step == StoredSecretStep::kSeal || step == StoredSecretStep::kReseal) {
      // Plaintext of a scheduler before migration 15, or sealed with the previous key: sealed
      // with the current key and stored in place, keeping updated_at_ms (the credential did not
      // change). Fenced by our epoch: a newer leader's rows are never overwritten.
      auto sealed = current->Seal(*opened, context);
      if (!sealed.ok()) return sealed.status();
      StoredRegistryCredential again = s;
      again.plaintext_secret.clear();
      again.sealed_secret = *std::move(sealed);
      if (auto w = store_->SetRegistryCredential(again, epoch_); !w.ok()) {
        return absl::Status(w.code(), absl::StrCat("sealing the registry credential of team ",
                                                   s.team, " for ", s.registry, ": ", w.message()));
      }
      ++(step == StoredSecretStep::kSeal ? sealed_now : resealed);
    }
    c.secret = *std::move(opened);
    out.readable.push_back(std::move(c));
  }
  if (sealed_now > 0) {
    RM_LOG(kInfo) << "sealed " << sealed_now
                  << " registry secret(s) stored in plaintext by an older scheduler (key id "
                  << current->key_id() << ")";
  }
  if (previous && current) {
    RM_LOG(kInfo) << "resealed " << resealed
                  << " registry secret(s) sealed with the previous secrets key (key id "
                  << previous->key_id() << ") with the current one (key id " << current->key_id()
                  << ")";
    if (left_with_previous == 0) {
      RM_LOG(kInfo) << "no stored registry secret is sealed with the previous secrets key any "
                       "more; --previous-secrets-key-file can be dropped once every replica "
                       "runs with key id "
                    << current->key_id();
    }
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
