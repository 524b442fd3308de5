#include "common/mutex.h"

#include "absl/synchronization/mutex.h"

namespace ringmaster {

void TurnOffAbslDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace ringmaster
