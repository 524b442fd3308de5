#include "trainer/host_collectives.h"

#include <array>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {
namespace {

absl::Status CheckSameMemory(const Compute& compute, const Communicator& communicator) {
  if (compute.memory() != communicator.memory()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "compute uses ", MemoryKindName(compute.memory()), " memory but communicator ",
        communicator.name(), " reduces ", MemoryKindName(communicator.memory()), " buffers"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AllreduceHostValues(Compute& compute, Communicator& communicator,
                                 std::vector<float>* values) {
  RM_RETURN_IF_ERROR(CheckSameMemory(compute, communicator));
  if (values->empty()) return absl::OkStatus();
  if (communicator.memory() == MemoryKind::kHost) {
    return communicator.AllreduceSum(values->data(), values->size());
  }
  RM_ASSIGN_OR_RETURN(DeviceBuffer staging, DeviceBuffer::Allocate(compute, values->size()));
  RM_RETURN_IF_ERROR(compute.CopyFromHost(values->data(), values->size(), staging.data()));
  RM_RETURN_IF_ERROR(communicator.AllreduceSum(staging.data(), values->size()));
  return compute.CopyToHost(staging.data(), values->size(), values->data());
}

absl::Status BroadcastHostValue(Compute& compute, Communicator& communicator, uint64_t* value,
                                int root) {
  RM_RETURN_IF_ERROR(CheckSameMemory(compute, communicator));
  if (communicator.memory() == MemoryKind::kHost) {
    return communicator.Broadcast(value, sizeof(*value), root);
  }
  // Two floats carry the 8 bytes; only their bits matter.
  std::array<float, 2> words{};
  static_assert(sizeof(words) == sizeof(*value));
  std::memcpy(words.data(), value, sizeof(words));
  RM_ASSIGN_OR_RETURN(DeviceBuffer staging, DeviceBuffer::Allocate(compute, words.size()));
  RM_RETURN_IF_ERROR(compute.CopyFromHost(words.data(), words.size(), staging.data()));
  RM_RETURN_IF_ERROR(communicator.Broadcast(staging.data(), sizeof(words), root));
  RM_RETURN_IF_ERROR(compute.CopyToHost(staging.data(), words.size(), words.data()));
  std::memcpy(value, words.data(), sizeof(words));
  return absl::OkStatus();
}

uint64_t Fingerprint(const std::vector<float>& values) {
  uint64_t hash = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

absl::StatusOr<int> CountRanksDifferingFromRoot(Compute& compute, Communicator& communicator,
                                                uint64_t fingerprint) {
  uint64_t root_fingerprint = fingerprint;
  RM_RETURN_IF_ERROR(BroadcastHostValue(compute, communicator, &root_fingerprint, 0));
  std::vector<float> differing = {root_fingerprint == fingerprint ? 0.0f : 1.0f};
  RM_RETURN_IF_ERROR(AllreduceHostValues(compute, communicator, &differing));
  return static_cast<int>(std::lround(differing[0]));
}

}  // namespace ringmaster::trainer
