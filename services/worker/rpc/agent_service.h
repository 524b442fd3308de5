// The WorkerAgent gRPC service: a thin adapter from protobuf to Agent (see agent.proto for
// what each call means and agent.h for the protocol).
#ifndef RINGMASTER_SERVICES_WORKER_RPC_AGENT_SERVICE_H_
#define RINGMASTER_SERVICES_WORKER_RPC_AGENT_SERVICE_H_

#include "agent.h"
#include "ringmaster/v1/agent.grpc.pb.h"

namespace ringmaster::worker {

class AgentServiceImpl final : public v1::WorkerAgent::Service {
 public:
  explicit AgentServiceImpl(Agent* agent) : agent_(agent) {}

  grpc::Status Exec(grpc::ServerContext* ctx, const v1::ExecRequest* req,
                    grpc::ServerWriter<v1::ExecOutput>* writer) override;
  grpc::Status ReadLogs(grpc::ServerContext* ctx, const v1::ReadLogsRequest* req,
                        grpc::ServerWriter<v1::LogChunk>* writer) override;
  grpc::Status StartRank(grpc::ServerContext* ctx, const v1::StartRankRequest* req,
                         v1::StartRankResponse* resp) override;
  grpc::Status ReportRank(grpc::ServerContext* ctx, const v1::ReportRankRequest* req,
                          v1::ReportRankResponse* resp) override;

 private:
  Agent* agent_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_RPC_AGENT_SERVICE_H_
