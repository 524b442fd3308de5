#include "scheduler/rpc/registry_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace ringmaster::scheduler {
namespace {

void Fill(const RegistryCredentialView& view, v1::RegistryCredential* out) {
  out->set_team(view.team);
  out->set_registry(view.registry);
  out->set_username(view.username);
  out->set_updated_at_ms(view.updated_at_ms);
  out->set_problem(view.problem);
}

// The request's team, or the caller's when it names none.
std::string TeamOf(const std::string& requested, const Principal& who) {
  return requested.empty() ? who.team : requested;
}

}  // namespace

grpc::Status RegistryServiceImpl::SetRegistryCredential(grpc::ServerContext* ctx,
                                                        const v1::SetRegistryCredentialRequest* req,
                                                        v1::RegistryCredential* resp) {
  auto who = auth_->Check(*ctx, Action::kSetRegistryCredential, req->team());
  if (!who.ok()) return ToGrpcStatus(who.status());
  RegistryCredential credential{.team = TeamOf(req->team(), *who),
                                .registry = req->registry(),
                                .username = req->username(),
                                .secret = req->secret()};
  auto view = scheduler_->SetRegistryCredential(std::move(credential));
  if (!view.ok()) return ToGrpcStatus(view.status());
  auth_->Audit(*who, *ctx, Action::kSetRegistryCredential,
               absl::StrCat(view->team, "/", view->registry),
               absl::StrCat("username=", view->username));
  Fill(*view, resp);
  return grpc::Status::OK;
}

grpc::Status RegistryServiceImpl::ListRegistryCredentials(
    grpc::ServerContext* ctx, const v1::ListRegistryCredentialsRequest* req,
    v1::ListRegistryCredentialsResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kListRegistryCredentials, req->team());
  if (!who.ok()) return ToGrpcStatus(who.status());
  auto views = scheduler_->ListRegistryCredentials(TeamOf(req->team(), *who));
  if (!views.ok()) return ToGrpcStatus(views.status());
  for (const RegistryCredentialView& view : *views) Fill(view, resp->add_credentials());
  return grpc::Status::OK;
}

grpc::Status RegistryServiceImpl::DeleteRegistryCredential(
    grpc::ServerContext* ctx, const v1::DeleteRegistryCredentialRequest* req,
    v1::DeleteRegistryCredentialResponse*) {
  auto who = auth_->Check(*ctx, Action::kDeleteRegistryCredential, req->team());
  if (!who.ok()) return ToGrpcStatus(who.status());
  const std::string team = TeamOf(req->team(), *who);
  absl::Status deleted = scheduler_->DeleteRegistryCredential(team, req->registry());
  if (deleted.ok()) {
    auth_->Audit(*who, *ctx, Action::kDeleteRegistryCredential,
                 absl::StrCat(team, "/", req->registry()));
  }
  return ToGrpcStatus(deleted);
}

}  // namespace ringmaster::scheduler
