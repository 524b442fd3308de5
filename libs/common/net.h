// Small network helpers.
#ifndef RINGMASTER_LIBS_COMMON_NET_H_
#define RINGMASTER_LIBS_COMMON_NET_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

// A TCP port on `host` that was free a moment ago: picked at random below the kernel's
// ephemeral range (where no port-0 bind or connect() takes it meanwhile), never twice in one
// process; from port 0 where that range leaves no room.
absl::StatusOr<int> PickFreePort(const std::string& host = "127.0.0.1");

// Splits "host:port" (also "[v6]:port"); INVALID_ARGUMENT naming `what` when malformed.
absl::Status SplitHostPort(const std::string& addr, const std::string& what, std::string* host,
                           int* port);

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_NET_H_
