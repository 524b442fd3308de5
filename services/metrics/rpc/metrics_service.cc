#include "rpc/metrics_service.h"

#include <prometheus/metric_family.h>

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace ringmaster::metrics {

int64_t MetricsState::AddBatch(const DecodedBatch& batch) {
  int64_t kept = 0;
  std::lock_guard<std::mutex> lock(mu_);
  // One clock read per batch: its samples were flushed together, within the client's interval.
  const int64_t now = now_ms_();
  for (const SampleIn& s : batch.valid) {
    if (metrics_.Record(s, now) == DropReason::kNone) ++kept;
  }
  for (const DecodedBatch::Rejected& r : batch.rejected) metrics_.CountDropped(r.reason);
  return kept;
}

bool MetricsState::DeclareBaseline(const std::string& model, const std::string& gpu_type,
                                   double value) {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_.DeclareBaseline(model, gpu_type, value);
}

void MetricsState::Read(const std::function<void(const JobMetrics&)>& read) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.Expire(now_ms_());
  read(metrics_);
}

// The ingest protocol, for one stream:
//  1. Read a batch into the same message every time: protobuf keeps the cleared samples and
//     their strings' capacity, so a warm stream parses without allocating.
//  2. Decode and validate it with DecodeSampleBatch, outside the lock. A batch over the size
//     limit ends the stream with INVALID_ARGUMENT (what came before it stays kept).
//  3. Record the valid samples under one lock acquisition; count the rejected ones by reason.
//  4. When the client closes, reply with the counts and the first rejected sample's error.
grpc::Status MetricsServiceImpl::IngestBatches(grpc::ServerContext*,
                                               grpc::ServerReader<v1::SampleBatch>* reader,
                                               v1::IngestResponse* resp) {
  v1::SampleBatch batch;
  DecodedBatch decoded;
  int64_t received = 0, accepted = 0, batches = 0;
  std::string first_error;
  while (reader->Read(&batch)) {
    absl::Status status = DecodeSampleBatch(batch, &decoded);
    if (!status.ok()) {
      return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
          "batch ", batches, ": ", status.message(), " (", accepted, " samples kept so far)")));
    }
    received += batch.samples_size();
    accepted += state_->AddBatch(decoded);
    if (first_error.empty() && !decoded.rejected.empty()) {
      first_error = absl::StrCat("batch ", batches, ": ", decoded.rejected[0].status.message());
    }
    ++batches;
  }
  resp->set_accepted(accepted);
  resp->set_dropped(received - accepted);
  resp->set_first_error(first_error);
  return grpc::Status::OK;
}

grpc::Status MetricsServiceImpl::Ingest(grpc::ServerContext*, grpc::ServerReader<v1::Sample>* reader,
                                        v1::IngestResponse* resp) {
  v1::Sample s;
  DecodedBatch one;  // each message is a batch of one, recorded by the same path
  int64_t received = 0, accepted = 0;
  std::string first_error;
  while (reader->Read(&s)) {
    one.valid.clear();
    one.rejected.clear();
    const SampleIn in = FromProto(s);
    DropReason reason = DropReason::kNone;
    absl::Status status = ValidateSample(in, &reason);
    if (status.ok()) {
      one.valid.push_back(in);
    } else {
      if (first_error.empty()) {
        first_error = absl::StrCat("sample ", received, ": ", status.message());
      }
      one.rejected.push_back({0, reason, std::move(status)});
    }
    accepted += state_->AddBatch(one);
    ++received;
  }
  resp->set_accepted(accepted);
  resp->set_dropped(received - accepted);
  resp->set_first_error(first_error);
  return grpc::Status::OK;
}

grpc::Status MetricsServiceImpl::DeclareBaseline(grpc::ServerContext*, const v1::Baseline* req,
                                                 v1::DeclareBaselineResponse*) {
  if (!state_->DeclareBaseline(req->model(), req->gpu_type(), req->samples_per_second())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "baseline: model must be 1..63 characters of [a-z0-9.-], gpu_type at most "
                        "63 of them, samples_per_second a finite number in (0, 1e9]");
  }
  return grpc::Status::OK;
}

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const std::string& name, const std::string& help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

