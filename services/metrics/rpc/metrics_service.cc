#include "metrics/rpc/metrics_service.h"

#include <prometheus/metric_family.h>

#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/tls.h"

namespace ringmaster::metrics {

int64_t MetricsState::AddBatch(const DecodedBatch& batch) {
  int64_t kept = 0;
  MutexLock lock(&mu_);
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
  MutexLock lock(&mu_);
  return metrics_.DeclareBaseline(model, gpu_type, value);
}

void MetricsState::Read(const std::function<void(const JobMetrics&)>& read) {
  MutexLock lock(&mu_);
  metrics_.Expire(now_ms_());
  read(metrics_);
}

namespace {

// One ingest stream, for either protocol: `Handle` decodes, validates and records a message
// (counting it in the call's response), and says why the stream must end, if it must. The
// count of open streams is taken in the constructor (a stream past `max` ends at once) and
// given back in OnDone.
template <typename Message>
class IngestStream final : public grpc::ServerReadReactor<Message> {
 public:
  using Handle = std::function<absl::Status(const Message&)>;
  // `admitted`: whether the caller may stream at all (its job token); ends the stream if not.
  IngestStream(std::atomic<int>* streams, int max, const absl::Status& admitted, Handle handle)
      : streams_(streams), handle_(std::move(handle)) {
    if (streams_->fetch_add(1) >= max) {
      this->Finish(ToGrpcStatus(absl::ResourceExhaustedError(
          absl::StrCat("the metrics service serves ", max,
                       " ingest streams already (--max-streams); retry later"))));
      return;
    }
    if (!admitted.ok()) {
      this->Finish(ToGrpcStatus(admitted));
      return;
    }
    this->StartRead(&in_);
  }

  // Read into the same message every time: protobuf keeps the cleared samples and their
  // strings' capacity, so a warm stream parses without allocating.
  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed (or went away): the counts are the answer
      this->Finish(grpc::Status::OK);
      return;
    }
    if (absl::Status s = handle_(in_); !s.ok()) {
      this->Finish(ToGrpcStatus(s));
      return;
    }
    this->StartRead(&in_);
  }

  void OnDone() override {
    streams_->fetch_sub(1);
    delete this;
  }

 private:
  std::atomic<int>* const streams_;
  const Handle handle_;
  Message in_;
};

// PERMISSION_DENIED when a stream that may carry only `job`'s samples carries another's.
absl::Status CheckJob(const std::string& job, const v1::Sample& sample, int64_t index) {
  if (job.empty() || sample.job_id() == job) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("sample ", index, " is of job '", sample.job_id().substr(0, 64),
                   "', and this stream's job token is for ", job, " alone"));
}

}  // namespace

absl::StatusOr<std::string> MetricsServiceImpl::StreamJob(grpc::CallbackServerContext* ctx) const {
  if (!tokens_ || PeerHasVerifiedCertificate(*ctx->auth_context())) return std::string();
  const auto& metadata = ctx->client_metadata();
  auto it = metadata.find(kJobTokenMetadata);
  absl::StatusOr<std::string> job = tokens_->Verify(
      it == metadata.end() ? "" : std::string(it->second.data(), it->second.size()));
  if (!job.ok()) {
    constexpr char kWhat[] = " metadata), or a client certificate of the cluster's CA: ";
    return absl::UnauthenticatedError(
        absl::StrCat("a rank's samples need its job token (", kJobTokenEnv, " from its worker, in ",
                     kJobTokenMetadata, kWhat, job.status().message()));
  }
  if (job->empty()) return absl::UnauthenticatedError("job token: it names no job");
  return job;
}

// The ingest protocol, for one stream:
//  0. Admit the stream (StreamJob); a stream admitted for one job ends with PERMISSION_DENIED at
//     the first sample of another.
//  1. Decode and validate a batch with DecodeSampleBatch, outside the lock. A batch over the
//     size limit ends the stream with INVALID_ARGUMENT (what came before it stays kept).
//  2. Record the valid samples under one lock acquisition; count the rejected ones by reason.
//  3. The response holds the counts and the first rejected sample's error so far; the client
//     gets it when it closes the stream.
grpc::ServerReadReactor<v1::SampleBatch>* MetricsServiceImpl::IngestBatches(
    grpc::CallbackServerContext* ctx, v1::IngestResponse* resp) {
  struct Counts {
    DecodedBatch decoded;
    int64_t batches = 0;
  };
  auto counts = std::make_shared<Counts>();
  absl::StatusOr<std::string> job = StreamJob(ctx);
  return new IngestStream<v1::SampleBatch>(
      &streams_, max_streams_, job.status(),
      [this, resp, counts, job = job.value_or("")](const v1::SampleBatch& batch) -> absl::Status {
        for (int i = 0; i < batch.samples_size(); ++i) {
          if (absl::Status s =
                  CheckJob(job, batch.samples(i), resp->accepted() + resp->dropped() + i);
              !s.ok()) {
            return s;
          }
        }
        DecodedBatch& decoded = counts->decoded;
        absl::Status status = DecodeSampleBatch(batch, &decoded);
        if (!status.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("batch ", counts->batches, ": ",
                                                         status.message(), " (", resp->accepted(),
                                                         " samples kept so far)"));
        }
        const int64_t kept = state_->AddBatch(decoded);
        resp->set_accepted(resp->accepted() + kept);
        resp->set_dropped(resp->dropped() + batch.samples_size() - kept);
        if (resp->first_error().empty() && !decoded.rejected.empty()) {
          resp->set_first_error(absl::StrCat("batch ", counts->batches, ": ",
                                             decoded.rejected[0].status.message()));
        }
        ++counts->batches;
        return absl::OkStatus();
      });
}

grpc::ServerReadReactor<v1::Sample>* MetricsServiceImpl::Ingest(grpc::CallbackServerContext* ctx,
                                                                v1::IngestResponse* resp) {
  // Each message is a batch of one, recorded by the same path.
  auto received = std::make_shared<int64_t>(0);
  absl::StatusOr<std::string> job = StreamJob(ctx);
  return new IngestStream<v1::Sample>(
      &streams_, max_streams_, job.status(),
      [this, resp, received, job = job.value_or("")](const v1::Sample& s) -> absl::Status {
        if (absl::Status checked = CheckJob(job, s, *received); !checked.ok()) return checked;
        DecodedBatch one;
        const SampleIn in = FromProto(s);
        DropReason reason = DropReason::kNone;
        absl::Status status = ValidateSample(in, &reason);
        if (status.ok()) {
          one.valid.push_back(in);
        } else {
          if (resp->first_error().empty()) {
            resp->set_first_error(absl::StrCat("sample ", *received, ": ", status.message()));
          }
          one.rejected.push_back({0, reason, std::move(status)});
        }
        const int64_t kept = state_->AddBatch(one);
        resp->set_accepted(resp->accepted() + kept);
        resp->set_dropped(resp->dropped() + 1 - kept);
        ++*received;
        return absl::OkStatus();
      });
}

grpc::Status MetricsServiceImpl::DeclareBaseline(grpc::ServerContext* ctx, const v1::Baseline* req,
                                                 v1::DeclareBaselineResponse*) {
  if (tokens_) {
    // A declared baseline outweighs learned ones for every job of its model: operators only.
    if (absl::Status s = CheckServicePeer(*ctx->auth_context(), "DeclareBaseline"); !s.ok()) {
      return ToGrpcStatus(s);
    }
  }
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
