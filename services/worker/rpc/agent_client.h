// AgentClient: outbound calls to one worker's WorkerAgent service, as ringmaster-rsh and
// ringmaster-rank make them. Each returns the gRPC status as an absl::Status with the same
// code and message. Thread-compatible, as the generated stub is.
#ifndef RINGMASTER_SERVICES_WORKER_RPC_AGENT_CLIENT_H_
#define RINGMASTER_SERVICES_WORKER_RPC_AGENT_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ringmaster/v1/agent.grpc.pb.h"

namespace ringmaster::worker {

class AgentClient {
 public:
  // `address` is HOST:PORT of the agent; `credentials` from MakeChannelCredentials (the
  // agent requires a client certificate of the cluster's CA unless it runs --insecure).
  AgentClient(const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials);

  // Runs the command; `on_output(is_stderr, data)` gets its output as it comes. Returns the
  // exit status. `context` (optional) lets another thread cancel the call.
  absl::StatusOr<v1::ExitStatus> Exec(
      const v1::ExecRequest& request,
      const std::function<void(bool is_stderr, std::string_view data)>& on_output,
      grpc::ClientContext* context = nullptr);

  // Unary calls; UNAVAILABLE is retried with short waits until `deadline` passes.
  absl::StatusOr<v1::StartRankResponse> StartRank(const v1::StartRankRequest& request,
                                                  std::chrono::milliseconds deadline);
  absl::Status ReportRank(const v1::ReportRankRequest& request, std::chrono::milliseconds deadline);

 private:
  std::unique_ptr<v1::WorkerAgent::Stub> stub_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_RPC_AGENT_CLIENT_H_
