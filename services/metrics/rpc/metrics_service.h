// Adapters of ringmaster-metrics: the gRPC ingest service and the Prometheus exposition, both
// over one JobMetrics guarded by one mutex. Ingest decodes and validates a batch outside the
// lock (DecodeSampleBatch, pure) and takes the lock once per batch, not once per sample, so 64
// streams contend on it about a thousand times less than they send samples. The exposition is
// a Collectable built from a snapshot at scrape time, so an expired job's series simply stop
// appearing.
#ifndef RINGMASTER_SERVICES_METRICS_RPC_METRICS_SERVICE_H_
#define RINGMASTER_SERVICES_METRICS_RPC_METRICS_SERVICE_H_

#include <prometheus/collectable.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/job_token.h"
#include "common/mutex.h"
#include "metrics/convert/sample_decode.h"
#include "metrics/core/job_metrics.h"
#include "ringmaster/v1/metrics.grpc.pb.h"

namespace ringmaster::metrics {

// Shared state of the service; thread-safe.
class MetricsState {
 public:
  MetricsState(Limits limits, std::function<int64_t()> now_ms)
      : metrics_(limits), now_ms_(std::move(now_ms)) {}
  // Records the valid samples of a decoded batch and counts its rejected ones, under one lock;
  // returns how many were kept.
  int64_t AddBatch(const DecodedBatch& batch);
  bool DeclareBaseline(const std::string& model, const std::string& gpu_type, double value);
  // Expires old jobs, then calls `read` with the state under the lock.
  void Read(const std::function<void(const JobMetrics&)>& read);

 private:
  Mutex mu_;
  JobMetrics metrics_ ABSL_GUARDED_BY(mu_);
  std::function<int64_t()> now_ms_;
};

// The ingest streams are on gRPC's callback API: an open stream holds no thread while it waits
// for its next message, and each message is decoded and recorded on the callback thread that
// read it (nothing there blocks). At most `max_streams` are open at once; past that a stream is
// RESOURCE_EXHAUSTED at once, since the port takes callers without a certificate.
//
// Who may send what (docs/security.md, "Rank samples"): with `tokens` (TLS), a stream from a
// caller with a certificate of the cluster's CA may carry any job's samples; any other stream
// needs a job token (common/job_token.h) in its metadata, which ranks get from their worker, and
// carries that job's samples only. DeclareBaseline takes only callers with a certificate.
// Without `tokens` (--insecure, loopback only) every caller may do everything.
class MetricsServiceImpl final
    : public v1::MetricsService::WithCallbackMethod_IngestBatches<
          v1::MetricsService::WithCallbackMethod_Ingest<v1::MetricsService::Service>> {
 public:
  MetricsServiceImpl(MetricsState* state, int max_streams,
                     std::optional<JobTokenVerifier> tokens = std::nullopt)
      : state_(state), max_streams_(max_streams), tokens_(std::move(tokens)) {}
  grpc::ServerReadReactor<v1::SampleBatch>* IngestBatches(grpc::CallbackServerContext* ctx,
                                                          v1::IngestResponse* resp) override;
  grpc::ServerReadReactor<v1::Sample>* Ingest(grpc::CallbackServerContext* ctx,
                                              v1::IngestResponse* resp) override;
  grpc::Status DeclareBaseline(grpc::ServerContext* ctx, const v1::Baseline* req,
                               v1::DeclareBaselineResponse* resp) override;

 private:
  // The job whose samples a stream may carry: empty for any job; UNAUTHENTICATED without a
  // valid job token where one is needed.
  absl::StatusOr<std::string> StreamJob(grpc::CallbackServerContext* ctx) const;

  MetricsState* state_;
  const int max_streams_;
  const std::optional<JobTokenVerifier> tokens_;
  std::atomic<int> streams_{0};  // open ingest streams
};

class Exposition : public prometheus::Collectable {
 public:
  explicit Exposition(MetricsState* state) : state_(state) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  MetricsState* state_;
};

}  // namespace ringmaster::metrics

#endif  // RINGMASTER_SERVICES_METRICS_RPC_METRICS_SERVICE_H_
