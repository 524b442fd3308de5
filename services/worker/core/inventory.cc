#include "worker/core/inventory.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ringmaster::worker {

std::string GpuTypeFromName(std::string_view device_name) {
  static const std::set<std::string, std::less<>> kKnown = {
      "t4", "v100", "a100", "h100", "h200", "a10",  "a10g", "a30",   "a40",
      "l4", "l40",  "l40s", "p100", "k80",  "b100", "b200", "gh200", "p4"};
  std::vector<std::string> words;
  std::string word;
  for (char c : device_name) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      word.push_back(c);
    } else if (c >= 'A' && c <= 'Z') {
      word.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  for (const std::string& w : words) {
    if (kKnown.count(w)) return w;
  }
  size_t first = 0;
  while (first < words.size() && (words[first] == "nvidia" || words[first] == "tesla")) ++first;
  std::string type;
  for (size_t i = first; i < words.size(); ++i) {
    if (!type.empty()) type.push_back('-');
    type += words[i];
  }
  if (type.size() > 32) type.resize(32);
  while (!type.empty() && type.back() == '-') type.pop_back();
  return type.empty() ? "gpu" : type;
}

std::string MigGpuType(std::string_view gpu_name, std::string_view instance_name) {
  std::string profile;
  if (size_t at = instance_name.rfind("MIG "); at != std::string_view::npos) {
    for (char c : instance_name.substr(at + 4)) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      const bool kept = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.';
      if (kept) {
        profile.push_back(c);
      } else if (!profile.empty() && profile.back() != '-') {
        profile.push_back('-');
      }
    }
  }
  while (!profile.empty() && (profile.back() == '-' || profile.back() == '.')) profile.pop_back();
  if (profile.empty()) profile = "mig";
  std::string type = GpuTypeFromName(gpu_name);
  // Within the scheduler's 32 characters, the profile kept whole where it can be.
  if (type.size() + 1 + profile.size() > 32)
    type.resize(32 - std::min<size_t>(profile.size() + 1, 31));
  std::string out = absl::StrCat(type, "-", profile);
  if (out.size() > 32) out.resize(32);
  return out;
}

int32_t CpuSlots(int64_t flag, int32_t cores, int32_t gpus) {
  if (flag >= 0) return static_cast<int32_t>(std::min<int64_t>(flag, 1024));
  return gpus > 0 ? 0 : std::max(1, cores);
}

}  // namespace ringmaster::worker
