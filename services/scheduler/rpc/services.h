// Thin gRPC adapters of the scheduler: protobuf in, core structs to Scheduler, protobuf out.
// Status is converted to grpc::Status once, here.
#ifndef RINGMASTER_SERVICES_SCHEDULER_RPC_SERVICES_H_
#define RINGMASTER_SERVICES_SCHEDULER_RPC_SERVICES_H_

#include <atomic>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "ringmaster/v1/job.grpc.pb.h"
#include "ringmaster/v1/worker.grpc.pb.h"
#include "scheduler/rpc/authenticator.h"
#include "scheduler/rpc/log_relay.h"
#include "scheduler/scheduler.h"

namespace ringmaster::scheduler {

// Every RPC first authenticates the caller's bearer token and checks its right (core/authz.h);
// jobs of other teams are NOT_FOUND and absent from lists, and command env values are shown
// only to the job's own team (others, admins, see the names with values redacted). Rank logs
// are relayed by `logs` (null: ReadJobLogs is UNIMPLEMENTED).
// SubmitJob is on gRPC's callback API: no thread waits for a submit's commit; the submit writer
// answers it (Scheduler::SubmitAsync). With a thread blocked per submit, thread switches were
// about a third of the scheduler's CPU in a burst of submits (docs/scheduler.md, Speed).
// WatchJob and CancelJob are too: a watch holds no thread while it waits for events (JobWatch
// in services.cc), a cancel none while its write is stored; what they read from Postgres is
// read on a few threads of the service's own.
class JobServiceImpl final
    : public v1::JobService::WithCallbackMethod_SubmitJob<
          v1::JobService::WithCallbackMethod_WatchJob<
              v1::JobService::WithCallbackMethod_CancelJob<v1::JobService::Service>>> {
 public:
  JobServiceImpl(Scheduler* scheduler, Authenticator* auth, LogRelay* logs = nullptr);
  ~JobServiceImpl() override;
  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx,
                                      const v1::SubmitJobRequest* req,
                                      v1::SubmitJobResponse* resp) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* ctx,
                                                   const v1::WatchJobRequest* req) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const v1::CancelJobRequest* req,
                                      v1::CancelJobResponse* resp) override;
  grpc::Status ReadJobLogs(grpc::ServerContext* ctx, const v1::ReadJobLogsRequest* req,
                           grpc::ServerWriter<v1::LogChunk>* writer) override;

 private:
  // The job if `who` may see it; NOT_FOUND, the same as for a job that does not exist, if not.
  absl::StatusOr<Job> VisibleJob(const Principal& who, const std::string& job_id);
  // The rest of SubmitJob once its caller is known; answers through `reactor`.
  void StartSubmit(grpc::CallbackServerContext* ctx, const v1::SubmitJobRequest* req,
                   v1::SubmitJobResponse* resp, grpc::ServerUnaryReactor* reactor,
                   absl::StatusOr<Principal> who);
  Scheduler* scheduler_;
  Authenticator* auth_;
  LogRelay* logs_;
  // Watches started and not yet destroyed: past the scheduler's max_watchers a new one is
  // turned away before anything of it is read.
  std::atomic<int> watches_{0};
  // Cancels on their way; past the scheduler's max_cancels a new one is turned away at once.
  std::atomic<int> cancels_{0};
  // Threads for what a callback RPC must not wait for on gRPC's threads (Postgres reads of
  // watches and cancels).
  void Post(std::function<void()> task);
  void WorkLoop();
  Mutex work_mu_;
  CondVar work_cv_;
  std::deque<std::function<void()>> work_ ABSL_GUARDED_BY(work_mu_);
  bool stopping_ ABSL_GUARDED_BY(work_mu_) = false;
  std::vector<std::thread> work_threads_;
};

class ClusterServiceImpl final : public v1::ClusterService::Service {
 public:
  ClusterServiceImpl(Scheduler* scheduler, Authenticator* auth)
      : scheduler_(scheduler), auth_(auth) {}
  grpc::Status ListWorkers(grpc::ServerContext* ctx, const v1::ListWorkersRequest* req,
                           v1::ListWorkersResponse* resp) override;
  grpc::Status ClearWorkerHealth(grpc::ServerContext* ctx, const v1::ClearWorkerHealthRequest* req,
                                 v1::ClearWorkerHealthResponse* resp) override;

 private:
  Scheduler* scheduler_;
  Authenticator* auth_;
};

// One Connect stream per worker: a reader thread hands worker messages to the scheduler while
// the handler thread writes the scheduler's queued messages, so the scheduler never blocks on
// a slow worker.
//
// With `verify_identity` (every mode but --insecure), a registration is admitted only when the
// worker id is a subjectAltName DNS name of the caller's client certificate
// (CheckWorkerIdentity); anything else is PERMISSION_DENIED before the scheduler sees it.
class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  WorkerServiceImpl(Scheduler* scheduler, bool verify_identity)
      : scheduler_(scheduler), verify_identity_(verify_identity) {}
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>* Connect(
      grpc::CallbackServerContext* ctx) override;

 private:
  Scheduler* scheduler_;
  bool verify_identity_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_RPC_SERVICES_H_
