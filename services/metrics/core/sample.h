// One throughput sample as the metrics service's core sees it, and the rules a sample must meet
// before anything of it is stored. Plain C++, no I/O, no protobuf; thread-compatible.
#ifndef RINGMASTER_SERVICES_METRICS_CORE_SAMPLE_H_
#define RINGMASTER_SERVICES_METRICS_CORE_SAMPLE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringmaster::metrics {

// The strings are views: a sample decoded from a protobuf message points into that message (no
// copy per sample on the ingest path), so it must not outlive it. JobMetrics copies what it keeps.
struct SampleIn {
  absl::string_view job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  int32_t world_size = 1;
  absl::string_view queue;
  absl::string_view model;
  absl::string_view gpu_type;
  absl::string_view worker_id;
  int64_t step = 0;
  double step_seconds = 0;
  double samples_per_second = 0;
  double allreduce_bytes = 0;
  double allreduce_seconds = 0;
  double loss = -1;
};

// Why a sample was dropped; the service counts drops by this name.
enum class DropReason {
  kNone,
  kBadId,
  kBadLabel,
  kBadNumber,
  kStaleAttempt,
  kTooManyJobs,
  kTooManyRanks,
};
inline constexpr DropReason kAllDropReasons[] = {
    DropReason::kBadId,        DropReason::kBadLabel,    DropReason::kBadNumber,
    DropReason::kStaleAttempt, DropReason::kTooManyJobs, DropReason::kTooManyRanks};
inline constexpr size_t kDropReasonCount = 7;  // kNone included, for arrays indexed by reason
static_assert(static_cast<size_t>(DropReason::kTooManyRanks) + 1 == kDropReasonCount,
              "a new DropReason needs a counter slot");
const char* DropReasonName(DropReason reason);

// Label values end up in every series of the job; they are kept short and plain.
bool IsLabel(absl::string_view value);

// Checks every field of `sample` on its own, without any state. OK, or INVALID_ARGUMENT whose
// message starts with the first bad field's name and says what was expected and what came
// (e.g. "step_seconds must be a finite number in [0, 86400], got -1"); `*reason` is the counter
// the drop goes to (kNone when OK). Fields are checked in the order job_id, labels, numbers, so
// a sample wrong in several places is counted once, under its first fault.
absl::Status ValidateSample(const SampleIn& sample, DropReason* reason);

}  // namespace ringmaster::metrics

#endif  // RINGMASTER_SERVICES_METRICS_CORE_SAMPLE_H_