// In name order, as prometheus-cpp writes its own families.
std::vector<ClientMetric::Label> JobLabels(const JobView& v) {
  return {{"gpu_type", v.gpu_type}, {"job_id", v.job_id}, {"model", v.model}, {"queue", v.queue}};
}

void AddGauge(MetricFamily& f, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

void AddCounter(MetricFamily& f, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  f.metric.push_back(std::move(m));
}

}  // namespace

std::vector<MetricFamily> Exposition::Collect() const {
  auto job_ips = Family("ringmaster_job_images_per_second",
                        "Training throughput of a job: the sum of its ranks' latest images/s",
                        MetricType::Gauge);
  auto rank_ips = Family("ringmaster_rank_images_per_second", "Latest images/s of one rank",
                         MetricType::Gauge);
  auto step = Family("ringmaster_step_time_seconds", "Wall time of one training step",
                     MetricType::Histogram);
  auto busbw = Family("ringmaster_allreduce_bus_bandwidth_bytes_per_second",
                      "Gradient allreduce bus bandwidth (nccl-tests busbw) of the latest step",
                      MetricType::Gauge);
  auto loss = Family("ringmaster_loss", "Training loss of rank 0 after its latest step",
                     MetricType::Gauge);
  auto efficiency = Family("ringmaster_scaling_efficiency",
                           "Job throughput over world size x the 1-rank throughput of the same "
                           "model on the same GPU type",
                           MetricType::Gauge);
  auto world = Family("ringmaster_job_world_size", "Ranks of a job", MetricType::Gauge);
  auto accepted = Family("ringmaster_metrics_samples_total", "Samples kept by the metrics service",
                         MetricType::Counter);
  auto dropped = Family("ringmaster_metrics_samples_dropped_total",
                        "Samples dropped: malformed, absurd, stale, or over the series cap",
                        MetricType::Counter);
  auto active = Family("ringmaster_metrics_active_jobs", "Jobs with live series",
                       MetricType::Gauge);
  auto active_ranks = Family("ringmaster_metrics_active_ranks", "Ranks with live series",
                             MetricType::Gauge);

  state_->Read([&](const JobMetrics& metrics) {
    for (const JobView& v : metrics.Snapshot()) {
      auto labels = JobLabels(v);
      AddGauge(job_ips, labels, v.samples_per_second);
      AddGauge(world, labels, v.world_size);
      if (v.bus_bandwidth > 0) AddGauge(busbw, labels, v.bus_bandwidth);
      if (v.loss >= 0) AddGauge(loss, labels, v.loss);
      if (v.scaling_efficiency >= 0) AddGauge(efficiency, labels, v.scaling_efficiency);
      for (const RankView& r : v.ranks) {
        auto rl = labels;
        rl.push_back({"rank", std::to_string(r.rank)});
        rl.push_back({"worker", r.worker_id});
        AddGauge(rank_ips, std::move(rl), r.samples_per_second);
      }
      ClientMetric h;
      h.label = labels;
      h.histogram.sample_count = v.step_count;
      h.histogram.sample_sum = v.step_sum;
      for (size_t i = 0; i < kStepBuckets.size(); ++i) {
        h.histogram.bucket.push_back({v.step_buckets[i], kStepBuckets[i]});
      }
      h.histogram.bucket.push_back({v.step_count, std::numeric_limits<double>::infinity()});
      step.metric.push_back(std::move(h));
    }
    AddCounter(accepted, {}, static_cast<double>(metrics.accepted()));
    for (DropReason reason : kAllDropReasons) {
      AddCounter(dropped, {{"reason", DropReasonName(reason)}},
                 static_cast<double>(metrics.dropped(reason)));
    }
    AddGauge(active, {}, static_cast<double>(metrics.jobs()));
    AddGauge(active_ranks, {}, static_cast<double>(metrics.ranks()));
  });
  return {job_ips, rank_ips, step, busbw, loss, efficiency, world, accepted, dropped, active,
          active_ranks};
}

}  // namespace ringmaster::metrics
