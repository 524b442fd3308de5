// The metrics service's sample intake on any stream of v1::Sample a rank can send: the
// service's own decoding (services/metrics/convert/sample_decode.h), one sample at a time and
// as one batch, and its bounded state (core/job_metrics.h), with the clock moving between
// samples and baselines declared on the way. Beyond "no crash, no leak": memory stays within
// the limits whatever arrives, every sample is either kept or counted as dropped, the batch
// decoder judges each sample as the one-at-a-time path does, and the snapshot agrees with the
// counts.
#include <cstddef>
#include <cstdint>

#include "fuzz_check.h"
#include "fuzz_input.pb.h"
#include "metrics/convert/sample_decode.h"
#include "metrics/core/job_metrics.h"

namespace {

using ringmaster::metrics::DecodedBatch;
using ringmaster::metrics::DropReason;
using ringmaster::metrics::JobMetrics;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringmaster::fuzz::SampleStream stream;
  if (!stream.ParseFromArray(data, static_cast<int>(size))) return 0;
  // Small limits, so that inputs of a few KiB reach them.
  const ringmaster::metrics::Limits limits{.ttl_ms = 60'000, .max_jobs = 4, .max_ranks = 16};
  JobMetrics metrics(limits);
  for (const ringmaster::v1::Baseline& b : stream.baselines()) {
    metrics.DeclareBaseline(b.model(), b.gpu_type(), b.samples_per_second());
  }
  ringmaster::v1::SampleBatch batch;
  for (const ringmaster::fuzz::TimedSample& timed : stream.samples()) {
    *batch.add_samples() = timed.sample();
  }
  DecodedBatch decoded;
  const bool batch_ok = ringmaster::metrics::DecodeSampleBatch(batch, &decoded).ok();
  FUZZ_CHECK(batch_ok == (batch.samples_size() <= ringmaster::metrics::kMaxSamplesPerBatch));
  if (batch_ok) {
    FUZZ_CHECK(decoded.valid.size() + decoded.rejected.size() ==
               static_cast<size_t>(batch.samples_size()));
  }

  int64_t now_ms = 1'000'000;
  uint64_t offered = 0;
  size_t invalid = 0;
  for (const ringmaster::fuzz::TimedSample& timed : stream.samples()) {
    now_ms += timed.advance_ms() % 120'000;
    metrics.Expire(now_ms);
    const ringmaster::metrics::SampleIn in = ringmaster::metrics::FromProto(timed.sample());
    DropReason reason = DropReason::kNone;
    if (!ringmaster::metrics::ValidateSample(in, &reason).ok()) ++invalid;
    metrics.Add(in, now_ms);
    ++offered;
    FUZZ_CHECK(metrics.jobs() <= limits.max_jobs);
    FUZZ_CHECK(metrics.ranks() <= limits.max_ranks);
  }
  uint64_t dropped = 0;
  for (DropReason reason : ringmaster::metrics::kAllDropReasons) dropped += metrics.dropped(reason);
  FUZZ_CHECK(metrics.accepted() + dropped == offered);
  if (batch_ok) FUZZ_CHECK(decoded.rejected.size() == invalid);

  size_t ranks = 0;
  for (const ringmaster::metrics::JobView& job : metrics.Snapshot()) {
    ranks += job.ranks.size();
    FUZZ_CHECK(!job.ranks.empty());
    uint64_t previous = 0;
    for (uint64_t count : job.step_buckets) {
      FUZZ_CHECK(count >= previous && count <= job.step_count);
      previous = count;
    }
  }
  FUZZ_CHECK(ranks == metrics.ranks());
  return 0;
}
