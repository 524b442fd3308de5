// QueueService over gRPC: a thin adapter from ringmaster.v1 queue messages to the Scheduler's
// queue calls (which validate every input). Status is converted to grpc::Status once, here.
// Reads need any valid token; create, update and delete need an admin's (and are audited).
// Thread-safe as the Scheduler is.
#ifndef RINGMASTER_SERVICES_SCHEDULER_RPC_QUEUE_SERVICE_H_
#define RINGMASTER_SERVICES_SCHEDULER_RPC_QUEUE_SERVICE_H_

#include "ringmaster/v1/queue.grpc.pb.h"
#include "scheduler/rpc/authenticator.h"
#include "scheduler/scheduler.h"

namespace ringmaster::scheduler {

class QueueServiceImpl final : public v1::QueueService::Service {
 public:
  QueueServiceImpl(Scheduler* scheduler, Authenticator* auth)
      : scheduler_(scheduler), auth_(auth) {}
  grpc::Status CreateQueue(grpc::ServerContext* ctx, const v1::CreateQueueRequest* req,
                           v1::QueueWithStatus* resp) override;
  grpc::Status UpdateQueue(grpc::ServerContext* ctx, const v1::UpdateQueueRequest* req,
                           v1::QueueWithStatus* resp) override;
  grpc::Status GetQueue(grpc::ServerContext* ctx, const v1::GetQueueRequest* req,
                        v1::QueueWithStatus* resp) override;
  grpc::Status ListQueues(grpc::ServerContext* ctx, const v1::ListQueuesRequest* req,
                          v1::ListQueuesResponse* resp) override;
  grpc::Status DeleteQueue(grpc::ServerContext* ctx, const v1::DeleteQueueRequest* req,
                           v1::DeleteQueueResponse* resp) override;

 private:
  Scheduler* scheduler_;
  Authenticator* auth_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_RPC_QUEUE_SERVICE_H_
