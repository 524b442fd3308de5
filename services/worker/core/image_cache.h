// Which images a worker removes to keep its image store within its disk bound
// (--image-cache-gib): least recently used first. Plain values and the caller's clock.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_IMAGE_CACHE_H_
#define RINGMASTER_SERVICES_WORKER_CORE_IMAGE_CACHE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ringmaster::worker {

struct CachedImage {
  std::string id;
  int64_t size_bytes = 0;
  // When a rank of this worker last started in it; none: not since the worker started (an
  // image of an earlier life, or of someone else's), which goes first.
  std::optional<std::chrono::steady_clock::time_point> last_used;
};

// The images to remove, in order, until the sum of the others' sizes is at most `bound_bytes`;
// never one of `keep` (the image just pulled, those whose pulls are under way). Sizes are each
// image's own, shared layers counted in each: the bound is kept conservatively.
std::vector<std::string> ImagesToEvict(std::vector<CachedImage> images, int64_t bound_bytes,
                                       const std::set<std::string>& keep);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_IMAGE_CACHE_H_
