// Protobuf <-> the worker's core structs, shared by the gRPC adapters.
#ifndef RINGMASTER_SERVICES_WORKER_RPC_CONVERT_H_
#define RINGMASTER_SERVICES_WORKER_RPC_CONVERT_H_

#include "ringmaster/v1/worker.pb.h"
#include "worker/core/types.h"

namespace ringmaster::worker {

Assignment FromProto(const v1::Assignment& proto);
v1::RankStatus ToProto(const RankStatus& status);
v1::CheckResult ToProto(const CheckReport& report);
v1::RegisterWorker ToProto(const Inventory& inventory, const std::vector<HeldRank>& held);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_RPC_CONVERT_H_
