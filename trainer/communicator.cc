#include "trainer/communicator.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {

absl::string_view MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost:
      return "host";
    case MemoryKind::kCuda:
      return "cuda";
  }
  return "unknown";
}

absl::Status Communicator::AllreduceSum(float* data, size_t count) {
  RM_ASSIGN_OR_RETURN(Handle handle, StartAllreduceSum(data, count));
  return Wait(handle);
}

absl::StatusOr<Communicator*> SelectCommunicator(const std::vector<Communicator*>& preference,
                                                 MemoryKind memory) {
  std::string tried;
  for (Communicator* candidate : preference) {
    if (candidate == nullptr) continue;
    if (candidate->memory() == memory) return candidate;
    absl::StrAppend(&tried, tried.empty() ? "" : ", ", candidate->name(), " (",
                    MemoryKindName(candidate->memory()), ")");
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no communicator reduces ", MemoryKindName(memory),
                   " buffers; have: ", tried.empty() ? "none" : tried));
}

}  // namespace ringmaster::trainer
