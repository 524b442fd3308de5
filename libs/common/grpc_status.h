// Conversion between absl::Status and grpc::Status, done once at each RPC edge.
#ifndef RINGMASTER_LIBS_COMMON_GRPC_STATUS_H_
#define RINGMASTER_LIBS_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace ringmaster {

// The same code and message, except for INTERNAL, UNKNOWN and DATA_LOSS: those reach the client
// as INTERNAL "internal error e-<12 hex> ...", and the message (SQL text, hosts) is logged under
// that id only.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_GRPC_STATUS_H_
