#include "common/utf8.h"

#include <algorithm>

namespace ringmaster {
namespace {

// The length of the valid UTF-8 sequence at text[i], or 0 when there is none.
size_t SequenceAt(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = byte(0);
  size_t len = 0;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  if (c >= 0xE0 && c <= 0xEF) len = 3;
  if (c >= 0xF0 && c <= 0xF4) len = 4;
  if (len == 0 || i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
  }
  if (c == 0xE0 && byte(1) < 0xA0) return 0;   // overlong
  if (c == 0xED && byte(1) >= 0xA0) return 0;  // a surrogate
  if (c == 0xF0 && byte(1) < 0x90) return 0;   // overlong
  if (c == 0xF4 && byte(1) >= 0x90) return 0;  // past U+10FFFF
  return len;
}

}  // namespace

std::string Utf8Prefix(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = SequenceAt(text, i);
    if (out.size() + (len == 0 ? 1 : len) > max_bytes) break;
    if (len == 0) {
      out.push_back('?');
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace ringmaster
