#include "scheduler/rpc/volume_service.h"

#include "common/grpc_status.h"
#include "scheduler/convert/volume_convert.h"

namespace ringmaster::scheduler {

grpc::Status VolumeServiceImpl::CreateVolume(grpc::ServerContext* ctx,
                                             const v1::CreateVolumeRequest* req, v1::Volume* resp) {
  auto who = auth_->Check(*ctx, Action::kCreateVolume);
  if (!who.ok()) return ToGrpcStatus(who.status());
  if (!req->has_volume()) return ToGrpcStatus(absl::InvalidArgumentError("volume: is required"));
  auto volume = scheduler_->CreateVolume(FromProto(req->volume()));
  if (!volume.ok()) return ToGrpcStatus(volume.status());
  auth_->Audit(*who, *ctx, Action::kCreateVolume, volume->name, volume->host_path);
  *resp = ToProto(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeServiceImpl::UpdateVolume(grpc::ServerContext* ctx,
                                             const v1::UpdateVolumeRequest* req, v1::Volume* resp) {
  auto who = auth_->Check(*ctx, Action::kUpdateVolume);
  if (!who.ok()) return ToGrpcStatus(who.status());
  if (!req->has_volume()) return ToGrpcStatus(absl::InvalidArgumentError("volume: is required"));
  auto volume = scheduler_->UpdateVolume(FromProto(req->volume()));
  if (!volume.ok()) return ToGrpcStatus(volume.status());
  auth_->Audit(*who, *ctx, Action::kUpdateVolume, volume->name, volume->host_path);
  *resp = ToProto(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeServiceImpl::GetVolume(grpc::ServerContext* ctx, const v1::GetVolumeRequest* req,
                                          v1::Volume* resp) {
  auto who = auth_->Check(*ctx, Action::kGetVolume);
  if (!who.ok()) return ToGrpcStatus(who.status());
  auto volume = scheduler_->GetVolume(req->name(), who->team, who->role == Role::kAdmin);
  if (!volume.ok()) return ToGrpcStatus(volume.status());
  *resp = ToProto(*volume);
  return grpc::Status::OK;
}

grpc::Status VolumeServiceImpl::ListVolumes(grpc::ServerContext* ctx, const v1::ListVolumesRequest*,
                                            v1::ListVolumesResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kListVolumes);
  if (!who.ok()) return ToGrpcStatus(who.status());
  for (const Volume& volume : scheduler_->ListVolumes(who->team, who->role == Role::kAdmin)) {
    *resp->add_volumes() = ToProto(volume);
  }
  return grpc::Status::OK;
}

grpc::Status VolumeServiceImpl::DeleteVolume(grpc::ServerContext* ctx,
                                             const v1::DeleteVolumeRequest* req,
                                             v1::DeleteVolumeResponse*) {
  auto who = auth_->Check(*ctx, Action::kDeleteVolume);
  if (!who.ok()) return ToGrpcStatus(who.status());
  absl::Status deleted = scheduler_->DeleteVolume(req->name());
  if (deleted.ok()) auth_->Audit(*who, *ctx, Action::kDeleteVolume, req->name());
  return ToGrpcStatus(deleted);
}

}  // namespace ringmaster::scheduler
