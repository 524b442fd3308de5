#include "client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/bearer_token.h"
#include "common/grpc_status.h"
#include "errors.h"

namespace ringmaster::cli {

GrpcSchedulerClient::GrpcSchedulerClient(const std::string& address,
                                         std::shared_ptr<grpc::ChannelCredentials> credentials,
                                         std::chrono::milliseconds unary_deadline,
                                         const std::string& token)
    : unary_deadline_(unary_deadline) {
  // gRPC waits longer and longer between reconnects (1 s growing to 2 min): after a failover of
  // 11 s a retried submit found the channel still waiting for about 15 s more. At most 2 s,
  // as the retries themselves wait.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  channel_ = CreateChannelWithToken(address, credentials, token, args);
  jobs_ = v1::JobService::NewStub(channel_);
  cluster_ = v1::ClusterService::NewStub(channel_);
  queues_ = v1::QueueService::NewStub(channel_);
  volumes_ = v1::VolumeService::NewStub(channel_);
}

void GrpcSchedulerClient::AwaitRetry(std::chrono::milliseconds wait,
                                     const std::function<void(std::chrono::milliseconds)>& sleep) {
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  if (state == GRPC_CHANNEL_READY) {
    sleep(wait);  // connected: the scheduler itself said UNAVAILABLE, and gets the whole wait
    return;
  }
  const auto deadline = std::chrono::system_clock::now() + wait;
  while (state != GRPC_CHANNEL_READY && channel_->WaitForStateChange(state, deadline)) {
    state = channel_->GetState(/*try_to_connect=*/true);
  }
}

void GrpcSchedulerClient::PrepareUnary(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() + unary_deadline_);
  context->set_wait_for_ready(false);
}

