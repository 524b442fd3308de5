// RankContainer (agent.proto) <-> ContainerRun (core/container.h): the agent plans a rank's
// container, its wrapper runs it.
#ifndef RINGMASTER_SERVICES_WORKER_RPC_CONTAINER_CONVERT_H_
#define RINGMASTER_SERVICES_WORKER_RPC_CONTAINER_CONVERT_H_

#include "ringmaster/v1/agent.pb.h"
#include "worker/core/container.h"

namespace ringmaster::worker {

v1::RankContainer ToProto(const ContainerRun& run);
// The program and environment names stay empty: the wrapper's to fill.
ContainerRun FromProto(const v1::RankContainer& proto);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_RPC_CONTAINER_CONVERT_H_
