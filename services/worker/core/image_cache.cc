#include "worker/core/image_cache.h"

#include <algorithm>

namespace ringmaster::worker {

std::vector<std::string> ImagesToEvict(std::vector<CachedImage> images, int64_t bound_bytes,
                                       const std::set<std::string>& keep) {
  int64_t total = 0;
  for (const CachedImage& image : images) total += image.size_bytes;
  // Unknown use first, then the least recently used; ties by id, so the choice is repeatable.
  std::sort(images.begin(), images.end(), [](const CachedImage& a, const CachedImage& b) {
    if (a.last_used.has_value() != b.last_used.has_value()) return !a.last_used.has_value();
    if (a.last_used && *a.last_used != *b.last_used) return *a.last_used < *b.last_used;
    return a.id < b.id;
  });
  std::vector<std::string> evict;
  for (const CachedImage& image : images) {
    if (total <= bound_bytes) break;
    if (keep.count(image.id) > 0) continue;
    evict.push_back(image.id);
    total -= image.size_bytes;
  }
  return evict;
}

}  // namespace ringmaster::worker