absl::StatusOr<v1::SubmitJobResponse> GrpcSchedulerClient::SubmitJob(
    const v1::SubmitJobRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::SubmitJobResponse response;
  grpc::Status status = jobs_->SubmitJob(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::Job> GrpcSchedulerClient::GetJob(const v1::GetJobRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::Job response;
  grpc::Status status = jobs_->GetJob(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ListJobsResponse> GrpcSchedulerClient::ListJobs(
    const v1::ListJobsRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::ListJobsResponse response;
  grpc::Status status = jobs_->ListJobs(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::CancelJobResponse> GrpcSchedulerClient::CancelJob(
    const v1::CancelJobRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::CancelJobResponse response;
  grpc::Status status = jobs_->CancelJob(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

namespace {

absl::Status NoQueueService() {
  return absl::UnimplementedError("this client does not serve queues");
}

}  // namespace

absl::Status SchedulerClient::ReadJobLogs(const v1::ReadJobLogsRequest&,
                                          const std::function<void(const v1::LogChunk&)>&) {
  return absl::UnimplementedError("this client cannot read logs");
}
absl::StatusOr<v1::ClearWorkerHealthResponse> SchedulerClient::ClearWorkerHealth(
    const v1::ClearWorkerHealthRequest&) {
  return absl::UnimplementedError("this client cannot clear a worker's health");
}
absl::StatusOr<v1::QueueWithStatus> SchedulerClient::CreateQueue(const v1::CreateQueueRequest&) {
  return NoQueueService();
}
absl::StatusOr<v1::QueueWithStatus> SchedulerClient::UpdateQueue(const v1::UpdateQueueRequest&) {
  return NoQueueService();
}
absl::StatusOr<v1::QueueWithStatus> SchedulerClient::GetQueue(const v1::GetQueueRequest&) {
  return NoQueueService();
}
absl::StatusOr<v1::ListQueuesResponse> SchedulerClient::ListQueues(const v1::ListQueuesRequest&) {
  return NoQueueService();
}
absl::StatusOr<v1::DeleteQueueResponse> SchedulerClient::DeleteQueue(
    const v1::DeleteQueueRequest&) {
  return NoQueueService();
}

absl::StatusOr<v1::QueueWithStatus> GrpcSchedulerClient::CreateQueue(
    const v1::CreateQueueRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::QueueWithStatus response;
  grpc::Status status = queues_->CreateQueue(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::QueueWithStatus> GrpcSchedulerClient::UpdateQueue(
    const v1::UpdateQueueRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::QueueWithStatus response;
  grpc::Status status = queues_->UpdateQueue(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::QueueWithStatus> GrpcSchedulerClient::GetQueue(
    const v1::GetQueueRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::QueueWithStatus response;
  grpc::Status status = queues_->GetQueue(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ListQueuesResponse> GrpcSchedulerClient::ListQueues(
    const v1::ListQueuesRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::ListQueuesResponse response;
  grpc::Status status = queues_->ListQueues(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::DeleteQueueResponse> GrpcSchedulerClient::DeleteQueue(
    const v1::DeleteQueueRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::DeleteQueueResponse response;
  grpc::Status status = queues_->DeleteQueue(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status GrpcSchedulerClient::WatchJob(
    const v1::WatchJobRequest& request, const std::function<void(const v1::JobEvent&)>& on_event) {
  grpc::ClientContext context;
  context.set_wait_for_ready(false);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = jobs_->WatchJob(&context, request);
  v1::JobEvent event;
  while (reader->Read(&event)) on_event(event);
  return FromGrpcStatus(reader->Finish());
}

absl::Status GrpcSchedulerClient::ReadJobLogs(
    const v1::ReadJobLogsRequest& request,
    const std::function<void(const v1::LogChunk&)>& on_chunk) {
  grpc::ClientContext context;
  context.set_wait_for_ready(false);
  std::unique_ptr<grpc::ClientReader<v1::LogChunk>> reader =
      jobs_->ReadJobLogs(&context, request);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) on_chunk(chunk);
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<v1::ListWorkersResponse> GrpcSchedulerClient::ListWorkers(
    const v1::ListWorkersRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::ListWorkersResponse response;
  grpc::Status status = cluster_->ListWorkers(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ClearWorkerHealthResponse> GrpcSchedulerClient::ClearWorkerHealth(
    const v1::ClearWorkerHealthRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::ClearWorkerHealthResponse response;
  grpc::Status status = cluster_->ClearWorkerHealth(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

bool IsRetryable(const absl::Status& status) {
  // A certificate that is not trusted stays untrusted: retrying it only delays the message.
  if (absl::IsUnavailable(status) && IsCertificateUntrusted(status.message())) {
    return false;
  }
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

absl::StatusOr<v1::SubmitJobResponse> SubmitWithRetry(
    SchedulerClient& client, const v1::SubmitJobRequest& request, const RetryPolicy& policy,
    const std::function<void(std::chrono::milliseconds)>& sleep, int* attempts,
    const OnRetry& on_retry) {
  std::chrono::milliseconds backoff = policy.initial_backoff;
  std::chrono::milliseconds waited{0};
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<v1::SubmitJobResponse> response = client.SubmitJob(request);
    if (attempts != nullptr) *attempts = attempt;
    if (response.ok() || !IsRetryable(response.status()) || attempt >= policy.max_attempts ||
        waited + backoff > policy.max_wait) {
      return response;
    }
    if (on_retry) on_retry(response.status(), attempt);
    client.AwaitRetry(backoff, sleep);
    waited += backoff;
    backoff = std::min(backoff * 2, policy.max_backoff);
  }
}

std::string NewRequestId() {
  std::random_device device;
  std::uniform_int_distribution<uint64_t> dist;
  return absl::StrCat(absl::Hex(dist(device), absl::kZeroPad16),
                      absl::Hex(dist(device), absl::kZeroPad16));
}

absl::StatusOr<v1::Volume> SchedulerClient::CreateVolume(const v1::CreateVolumeRequest&) {
  return absl::UnimplementedError("this client does not serve volumes");
}

absl::StatusOr<v1::Volume> GrpcSchedulerClient::CreateVolume(const v1::CreateVolumeRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::Volume response;
  grpc::Status status = volumes_->CreateVolume(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::Volume> SchedulerClient::UpdateVolume(const v1::UpdateVolumeRequest&) {
  return absl::UnimplementedError("this client does not serve volumes");
}

absl::StatusOr<v1::Volume> GrpcSchedulerClient::UpdateVolume(const v1::UpdateVolumeRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::Volume response;
  grpc::Status status = volumes_->UpdateVolume(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::Volume> SchedulerClient::GetVolume(const v1::GetVolumeRequest&) {
  return absl::UnimplementedError("this client does not serve volumes");
}

absl::StatusOr<v1::Volume> GrpcSchedulerClient::GetVolume(const v1::GetVolumeRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::Volume response;
  grpc::Status status = volumes_->GetVolume(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ListVolumesResponse> SchedulerClient::ListVolumes(const v1::ListVolumesRequest&) {
  return absl::UnimplementedError("this client does not serve volumes");
}

absl::StatusOr<v1::ListVolumesResponse> GrpcSchedulerClient::ListVolumes(const v1::ListVolumesRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::ListVolumesResponse response;
  grpc::Status status = volumes_->ListVolumes(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::DeleteVolumeResponse> SchedulerClient::DeleteVolume(const v1::DeleteVolumeRequest&) {
  return absl::UnimplementedError("this client does not serve volumes");
}

absl::StatusOr<v1::DeleteVolumeResponse> GrpcSchedulerClient::DeleteVolume(const v1::DeleteVolumeRequest& request) {
  grpc::ClientContext context;
  PrepareUnary(&context);
  v1::DeleteVolumeResponse response;
  grpc::Status status = volumes_->DeleteVolume(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

}  // namespace ringmaster::cli
