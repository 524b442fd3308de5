#include "common/grpc_status.h"

#include <atomic>
#include <chrono>
#include <random>
#include <string>

#include "absl/strings/str_format.h"
#include "common/log.h"

namespace ringmaster {
namespace {

// Unique enough to find one line in one service's log: 48 random bits per process start,
// plus a counter.
std::string NewErrorId() {
  static const uint64_t base = [] {
    std::random_device random;
    return (static_cast<uint64_t>(random()) << 16) ^ random() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  static std::atomic<uint64_t> counter{0};
  return absl::StrFormat("e-%012x", (base + counter.fetch_add(1)) & 0xffffffffffffULL);
}

}  // namespace

// The canonical codes of absl and gRPC share their numbers.
grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  switch (status.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss: {
      // What went wrong inside (SQL, hosts, paths) stays in the service's log.
      const std::string id = NewErrorId();
      RM_LOG(kError) << "error " << id << ": " << status;
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          "internal error " + id + " (the service's log has the details)");
    }
    default:
      return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                          std::string(status.message()));
  }
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace ringmaster
