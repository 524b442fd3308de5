#include "environment_flags.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::cli {

absl::StatusOr<int32_t> ParseGpuShare(absl::string_view text, absl::string_view field) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(field,
                     ": expected a fraction of one GPU in (0, 1] with at most 3 decimals, such as "
                     "0.25, got '",
                     text, "'"));
  };
  const size_t dot = t.find('.');
  absl::string_view whole = t.substr(0, dot);
  absl::string_view decimals = dot == absl::string_view::npos ? "" : t.substr(dot + 1);
  auto digits = [](absl::string_view d) {
    return std::all_of(d.begin(), d.end(), [](char c) { return absl::ascii_isdigit(c); });
  };
  if (whole.size() > 1 || decimals.size() > 3 || (whole.empty() && decimals.empty()) ||
      !digits(whole) || !digits(decimals)) {
    return bad();
  }
  int32_t thousandths = whole.empty() ? 0 : (whole[0] - '0') * 1000;
  int32_t scale = 100;
  for (char c : decimals) {
    thousandths += (c - '0') * scale;
    scale /= 10;
  }
  if (thousandths < 1 || thousandths > 1000) return bad();
  return thousandths;
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text, absl::string_view field) {
  struct Unit {
    absl::string_view suffix;
    int64_t factor;
  };
  // Longest suffixes first: "Gi" before "G".
  static constexpr Unit kUnits[] = {{"Ki", int64_t{1} << 10},
                                    {"Mi", int64_t{1} << 20},
                                    {"Gi", int64_t{1} << 30},
                                    {"Ti", int64_t{1} << 40},
                                    {"k", 1'000},
                                    {"K", 1'000},
                                    {"M", 1'000'000},
                                    {"G", 1'000'000'000},
                                    {"T", 1'000'000'000'000}};
  absl::string_view digits = absl::StripAsciiWhitespace(text);
  int64_t factor = 1;
  for (const Unit& unit : kUnits) {
    if (absl::EndsWith(digits, unit.suffix)) {
      digits.remove_suffix(unit.suffix.size());
      factor = unit.factor;
      break;
    }
  }
  int64_t count = 0;
  const bool all_digits = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return absl::ascii_isdigit(c);
  });
  if (!all_digits || !absl::SimpleAtoi(digits, &count) ||
      count > std::numeric_limits<int64_t>::max() / factor) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": expected a size such as 8Gi, 512Mi, 1G or a number of bytes, got \"",
                     text, "\""));
  }
  return count * factor;
}

absl::StatusOr<v1::Mount> ParseMountFlag(absl::string_view text) {
  v1::Mount mount;
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mount: expected VOLUME:PATH[:ro|:rw] (e.g. imagenet:/data:ro), got \"", text, "\""));
  }
  absl::string_view path = text.substr(colon + 1);
  if (absl::EndsWith(path, ":ro")) {
    mount.set_read_only(true);
    path.remove_suffix(3);
  } else if (absl::EndsWith(path, ":rw")) {
    path.remove_suffix(3);
  }
  mount.set_volume(std::string(text.substr(0, colon)));
  mount.set_path(std::string(path));
  return mount;
}

}  // namespace ringmaster::cli
