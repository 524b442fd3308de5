#include "scheduler/rpc/admin_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace ringmaster::scheduler {
namespace {

void Fill(const TokenRecord& t, v1::TokenInfo* out) {
  out->set_id(t.id);
  out->set_team(t.team);
  out->set_role(RoleName(t.role));
  out->set_description(t.description);
  out->set_created_by(t.created_by);
  out->set_created_at_ms(t.created_at_ms);
  out->set_expires_at_ms(t.expires_at_ms);
  out->set_revoked(t.revoked);
  out->set_revoked_at_ms(t.revoked_at_ms);
}

}  // namespace

grpc::Status AdminServiceImpl::CreateToken(grpc::ServerContext* ctx,
                                           const v1::CreateTokenRequest* req,
                                           v1::CreateTokenResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kCreateToken);
  if (!who.ok()) return ToGrpcStatus(who.status());
  if (auto s = ValidateTeamName(req->team(), "team"); !s.ok()) return ToGrpcStatus(s);
  std::optional<Role> role = ParseRole(req->role());
  if (!role) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("role: \"", req->role(), "\" is not one of admin, member, viewer")));
  }
  if (req->description().size() > 256) {
    return ToGrpcStatus(absl::InvalidArgumentError("description: at most 256 bytes"));
  }
  const int64_t now = auth_->clock()->NowMs();
  int64_t lifetime_ms = 0;
  if (!req->expires_in().empty()) {
    if (auto s = ParseTokenLifetime(req->expires_in(), "expires_in", &lifetime_ms); !s.ok()) {
      return ToGrpcStatus(s);
    }
  }
  NewToken t = GenerateToken();
  TokenRecord record{t.id,
                     t.secret_sha256,
                     req->team(),
                     *role,
                     req->description(),
                     who->token_id,
                     now,
                     lifetime_ms == 0 ? 0 : now + lifetime_ms};
  if (auto s = auth_->store()->CreateToken(record); !s.ok()) return ToGrpcStatus(s);
  auth_->Audit(*who, *ctx, Action::kCreateToken, t.id,
               absl::StrCat("team=", record.team, " role=", RoleName(record.role)));
  Fill(record, resp->mutable_info());
  resp->set_token(t.token);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListTokens(grpc::ServerContext* ctx,
                                          const v1::ListTokensRequest* req,
                                          v1::ListTokensResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kListTokens);
  if (!who.ok()) return ToGrpcStatus(who.status());
  auto tokens = auth_->store()->ListTokens(req->all(), auth_->clock()->NowMs());
  if (!tokens.ok()) return ToGrpcStatus(tokens.status());
  for (const TokenRecord& t : *tokens) Fill(t, resp->add_tokens());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::RevokeToken(grpc::ServerContext* ctx,
                                           const v1::RevokeTokenRequest* req,
                                           v1::RevokeTokenResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kRevokeToken);
  if (!who.ok()) return ToGrpcStatus(who.status());
  if (req->id().empty() || req->id().size() > 64) {
    return ToGrpcStatus(absl::InvalidArgumentError("id: a token id (16 hex digits) is required"));
  }
  auto revoked = auth_->store()->RevokeToken(req->id(), auth_->clock()->NowMs());
  if (!revoked.ok()) return ToGrpcStatus(revoked.status());
  auth_->Forget(req->id());
  auth_->Audit(*who, *ctx, Action::kRevokeToken, req->id());
  Fill(*revoked, resp->mutable_info());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListAudit(grpc::ServerContext* ctx, const v1::ListAuditRequest* req,
                                         v1::ListAuditResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kListAudit);
  if (!who.ok()) return ToGrpcStatus(who.status());
  if (req->limit() < 0 || req->limit() > 1000) {
    return ToGrpcStatus(absl::InvalidArgumentError("limit: must be 0..1000 (0 means 100)"));
  }
  auto entries =
      auth_->store()->ListAudit(req->limit() == 0 ? 100 : req->limit(), req->before_seq());
  if (!entries.ok()) return ToGrpcStatus(entries.status());
  for (const AuditRecord& a : *entries) {
    v1::AuditEntry* e = resp->add_entries();
    e->set_seq(a.seq);
    e->set_at_ms(a.at_ms);
    e->set_principal(a.principal);
    e->set_team(a.team);
    e->set_role(a.role);
    e->set_peer(a.peer);
    e->set_action(a.action);
    e->set_resource(a.resource);
    e->set_detail(a.detail);
  }
  return grpc::Status::OK;
}

}  // namespace ringmaster::scheduler
