// The scheduler's client API as ringctl uses it. SchedulerClient is the seam: the gRPC
// implementation below for the binary, fakes in tests. Each call returns the gRPC status as
// an absl::Status with the same code and message.
#ifndef RINGMASTER_CLI_CLIENT_H_
#define RINGMASTER_CLI_CLIENT_H_

#include <grpcpp/security/credentials.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringmaster/v1/job.grpc.pb.h"
#include "ringmaster/v1/queue.grpc.pb.h"
#include "ringmaster/v1/volume.grpc.pb.h"
#include "ringmaster/v1/worker.grpc.pb.h"

namespace ringmaster::cli {

class SchedulerClient {
 public:
  virtual ~SchedulerClient() = default;

  virtual absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& request) = 0;
  virtual absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& request) = 0;
  virtual absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request) = 0;
  virtual absl::StatusOr<v1::CancelJobResponse> CancelJob(const v1::CancelJobRequest& request) = 0;
  // Calls `on_event` for every event in order until the stream ends; returns how it ended.
  virtual absl::Status WatchJob(const v1::WatchJobRequest& request,
                                const std::function<void(const v1::JobEvent&)>& on_event) = 0;
  virtual absl::StatusOr<v1::ListWorkersResponse> ListWorkers(
      const v1::ListWorkersRequest& request) = 0;
  // A rank's log, relayed by the scheduler: `on_chunk` for every piece in order until the
  // stream ends; returns how it ended. By default UNIMPLEMENTED, like the calls below.
  virtual absl::Status ReadJobLogs(const v1::ReadJobLogsRequest& request,
                                   const std::function<void(const v1::LogChunk&)>& on_chunk);
  // By default UNIMPLEMENTED, like the queue calls below.
  virtual absl::StatusOr<v1::ClearWorkerHealthResponse> ClearWorkerHealth(
      const v1::ClearWorkerHealthRequest& request);

  // Waits before a retry: `wait`, or less once the scheduler can be reached again. By default
  // it calls `sleep(wait)`.
  virtual void AwaitRetry(std::chrono::milliseconds wait,
                          const std::function<void(std::chrono::milliseconds)>& sleep) {
    sleep(wait);
  }

  // QueueService. By default UNIMPLEMENTED, so a fake that serves only jobs need not say so.
  virtual absl::StatusOr<v1::QueueWithStatus> CreateQueue(const v1::CreateQueueRequest& request);
  virtual absl::StatusOr<v1::QueueWithStatus> UpdateQueue(const v1::UpdateQueueRequest& request);
  virtual absl::StatusOr<v1::QueueWithStatus> GetQueue(const v1::GetQueueRequest& request);
  virtual absl::StatusOr<v1::ListQueuesResponse> ListQueues(const v1::ListQueuesRequest& request);
  virtual absl::StatusOr<v1::DeleteQueueResponse> DeleteQueue(
      const v1::DeleteQueueRequest& request);
  // VolumeService; UNIMPLEMENTED by default too.
  virtual absl::StatusOr<v1::Volume> CreateVolume(const v1::CreateVolumeRequest& request);
  virtual absl::StatusOr<v1::Volume> UpdateVolume(const v1::UpdateVolumeRequest& request);
  virtual absl::StatusOr<v1::Volume> GetVolume(const v1::GetVolumeRequest& request);
  virtual absl::StatusOr<v1::ListVolumesResponse> ListVolumes(
      const v1::ListVolumesRequest& request);
  virtual absl::StatusOr<v1::DeleteVolumeResponse> DeleteVolume(
      const v1::DeleteVolumeRequest& request);
};

