// From wire messages to core samples: the metrics service's decoding and validation of a
// `ringmaster.v1.Sample` or a `ringmaster.v1.SampleBatch`, as pure functions on an already
// parsed protobuf message (no gRPC, no state, no I/O), so that a fuzzer and the unit tests can
// drive exactly what the service runs. It lives beside core/, which stays free of protobuf;
// the decoded samples point into the message instead of copying it.
#ifndef RINGMASTER_SERVICES_METRICS_CONVERT_SAMPLE_DECODE_H_
#define RINGMASTER_SERVICES_METRICS_CONVERT_SAMPLE_DECODE_H_

#include <vector>

#include "absl/status/status.h"
#include "metrics/core/sample.h"
#include "ringmaster/v1/metrics.pb.h"

namespace ringmaster::metrics {

// A batch larger than this is refused whole (INVALID_ARGUMENT). 1,024 samples of the trainer's
// kind are about 100 KiB on the wire, well under gRPC's 4 MiB message limit, and enough to
// amortize the per-message cost of a stream (see docs/metrics.md for the measurements).
inline constexpr int kMaxSamplesPerBatch = 1024;

// The outcome of one batch. A batch is not atomic: every sample is judged on its own, the good
// ones are kept and the bad ones are dropped and counted, so that one NaN from one step does not
// cost a dashboard the rest of a rank's steps.
struct DecodedBatch {
  struct Rejected {
    int index = 0;  // position in the batch's `samples`
    DropReason reason = DropReason::kNone;
    // INVALID_ARGUMENT, "samples[INDEX]." + ValidateSample's message.
    absl::Status status;
  };
  std::vector<SampleIn> valid;  // views into the message that was decoded
  std::vector<Rejected> rejected;
};

// The sample's fields, as views into `sample` (which must outlive the result). Not validated.
SampleIn FromProto(const v1::Sample& sample);

// Decodes and validates every sample of `batch` into `*out` (cleared first; its capacity is
// reused, so a caller that keeps one DecodedBatch per stream allocates nothing per batch once
// warm). Returns INVALID_ARGUMENT, and leaves `*out` empty, only when the batch itself is
// malformed: more than kMaxSamplesPerBatch samples. A bad sample is not an error of the batch;
// it is listed in `out->rejected` with the field it failed on. Never crashes on any message.
absl::Status DecodeSampleBatch(const v1::SampleBatch& batch, DecodedBatch* out);

}  // namespace ringmaster::metrics

#endif  // RINGMASTER_SERVICES_METRICS_CONVERT_SAMPLE_DECODE_H_
