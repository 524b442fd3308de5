// Thin gRPC adapters of the scheduler: protobuf in, core structs to Scheduler, protobuf out.
// Status is converted to grpc::Status once, here.
#ifndef RINGMASTER_SERVICES_SCHEDULER_RPC_SERVICES_H_
#define RINGMASTER_SERVICES_SCHEDULER_RPC_SERVICES_H_

#include "ringmaster/v1/job.grpc.pb.h"
#include "ringmaster/v1/worker.grpc.pb.h"
#include "scheduler.h"

namespace ringmaster::scheduler {

class JobServiceImpl final : public v1::JobService::Service {
 public:
  explicit JobServiceImpl(Scheduler* scheduler) : scheduler_(scheduler) {}
  grpc::Status SubmitJob(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req,
                         v1::SubmitJobResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                         v1::CancelJobResponse* resp) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;

 private:
  Scheduler* scheduler_;
};

class ClusterServiceImpl final : public v1::ClusterService::Service {
 public:
  explicit ClusterServiceImpl(Scheduler* scheduler) : scheduler_(scheduler) {}
  grpc::Status ListWorkers(grpc::ServerContext* ctx, const v1::ListWorkersRequest* req,
                           v1::ListWorkersResponse* resp) override;
  grpc::Status ClearWorkerHealth(grpc::ServerContext* ctx, const v1::ClearWorkerHealthRequest* req,
                                 v1::ClearWorkerHealthResponse* resp) override;

 private:
  Scheduler* scheduler_;
};

// One Connect stream per worker: a reader thread hands worker messages to the scheduler while
// the handler thread writes the scheduler's queued messages, so the scheduler never blocks on
// a slow worker.
//
// With `verify_identity` (every mode but --insecure), a registration is admitted only when the
// worker id is a subjectAltName DNS name of the caller's client certificate
// (CheckWorkerIdentity); anything else is PERMISSION_DENIED before the scheduler sees it.
class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  WorkerServiceImpl(Scheduler* scheduler, bool verify_identity)
      : scheduler_(scheduler), verify_identity_(verify_identity) {}
  grpc::Status Connect(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::SchedulerMessage, v1::WorkerMessage>* stream) override;

 private:
  Scheduler* scheduler_;
  bool verify_identity_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_RPC_SERVICES_H_