// Talks gRPC to one scheduler address with the given credentials (common/tls.h). Unary calls carry
// `unary_deadline` and do not wait for the channel to become ready, so an unreachable
// scheduler fails at once with UNAVAILABLE instead of hanging; WatchJob and ReadJobLogs have no
// deadline (they last as long as the job, or the followed rank). Thread-compatible, as the generated stubs are.
class GrpcSchedulerClient : public SchedulerClient {
 public:
  // `token`: sent as `authorization: Bearer` on every call (none when empty).
  GrpcSchedulerClient(const std::string& address,
                      std::shared_ptr<grpc::ChannelCredentials> credentials,
                      std::chrono::milliseconds unary_deadline = std::chrono::seconds(5),
                      const std::string& token = "");

  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& request) override;
  absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& request) override;
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request) override;
  absl::StatusOr<v1::CancelJobResponse> CancelJob(const v1::CancelJobRequest& request) override;
  absl::Status WatchJob(const v1::WatchJobRequest& request,
                        const std::function<void(const v1::JobEvent&)>& on_event) override;
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(
      const v1::ListWorkersRequest& request) override;
  absl::Status ReadJobLogs(const v1::ReadJobLogsRequest& request,
                           const std::function<void(const v1::LogChunk&)>& on_chunk) override;
  absl::StatusOr<v1::ClearWorkerHealthResponse> ClearWorkerHealth(
      const v1::ClearWorkerHealthRequest& request) override;
  absl::StatusOr<v1::QueueWithStatus> CreateQueue(const v1::CreateQueueRequest& request) override;
  absl::StatusOr<v1::QueueWithStatus> UpdateQueue(const v1::UpdateQueueRequest& request) override;
  absl::StatusOr<v1::QueueWithStatus> GetQueue(const v1::GetQueueRequest& request) override;
  absl::StatusOr<v1::ListQueuesResponse> ListQueues(const v1::ListQueuesRequest& request) override;
  absl::StatusOr<v1::DeleteQueueResponse> DeleteQueue(
      const v1::DeleteQueueRequest& request) override;
  absl::StatusOr<v1::Volume> CreateVolume(const v1::CreateVolumeRequest& request) override;
  absl::StatusOr<v1::Volume> UpdateVolume(const v1::UpdateVolumeRequest& request) override;
  absl::StatusOr<v1::Volume> GetVolume(const v1::GetVolumeRequest& request) override;
  absl::StatusOr<v1::ListVolumesResponse> ListVolumes(
      const v1::ListVolumesRequest& request) override;
  absl::StatusOr<v1::DeleteVolumeResponse> DeleteVolume(
      const v1::DeleteVolumeRequest& request) override;
  // Not connected: watches the channel while it waits and returns once it connects, since a
  // channel with no call in flight is polled only every 5 s (gRPC's backup poller), and a plain
  // sleep left a retried submit waiting about 15 s past a failover. Connected (the scheduler
  // answered UNAVAILABLE itself): `sleep(wait)`.
  void AwaitRetry(std::chrono::milliseconds wait,
                  const std::function<void(std::chrono::milliseconds)>& sleep) override;

 private:
  void PrepareUnary(grpc::ClientContext* context) const;

  std::shared_ptr<grpc::Channel> channel_;

  std::chrono::milliseconds unary_deadline_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::ClusterService::Stub> cluster_;
  std::unique_ptr<v1::QueueService::Stub> queues_;
  std::unique_ptr<v1::VolumeService::Stub> volumes_;
};

// How submits are retried: waiting `initial_backoff` after the first failure and twice as long
// after each further one, at most `max_backoff`; at most `max_attempts` calls in all, and no
// wait that would take the waits past `max_wait`. The default rides out a scheduler failover:
// a crashed leader's lease passes on after 10 s (--lease-ttl-ms), and the standby then starts.
struct RetryPolicy {
  int max_attempts = 30;
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{2000};
  std::chrono::milliseconds max_wait{30000};
};

// Told of each failure that is about to be retried: its status and which attempt it was.
using OnRetry = std::function<void(const absl::Status&, int attempt)>;

// UNAVAILABLE (nobody answered) and DEADLINE_EXCEEDED (the answer may have been lost).
bool IsRetryable(const absl::Status& status);

// Submits, retrying retryable failures with the SAME request (and so the same request id):
// the scheduler returns the job of an earlier attempt that did land instead of creating a
// second one, which is what makes the retry safe. `sleep` waits between attempts.
// `attempts`, when given, gets the number of calls made.
absl::StatusOr<v1::SubmitJobResponse> SubmitWithRetry(
    SchedulerClient& client, const v1::SubmitJobRequest& request, const RetryPolicy& policy,
    const std::function<void(std::chrono::milliseconds)>& sleep, int* attempts = nullptr,
    const OnRetry& on_retry = nullptr);

// A fresh request id: 128 random bits as 32 lower-case hex digits.
std::string NewRequestId();

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_CLIENT_H_
