#include "worker/core/throughput.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace ringmaster::worker {

std::optional<ThroughputSample> ParseThroughputLine(std::string_view line) {
  static constexpr std::string_view kUnit = "images/sec";
  const size_t at = line.rfind(kUnit);
  if (at == std::string_view::npos) return std::nullopt;
  size_t i = at + kUnit.size();
  if (i < line.size() && line[i] == ':') ++i;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  size_t end = i;
  while (end < line.size() &&
         (std::isdigit(static_cast<unsigned char>(line[end])) || line[end] == '.' ||
          line[end] == 'e' || line[end] == 'E' || line[end] == '+' || line[end] == '-')) {
    ++end;
  }
  if (end == i || !std::isdigit(static_cast<unsigned char>(line[i]))) return std::nullopt;
  const std::string number(line.substr(i, end - i));
  char* parsed_end = nullptr;
  const double value = std::strtod(number.c_str(), &parsed_end);
  if (parsed_end == number.c_str() || !std::isfinite(value) || value < 0) return std::nullopt;
  ThroughputSample sample;
  sample.images_per_second = value;
  std::string_view before = line.substr(0, at);
  while (!before.empty() && (before.back() == ' ' || before.back() == '\t')) {
    before.remove_suffix(1);
  }
  sample.total = before.size() >= 5 && before.substr(before.size() - 5) == "total";
  return sample;
}

void LineSplitter::Feed(std::string_view chunk,
                        const std::function<void(std::string_view)>& on_line) {
  while (!chunk.empty()) {
    const size_t nl = chunk.find('\n');
    const size_t take = nl == std::string_view::npos ? chunk.size() : nl;
    const size_t room = max_line_ - partial_.size();
    if (take >= room) {
      partial_.append(chunk.substr(0, room));
      on_line(partial_);
      partial_.clear();
      chunk.remove_prefix(room);
      if (take == room && nl != std::string_view::npos) chunk.remove_prefix(1);
      continue;
    }
    if (nl == std::string_view::npos) {
      partial_.append(chunk);
      return;
    }
    if (partial_.empty()) {
      on_line(chunk.substr(0, nl));
    } else {
      partial_.append(chunk.substr(0, nl));
      on_line(partial_);
      partial_.clear();
    }
    chunk.remove_prefix(nl + 1);
  }
}

void LineSplitter::Flush(const std::function<void(std::string_view)>& on_line) {
  if (partial_.empty()) return;
  on_line(partial_);
  partial_.clear();
}

}  // namespace ringmaster::worker
