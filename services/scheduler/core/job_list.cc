#include "scheduler/core/job_list.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster::scheduler {
namespace {

// p2: with the array filter; a p1 token from before is refused (clients start the list again).
// Version tag of the token's encoding; a new layout gets a new tag.
constexpr absl::string_view kTokenVersion = "p2";
constexpr size_t kMaxSelectorBytes = 4096;
constexpr size_t kMaxKeyLength = 63;

bool IsLabelKeyChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '/' ||
         c == '-';
}

absl::Status CheckKey(absl::string_view key, absl::string_view requirement) {
  if (key.empty() || key.size() > kMaxKeyLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label_selector: \"", requirement, "\": a key must be 1..", kMaxKeyLength, " characters"));
  }
  for (char c : key) {
    if (!IsLabelKeyChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("label_selector: \"", requirement, "\": key \"", key,
                       "\" may hold only letters, digits and . _ / -"));
    }
  }
  return absl::OkStatus();
}

absl::Status BadToken(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "page_token: ", why, "; pass the next_page_token of an earlier ListJobs unchanged"));
}

}  // namespace

absl::StatusOr<std::vector<LabelRequirement>> ParseLabelSelector(absl::string_view selector) {
  std::vector<LabelRequirement> out;
  if (selector.size() > kMaxSelectorBytes) {
    return absl::InvalidArgumentError(absl::StrCat("label_selector: at most ", kMaxSelectorBytes,
                                                   " bytes, got ", selector.size()));
  }
  if (absl::StripAsciiWhitespace(selector).empty()) return out;
  for (absl::string_view raw : absl::StrSplit(selector, ',')) {
    absl::string_view part = absl::StripAsciiWhitespace(raw);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("label_selector: empty requirement in \"", selector, "\""));
    }
    LabelRequirement r;
    size_t op_at = part.find_first_of("!=");
    if (op_at == absl::string_view::npos) {
      r.op = LabelRequirement::Op::kExists;
      r.key = std::string(part);
    } else if (op_at == 0 && part[0] == '!' && part.find('=') == absl::string_view::npos) {
      r.op = LabelRequirement::Op::kNotExists;
      r.key = std::string(absl::StripAsciiWhitespace(part.substr(1)));
    } else {
      absl::string_view rest = part.substr(op_at);
      size_t op_len = 0;
      if (absl::StartsWith(rest, "!=")) {
        r.op = LabelRequirement::Op::kNotEquals;
        op_len = 2;
      } else if (absl::StartsWith(rest, "==")) {
        op_len = 2;
      } else if (absl::StartsWith(rest, "=")) {
        op_len = 1;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "label_selector: \"", part, "\": expected KEY=VALUE, KEY!=VALUE, KEY or !KEY"));
      }
      r.key = std::string(absl::StripAsciiWhitespace(part.substr(0, op_at)));
      r.value = std::string(absl::StripAsciiWhitespace(rest.substr(op_len)));
      if (r.value.find_first_of("=!") != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "label_selector: \"", part, "\": expected KEY=VALUE, KEY!=VALUE, KEY or !KEY"));
      }
    }
    if (absl::Status s = CheckKey(r.key, part); !s.ok()) return s;
    out.push_back(std::move(r));
  }
  return out;
}

bool MatchesLabels(const std::vector<LabelRequirement>& requirements,
                   const std::map<std::string, std::string>& labels) {
  for (const LabelRequirement& r : requirements) {
    auto it = labels.find(r.key);
    const bool present = it != labels.end();
    switch (r.op) {
      case LabelRequirement::Op::kEquals:
        if (!present || it->second != r.value) return false;
        break;
      case LabelRequirement::Op::kNotEquals:
        if (present && it->second == r.value) return false;
        break;
      case LabelRequirement::Op::kExists:
        if (!present) return false;
        break;
      case LabelRequirement::Op::kNotExists:
        if (present) return false;
        break;
    }
  }
  return true;
}

std::string EncodePageToken(const PageCursor& cursor) {
  // Fields joined by '\n' (none of them can hold one: a state name, a validated queue name,
  // and a selector whose newline would fail to parse), then base64 so clients see no layout.
  std::string plain = absl::StrCat(
      kTokenVersion, "\n", cursor.before_seq, "\n", cursor.state ? JobStateName(*cursor.state) : "",
      "\n", cursor.queue, "\n", cursor.array_id, "\n", cursor.label_selector);
  return absl::WebSafeBase64Escape(plain);
}

absl::StatusOr<PageCursor> DecodePageToken(absl::string_view token) {
  std::string plain;
  if (!absl::WebSafeBase64Unescape(token, &plain)) return BadToken("not a page token");
  std::vector<std::string> fields = absl::StrSplit(plain, absl::MaxSplits('\n', 5));
  if (fields.size() != 6 || fields[0] != kTokenVersion) return BadToken("not a page token");
  PageCursor cursor;
  if (!absl::SimpleAtoi(fields[1], &cursor.before_seq) || cursor.before_seq <= 0) {
    return BadToken("not a page token");
  }
  if (!fields[2].empty()) {
    cursor.state = ParseJobState(fields[2]);
    if (!cursor.state) return BadToken("not a page token");
  }
  cursor.queue = std::move(fields[3]);
  cursor.array_id = std::move(fields[4]);
  cursor.label_selector = std::move(fields[5]);
  return cursor;
}

absl::StatusOr<int32_t> EffectivePageSize(int32_t page_size, absl::string_view field) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must not be negative, got ", page_size,
                                                   " (0 means ", kDefaultPageSize, ", at most ",
                                                   kMaxPageSize, ")"));
  }
  if (page_size == 0) return kDefaultPageSize;
  return page_size > kMaxPageSize ? kMaxPageSize : page_size;
}

}  // namespace ringmaster::scheduler
