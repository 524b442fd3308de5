#include "metrics/convert/sample_decode.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::metrics {

SampleIn FromProto(const v1::Sample& p) {
  SampleIn s;
  s.job_id = p.job_id();
  s.attempt = p.attempt();
  s.rank = p.rank();
  s.world_size = p.world_size();
  s.queue = p.queue();
  s.model = p.model();
  s.gpu_type = p.gpu_type();
  s.worker_id = p.worker_id();
  s.step = p.step();
  s.step_seconds = p.step_seconds();
  s.samples_per_second = p.samples_per_second();
  s.allreduce_bytes = p.allreduce_bytes();
  s.allreduce_seconds = p.allreduce_seconds();
  s.loss = p.loss();
  return s;
}

absl::Status DecodeSampleBatch(const v1::SampleBatch& batch, DecodedBatch* out) {
  out->valid.clear();
  out->rejected.clear();
  const int n = batch.samples_size();
  if (n > kMaxSamplesPerBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("samples: ", n, " in one batch, at most ", kMaxSamplesPerBatch,
                     "; nothing of this batch was kept (earlier batches of the stream were)"));
  }
  out->valid.reserve(n);
  for (int i = 0; i < n; ++i) {
    SampleIn s = FromProto(batch.samples(i));
    DropReason reason = DropReason::kNone;
    absl::Status status = ValidateSample(s, &reason);
    if (status.ok()) {
      out->valid.push_back(s);
    } else {
      out->rejected.push_back(
          {i, reason,
           absl::InvalidArgumentError(absl::StrCat("samples[", i, "].", status.message()))});
    }
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::metrics
