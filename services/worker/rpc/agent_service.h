// The WorkerAgent gRPC service: a thin adapter from protobuf to Agent (see agent.proto for
// what each call means and agent.h for the protocol).
#ifndef RINGMASTER_SERVICES_WORKER_RPC_AGENT_SERVICE_H_
#define RINGMASTER_SERVICES_WORKER_RPC_AGENT_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "ringmaster/v1/agent.grpc.pb.h"
#include "worker/agent.h"

namespace ringmaster::worker {

//
// On the TCP port, with `verify_peers` (every mode but --insecure), Exec, StartRank and
// ReportRank are served only to callers with a certificate of the cluster's CA (the port's
// mutual TLS already demands one; this keeps the rule where the calls are), on top of the
// per-attempt token; ReadLogs only to callers whose certificate has one of `log_readers` as a
// subjectAltName DNS name: the scheduler, which checks who may read a job's logs and relays
// them.
//
// On the local socket (rpc/local_socket.h; workers with --run-as) a call is served when its
// token is its attempt's AND the caller's uid, as the kernel tells it, is the user the attempt
// runs as here; ReadLogs is not served. Exec with forward_to is relayed to that peer agent
// over `peer_credentials` (this worker's certificate), with cancellation passed on.
class AgentServiceImpl final : public v1::WorkerAgent::Service {
 public:
  AgentServiceImpl(Agent* agent, bool verify_peers, std::vector<std::string> log_readers)
      : agent_(agent), verify_peers_(verify_peers), log_readers_(std::move(log_readers)) {}
  static std::unique_ptr<AgentServiceImpl> ForLocalSocket(
      Agent* agent, std::shared_ptr<grpc::ChannelCredentials> peer_credentials);

  grpc::Status Exec(grpc::ServerContext* ctx, const v1::ExecRequest* req,
                    grpc::ServerWriter<v1::ExecOutput>* writer) override;
  grpc::Status ReadLogs(grpc::ServerContext* ctx, const v1::ReadLogsRequest* req,
                        grpc::ServerWriter<v1::LogChunk>* writer) override;
  grpc::Status StartRank(grpc::ServerContext* ctx, const v1::StartRankRequest* req,
                         v1::StartRankResponse* resp) override;
  grpc::Status ReportRank(grpc::ServerContext* ctx, const v1::ReportRankRequest* req,
                          v1::ReportRankResponse* resp) override;

 private:
  absl::Status CheckPeer(grpc::ServerContext* ctx, const char* call) const;
  // CheckPeer on the TCP port; the uid check on the local socket.
  absl::Status CheckCaller(grpc::ServerContext* ctx, const char* call, const std::string& job_id,
                           int32_t attempt, const std::string& token) const;
  grpc::Status Forward(grpc::ServerContext* ctx, const v1::ExecRequest& req,
                       grpc::ServerWriter<v1::ExecOutput>* writer);

  Agent* agent_;
  bool verify_peers_;
  std::vector<std::string> log_readers_;
  bool local_ = false;
  std::shared_ptr<grpc::ChannelCredentials> peer_credentials_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_RPC_AGENT_SERVICE_H_
