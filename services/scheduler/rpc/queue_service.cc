#include "scheduler/rpc/queue_service.h"

#include "common/grpc_status.h"
#include "scheduler/convert/queue_convert.h"

namespace ringmaster::scheduler {
namespace {

void Fill(const QueueView& view, v1::QueueWithStatus* out) {
  *out->mutable_queue() = ToProto(view.queue);
  *out->mutable_status() = ToProto(view.status);
}

absl::StatusOr<Queue> QueueOf(bool has_queue, const v1::Queue& queue) {
  if (!has_queue) return absl::InvalidArgumentError("queue: is required");
  return FromProto(queue);
}

}  // namespace

grpc::Status QueueServiceImpl::CreateQueue(grpc::ServerContext* ctx,
                                           const v1::CreateQueueRequest* req,
                                           v1::QueueWithStatus* resp) {
  auto who = auth_->Check(*ctx, Action::kCreateQueue);
  if (!who.ok()) return ToGrpcStatus(who.status());
  auto queue = QueueOf(req->has_queue(), req->queue());
  if (!queue.ok()) return ToGrpcStatus(queue.status());
  auto view = scheduler_->CreateQueue(*queue);
  if (!view.ok()) return ToGrpcStatus(view.status());
  auth_->Audit(*who, *ctx, Action::kCreateQueue, queue->name);
  Fill(*view, resp);
  return grpc::Status::OK;
}

grpc::Status QueueServiceImpl::UpdateQueue(grpc::ServerContext* ctx,
                                           const v1::UpdateQueueRequest* req,
                                           v1::QueueWithStatus* resp) {
  auto who = auth_->Check(*ctx, Action::kUpdateQueue);
  if (!who.ok()) return ToGrpcStatus(who.status());
  auto queue = QueueOf(req->has_queue(), req->queue());
  if (!queue.ok()) return ToGrpcStatus(queue.status());
  auto view = scheduler_->UpdateQueue(*queue);
  if (!view.ok()) return ToGrpcStatus(view.status());
  auth_->Audit(*who, *ctx, Action::kUpdateQueue, queue->name);
  Fill(*view, resp);
  return grpc::Status::OK;
}

grpc::Status QueueServiceImpl::GetQueue(grpc::ServerContext* ctx, const v1::GetQueueRequest* req,
                                        v1::QueueWithStatus* resp) {
  auto who = auth_->Check(*ctx, Action::kGetQueue);
  if (!who.ok()) return ToGrpcStatus(who.status());
  auto view = scheduler_->GetQueue(req->name());
  if (!view.ok()) return ToGrpcStatus(view.status());
  Fill(*view, resp);
  return grpc::Status::OK;
}

grpc::Status QueueServiceImpl::ListQueues(grpc::ServerContext* ctx, const v1::ListQueuesRequest*,
                                          v1::ListQueuesResponse* resp) {
  auto who = auth_->Check(*ctx, Action::kListQueues);
  if (!who.ok()) return ToGrpcStatus(who.status());
  for (const QueueView& view : scheduler_->ListQueues()) Fill(view, resp->add_queues());
  return grpc::Status::OK;
}

grpc::Status QueueServiceImpl::DeleteQueue(grpc::ServerContext* ctx,
                                           const v1::DeleteQueueRequest* req,
                                           v1::DeleteQueueResponse*) {
  auto who = auth_->Check(*ctx, Action::kDeleteQueue);
  if (!who.ok()) return ToGrpcStatus(who.status());
  absl::Status deleted = scheduler_->DeleteQueue(req->name());
  if (deleted.ok()) auth_->Audit(*who, *ctx, Action::kDeleteQueue, req->name());
  return ToGrpcStatus(deleted);
}

}  // namespace ringmaster::scheduler
