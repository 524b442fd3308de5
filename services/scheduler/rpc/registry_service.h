// RegistryService over gRPC: a thin adapter from ringmaster.v1 registry messages to the
// Scheduler's registry-credential calls (which validate every input). Who may call: an admin
// for any team; a token of the team itself for its own (set and delete need role member, list
// any role). The team of a request is its `team`, or the token's when that is empty. Set and
// delete are audited with the team, registry and user name; no answer, audit entry or log line
// carries the secret. Thread-safe as the Scheduler is.
#ifndef RINGMASTER_SERVICES_SCHEDULER_RPC_REGISTRY_SERVICE_H_
#define RINGMASTER_SERVICES_SCHEDULER_RPC_REGISTRY_SERVICE_H_

#include "ringmaster/v1/registry.grpc.pb.h"
#include "scheduler/rpc/authenticator.h"
#include "scheduler/scheduler.h"

namespace ringmaster::scheduler {

class RegistryServiceImpl final : public v1::RegistryService::Service {
 public:
  RegistryServiceImpl(Scheduler* scheduler, Authenticator* auth)
      : scheduler_(scheduler), auth_(auth) {}
  grpc::Status SetRegistryCredential(grpc::ServerContext* ctx,
                                     const v1::SetRegistryCredentialRequest* req,
                                     v1::RegistryCredential* resp) override;
  grpc::Status ListRegistryCredentials(grpc::ServerContext* ctx,
                                       const v1::ListRegistryCredentialsRequest* req,
                                       v1::ListRegistryCredentialsResponse* resp) override;
  grpc::Status DeleteRegistryCredential(grpc::ServerContext* ctx,
                                        const v1::DeleteRegistryCredentialRequest* req,
                                        v1::DeleteRegistryCredentialResponse* resp) override;

 private:
  Scheduler* scheduler_;
  Authenticator* auth_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_RPC_REGISTRY_SERVICE_H_
