#include "worker/core/backoff.h"

#include <algorithm>

namespace ringmaster::worker {

std::chrono::milliseconds Backoff::Next(double jitter) {
  jitter = std::clamp(jitter, 0.0, 1.0);
  const auto wait = std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(next_.count()) * (0.5 + jitter / 2)));
  next_ = std::min(max_, next_ * 2);
  return std::max(wait, std::chrono::milliseconds(1));
}

}  // namespace ringmaster::worker
