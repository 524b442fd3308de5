#include "metrics/core/sample.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::metrics {
namespace {

// Plain character ranges rather than <cctype>: no locale lookups on the hot path, and the
// answer cannot depend on the process's locale.
bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool IsLabelChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

// "j-" and lower-case hex, or a task of a job array: that, '-' and its index (1..5 digits).
bool IsJobId(absl::string_view id) {
  if (id.size() < 3 || id.size() > 64 || id.substr(0, 2) != "j-") return false;
  const size_t dash = id.find('-', 2);
  const absl::string_view hex = id.substr(2, dash == absl::string_view::npos ? id.npos : dash - 2);
  if (hex.empty()) return false;
  for (char c : hex) {
    if (!IsLowerHex(c)) return false;
  }
  if (dash == absl::string_view::npos) return true;
  const absl::string_view index = id.substr(dash + 1);
  if (index.empty() || index.size() > 5 || (index.size() > 1 && index[0] == '0')) return false;
  for (char c : index) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool InRange(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

// A caller's value quoted back in an error: escaped, and cut so a megabyte label does not make
// a megabyte message.
std::string Quote(absl::string_view value) {
  constexpr size_t kMax = 40;
  std::string out = absl::StrCat("\"", absl::CHexEscape(value.substr(0, kMax)), "\"");
  if (value.size() > kMax) absl::StrAppend(&out, " (", value.size(), " bytes)");
  return out;
}

absl::Status BadNumber(absl::string_view field, absl::string_view expected, double got) {
  return absl::InvalidArgumentError(absl::StrCat(field, " must be ", expected, ", got ", got));
}

absl::Status CheckNumbers(const SampleIn& s) {
  if (s.world_size < 1 || s.world_size > 4096) {
    return BadNumber("world_size", "in 1..4096", s.world_size);
  }
  if (s.rank < 0 || s.rank >= s.world_size) {
    return BadNumber("rank", absl::StrCat("in 0..world_size-1 (0..", s.world_size - 1, ")"),
                     s.rank);
  }
  if (s.attempt < 0) return BadNumber("attempt", ">= 0", s.attempt);
  if (s.step < 0) return BadNumber("step", ">= 0", static_cast<double>(s.step));
  if (!InRange(s.step_seconds, 0, 86400)) {
    return BadNumber("step_seconds", "a finite number in [0, 86400]", s.step_seconds);
  }
  if (!InRange(s.samples_per_second, 0, 1e9)) {
    return BadNumber("samples_per_second", "a finite number in [0, 1e9]", s.samples_per_second);
  }
  if (!InRange(s.allreduce_bytes, 0, 1e13)) {
    return BadNumber("allreduce_bytes", "a finite number in [0, 1e13]", s.allreduce_bytes);
  }
  if (!InRange(s.allreduce_seconds, 0, 86400)) {
    return BadNumber("allreduce_seconds", "a finite number in [0, 86400]", s.allreduce_seconds);
  }
  if (!std::isfinite(s.loss) || s.loss > 1e6) {
    return BadNumber("loss", "a finite number <= 1e6 (negative: not measured)", s.loss);
  }
  return absl::OkStatus();
}

}  // namespace

bool IsLabel(absl::string_view value) {
  if (value.size() > 63) return false;
  for (char c : value) {
    if (!IsLabelChar(c)) return false;
  }
  return true;
}

const char* DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kNone:
      return "none";
    case DropReason::kBadId:
      return "bad_job_id";
    case DropReason::kBadLabel:
      return "bad_label";
    case DropReason::kBadNumber:
      return "bad_value";
    case DropReason::kStaleAttempt:
      return "stale_attempt";
    case DropReason::kTooManyJobs:
      return "too_many_jobs";
    case DropReason::kTooManyRanks:
      return "too_many_ranks";
  }
  return "unknown";
}

absl::Status ValidateSample(const SampleIn& s, DropReason* reason) {
  *reason = DropReason::kNone;
  if (!IsJobId(s.job_id)) {
    *reason = DropReason::kBadId;
    return absl::InvalidArgumentError(absl::StrCat(
        "job_id must be \"j-\" followed by 1..62 lowercase hex digits, got ", Quote(s.job_id)));
  }
  const std::pair<absl::string_view, absl::string_view> labels[] = {
      {"queue", s.queue}, {"model", s.model}, {"gpu_type", s.gpu_type}, {"worker_id", s.worker_id}};
  for (const auto& [field, value] : labels) {
    if (!IsLabel(value)) {
      *reason = DropReason::kBadLabel;
      return absl::InvalidArgumentError(
          absl::StrCat(field, " must be at most 63 characters of [a-z0-9.-], got ", Quote(value)));
    }
  }
  absl::Status numbers = CheckNumbers(s);
  if (!numbers.ok()) *reason = DropReason::kBadNumber;
  return numbers;
}

}  // namespace ringmaster::metrics
