// Conversion between absl::Status and grpc::Status, done once at each RPC edge.
#ifndef RINGMASTER_LIBS_COMMON_GRPC_STATUS_H_
#define RINGMASTER_LIBS_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace ringmaster {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_GRPC_STATUS_H_
