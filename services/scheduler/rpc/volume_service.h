// VolumeService over gRPC: a thin adapter from ringmaster.v1 volume messages to the Scheduler's
// volume calls (which validate every input). Status is converted to grpc::Status once, here.
// Reads need any valid token and show an admin every volume, anyone else those granted to the
// token's team (others are NOT_FOUND, as if they did not exist); create, update and delete need
// an admin's (and are audited). Thread-safe as the Scheduler is.
#ifndef RINGMASTER_SERVICES_SCHEDULER_RPC_VOLUME_SERVICE_H_
#define RINGMASTER_SERVICES_SCHEDULER_RPC_VOLUME_SERVICE_H_

#include "ringmaster/v1/volume.grpc.pb.h"
#include "scheduler/rpc/authenticator.h"
#include "scheduler/scheduler.h"

namespace ringmaster::scheduler {

class VolumeServiceImpl final : public v1::VolumeService::Service {
 public:
  VolumeServiceImpl(Scheduler* scheduler, Authenticator* auth)
      : scheduler_(scheduler), auth_(auth) {}
  grpc::Status CreateVolume(grpc::ServerContext* ctx, const v1::CreateVolumeRequest* req,
                            v1::Volume* resp) override;
  grpc::Status UpdateVolume(grpc::ServerContext* ctx, const v1::UpdateVolumeRequest* req,
                            v1::Volume* resp) override;
  grpc::Status GetVolume(grpc::ServerContext* ctx, const v1::GetVolumeRequest* req,
                         v1::Volume* resp) override;
  grpc::Status ListVolumes(grpc::ServerContext* ctx, const v1::ListVolumesRequest* req,
                           v1::ListVolumesResponse* resp) override;
  grpc::Status DeleteVolume(grpc::ServerContext* ctx, const v1::DeleteVolumeRequest* req,
                            v1::DeleteVolumeResponse* resp) override;

 private:
  Scheduler* scheduler_;
  Authenticator* auth_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_RPC_VOLUME_SERVICE_H_
