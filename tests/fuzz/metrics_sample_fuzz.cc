// The metrics service's sample intake (services/metrics/core/job_metrics.h) on any stream of
// v1::Sample a rank can send, with the clock moving between samples and baselines declared on
// the way. Beyond "no crash, no leak": memory stays within the limits whatever arrives, every
// sample is either kept or counted as dropped, and the snapshot agrees with the counts.
#include <cstddef>
#include <cstdint>

#include "core/job_metrics.h"
#include "fuzz_check.h"
#include "fuzz_input.pb.h"

namespace {

using ringmaster::metrics::DropReason;
using ringmaster::metrics::JobMetrics;
using ringmaster::metrics::SampleIn;

// The field mapping of MetricsServiceImpl::Ingest (services/metrics/rpc/metrics_service.cc).
// When the service gets one decode function, call it here instead.
SampleIn Decode(const ringmaster::v1::Sample& s) {
  return SampleIn{s.job_id(),
                  s.attempt(),
                  s.rank(),
                  s.world_size(),
                  s.queue(),
                  s.model(),
                  s.gpu_type(),
                  s.worker_id(),
                  s.step(),
                  s.step_seconds(),
                  s.samples_per_second(),
                  s.allreduce_bytes(),
                  s.allreduce_seconds(),
                  s.loss()};
}

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
  int64_t now_ms = 1'000'000;
  uint64_t offered = 0;
  for (const ringmaster::fuzz::TimedSample& timed : stream.samples()) {
    now_ms += timed.advance_ms() % 120'000;
    metrics.Expire(now_ms);
    metrics.Add(Decode(timed.sample()), now_ms);
    ++offered;
    FUZZ_CHECK(metrics.jobs() <= limits.max_jobs);
    FUZZ_CHECK(metrics.ranks() <= limits.max_ranks);
  }
  uint64_t dropped = 0;
  for (DropReason reason : ringmaster::metrics::kAllDropReasons) dropped += metrics.dropped(reason);
  FUZZ_CHECK(metrics.accepted() + dropped == offered);

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
