#include "yaml_fields.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::cli {

bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // range of the second byte
    if (lead < 0x80) {
      ++i;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // overlong
      if (lead == 0xED) high = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;   // overlong
      if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
    } else {
      return false;
    }
    if (text.size() - i < length || byte(i + 1) < low || byte(i + 1) > high) return false;
    for (size_t k = 2; k < length; ++k) {
      if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return false;
    }
    i += length;
  }
  return true;
}

absl::Status YamlFields::CheckKeys(const YAML::Node& map, const std::string& path,
                                   absl::Span<const absl::string_view> known) const {
  std::set<std::string> seen;
  for (const auto& entry : map) {
    if (!entry.first.IsScalar()) {
      return Error(path, absl::StrCat("keys must be strings, got ", Describe(entry.first)));
    }
    const std::string key = entry.first.Scalar();
    if (!IsValidUtf8(key)) return Error(path, "keys must be UTF-8 text");
    const std::string key_path = path.empty() ? key : absl::StrCat(path, ".", key);
    if (!known.empty() && std::find(known.begin(), known.end(), key) == known.end()) {
      return Error(key_path,
                   absl::StrCat("unknown key (expected one of: ", absl::StrJoin(known, ", "), ")"));
    }
    if (!seen.insert(key).second) return Error(key_path, "duplicate key");
  }
  return absl::OkStatus();
}

absl::Status YamlFields::ExpectMap(const YAML::Node& node, const std::string& path) const {
  if (node.IsMap()) return absl::OkStatus();
  return Error(path, absl::StrCat("expected a mapping, got ", Describe(node)));
}

absl::StatusOr<std::string> YamlFields::String(const YAML::Node& node,
                                               const std::string& path) const {
  if (!node.IsScalar()) {
    return Error(path, absl::StrCat("expected a string, got ", Describe(node)));
  }
  if (!IsValidUtf8(node.Scalar())) return Error(path, "expected UTF-8 text");
  return node.Scalar();
}

absl::StatusOr<bool> YamlFields::Bool(const YAML::Node& node, const std::string& path) const {
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  if (text != "true" && text != "false") {
    return Error(path, absl::StrCat("expected true or false, got ", Describe(node)));
  }
  return text == "true";
}

absl::StatusOr<int64_t> YamlFields::Integer(const YAML::Node& node, const std::string& path,
                                            bool allow_negative, bool fits_int32) const {
  int64_t value = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &value)) {
    return Error(path, absl::StrCat("expected an integer, got ", Describe(node)));
  }
  if (fits_int32 && (value < std::numeric_limits<int32_t>::min() ||
                     value > std::numeric_limits<int32_t>::max())) {
    return Error(path, absl::StrCat("out of range for a 32-bit integer: ", value));
  }
  if (!allow_negative && value < 0) {
    return Error(path, absl::StrCat("must not be negative, got ", value));
  }
  return value;
}

std::string YamlFields::Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return absl::StrCat("\"", node.Scalar(), "\"");
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

absl::Status YamlFields::Error(const std::string& path, const std::string& what) const {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(source_, ": ", what));
  return absl::InvalidArgumentError(absl::StrCat(source_, ": ", path, ": ", what));
}

}  // namespace ringmaster::cli
