#include "worker/rpc/agent_client.h"

#include <optional>
#include <thread>

#include "common/grpc_status.h"

namespace ringmaster::worker {
namespace {

template <typename Call>
absl::Status WithRetry(std::chrono::milliseconds deadline, const Call& call) {
  const auto end = std::chrono::system_clock::now() + deadline;
  auto wait = std::chrono::milliseconds(50);
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(end);
    grpc::Status status = call(&ctx);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        std::chrono::system_clock::now() + wait >= end) {
      return FromGrpcStatus(status);
    }
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace

AgentClient::AgentClient(const std::string& address,
                         std::shared_ptr<grpc::ChannelCredentials> credentials)
    : stub_(v1::WorkerAgent::NewStub(grpc::CreateChannel(address, std::move(credentials)))) {}

absl::StatusOr<v1::ExitStatus> AgentClient::Exec(
    const v1::ExecRequest& request,
    const std::function<void(bool is_stderr, std::string_view data)>& on_output,
    grpc::ClientContext* context) {
  grpc::ClientContext own;
  grpc::ClientContext* ctx = context != nullptr ? context : &own;
  std::unique_ptr<grpc::ClientReader<v1::ExecOutput>> reader = stub_->Exec(ctx, request);
  v1::ExecOutput out;
  std::optional<v1::ExitStatus> exit_status;
  while (reader->Read(&out)) {
    switch (out.output_case()) {
      case v1::ExecOutput::kStdoutChunk:
        on_output(false, out.stdout_chunk());
        break;
      case v1::ExecOutput::kStderrChunk:
        on_output(true, out.stderr_chunk());
        break;
      case v1::ExecOutput::kExit:
        exit_status = out.exit();
        break;
      default:
        break;
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!exit_status) {
    return absl::UnavailableError("the Exec stream ended without an exit status");
  }
  return *exit_status;
}

absl::StatusOr<v1::StartRankResponse> AgentClient::StartRank(const v1::StartRankRequest& request,
                                                             std::chrono::milliseconds deadline) {
  v1::StartRankResponse response;
  absl::Status status = WithRetry(deadline, [&](grpc::ClientContext* ctx) {
    return stub_->StartRank(ctx, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::Status AgentClient::ReportRank(const v1::ReportRankRequest& request,
                                     std::chrono::milliseconds deadline) {
  v1::ReportRankResponse response;
  return WithRetry(deadline, [&](grpc::ClientContext* ctx) {
    return stub_->ReportRank(ctx, request, &response);
  });
}

}  // namespace ringmaster::worker
