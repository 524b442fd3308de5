#include "scheduler/rpc/log_relay.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace ringmaster::scheduler {

absl::Status GrpcAgentLogReader::Read(const std::string& address,
                                      const v1::ReadLogsRequest& request,
                                      const grpc::ServerContext* parent,
                                      const std::function<bool(const v1::LogChunk&)>& on_chunk) {
  auto stub = v1::WorkerAgent::NewStub(grpc::CreateChannel(address, credentials_));
  // A child of the caller's call: when the client cancels (ringctl logs -f interrupted), the
  // agent's call is cancelled too and stops following the rank.
  std::unique_ptr<grpc::ClientContext> context =
      parent != nullptr ? grpc::ClientContext::FromServerContext(*parent)
                        : std::make_unique<grpc::ClientContext>();
  context->set_wait_for_ready(false);
  std::unique_ptr<grpc::ClientReader<v1::LogChunk>> reader =
      stub->ReadLogs(context.get(), request);
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
    if (!on_chunk(chunk)) {
      context->TryCancel();
      (void)reader->Finish();
      return absl::CancelledError("the caller went away");
    }
  }
  return FromGrpcStatus(reader->Finish());
}

absl::Status LogRelay::Relay(const LogPlan& plan, bool follow, const grpc::ServerContext* parent,
                             const std::function<bool(const v1::LogChunk&)>& write) {
  if (active_.fetch_add(1) >= max_relays_) {
    active_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "the scheduler relays ", max_relays_,
        " logs already (--max-log-relays); try again when one of them ended"));
  }
  struct Release {
    std::atomic<int>* active;
    ~Release() { active->fetch_sub(1); }
  } release{&active_};
  v1::ReadLogsRequest request;
  request.set_job_id(plan.job_id);
  request.set_rank(plan.rank);
  request.set_attempt(plan.attempt);
  request.set_follow(follow);
  return ReadFromSources(plan, [&](const LogSource& source, bool* wrote) {
    return reader_->Read(source.address, request, parent, [&](const v1::LogChunk& chunk) {
      *wrote = true;
      return write(chunk);
    });
  });
}

}  // namespace ringmaster::scheduler
