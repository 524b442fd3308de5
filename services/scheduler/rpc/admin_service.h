// AdminService over gRPC: bearer tokens and the audit trail (proto/ringmaster/v1/admin.proto).
// Every RPC needs an admin token; token creation and revocation are audited. Thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_RPC_ADMIN_SERVICE_H_
#define RINGMASTER_SERVICES_SCHEDULER_RPC_ADMIN_SERVICE_H_

#include "ringmaster/v1/admin.grpc.pb.h"
#include "scheduler/rpc/authenticator.h"

namespace ringmaster::scheduler {

class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  explicit AdminServiceImpl(Authenticator* auth) : auth_(auth) {}
  grpc::Status CreateToken(grpc::ServerContext* ctx, const v1::CreateTokenRequest* req,
                           v1::CreateTokenResponse* resp) override;
  grpc::Status ListTokens(grpc::ServerContext* ctx, const v1::ListTokensRequest* req,
                          v1::ListTokensResponse* resp) override;
  grpc::Status RevokeToken(grpc::ServerContext* ctx, const v1::RevokeTokenRequest* req,
                           v1::RevokeTokenResponse* resp) override;
  grpc::Status ListAudit(grpc::ServerContext* ctx, const v1::ListAuditRequest* req,
                         v1::ListAuditResponse* resp) override;

 private:
  Authenticator* auth_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_RPC_ADMIN_SERVICE_H_
