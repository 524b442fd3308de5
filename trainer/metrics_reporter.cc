#include "trainer/metrics_reporter.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "common/job_token.h"
#include "common/log.h"
#include "common/tls.h"
#include "ringmaster/v1/metrics.grpc.pb.h"

namespace ringmaster::trainer {
namespace {

// The service's kMaxSamplesPerBatch (services/metrics/convert/sample_decode.h); the trainer does
// not link the service, so the limit is repeated here and in the proto's comment.
constexpr size_t kServiceMaxBatch = 1024;

void FillSample(const ReportLabels& labels, const StepStats& s, v1::Sample* sample) {
  sample->set_job_id(labels.job_id);
  sample->set_attempt(labels.attempt);
  sample->set_rank(labels.rank);
  sample->set_world_size(labels.world_size);
  sample->set_queue(labels.queue);
  sample->set_model(labels.model);
  sample->set_gpu_type(labels.gpu_type);
  sample->set_worker_id(labels.worker_id);
  sample->set_step(s.step);
  sample->set_step_seconds(s.step_seconds);
  sample->set_samples_per_second(s.images_per_sec);
  sample->set_allreduce_bytes(s.allreduce_bytes);
  sample->set_allreduce_seconds(s.allreduce_seconds);
  sample->set_loss(s.loss);
}

}  // namespace

MetricsReporter::MetricsReporter(std::string address, ReportLabels labels, ReporterOptions options)
    : address_(std::move(address)), labels_(std::move(labels)), options_([&] {
        options.flush_samples = std::clamp<size_t>(options.flush_samples, 1, kServiceMaxBatch);
        options.max_queue = std::max<size_t>(options.max_queue, 1);
        return options;
      }()) {
  thread_ = std::thread([this] { Run(); });
}

MetricsReporter::~MetricsReporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MetricsReporter::Report(const StepStats& stats) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= options_.max_queue) {
      queue_.pop_front();
      ++dropped_;
    }
    if (queue_.empty()) oldest_at_ = std::chrono::steady_clock::now();
    queue_.push_back(stats);
    // The sender needs waking only to start its interval or when a batch is full; a step does
    // not pay for a context switch otherwise.
    wake = queue_.size() == 1 || queue_.size() >= options_.flush_samples;
  }
  if (wake) cv_.notify_one();
}

// The sending protocol of the background thread:
//  1. Wait for a first sample, then until flush_samples are queued or the first is
//     flush_interval old (or the reporter stops).
//  2. Take everything queued and write it as batches of at most flush_samples.
//  3. A failed write closes the stream; what was taken is counted dropped, and for a second
//     after, samples are dropped instead of queued for a service that is down.
//  4. On stop, send what is left for up to two seconds, close the stream, and log the service's
//     first error if it dropped anything.
void MetricsReporter::Run() {
  using Clock = std::chrono::steady_clock;
  // The rank's worker hands it the cluster's CA (RINGMASTER_TLS_CA) or RINGMASTER_INSECURE;
  // the rank has no certificate of its own (see docs/security.md).
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(TlsOptionsFromEnvironment());
  if (!credentials.ok()) {
    RM_LOG(kWarning) << "metrics stream to " << address_
                     << ": " << credentials.status().message();
    // Never plaintext by accident: TLS against the system's roots, which fails closed.
    credentials = MakeChannelCredentials(TlsOptions{});
  }
  const char* token_env = std::getenv(kJobTokenEnv);
  const std::string job_token = token_env == nullptr ? "" : token_env;
  auto channel = grpc::CreateChannel(address_, *credentials);
  auto stub = v1::MetricsService::NewStub(channel);
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientWriter<v1::SampleBatch>> writer;
  v1::IngestResponse response;
  auto close = [&] {
    if (!writer) return;
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (!status.ok()) {
      RM_LOG(kWarning) << "metrics stream to " << address_ << ": " << status.error_message();
    } else if (response.dropped() > 0) {
      RM_LOG(kWarning) << "metrics service at " << address_ << " dropped " << response.dropped()
                       << " samples, the first because " << response.first_error();
    }
    writer.reset();
    ctx.reset();
  };
  Clock::time_point drain_deadline{};
  auto retry_at = Clock::now();
  v1::SampleBatch message;  // reused: its cleared samples keep their strings
  while (true) {
    std::vector<StepStats> taken;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      cv_.wait_until(lock, oldest_at_ + options_.flush_interval,
                     [&] { return stop_ || queue_.size() >= options_.flush_samples; });
      if (stop_ && drain_deadline == Clock::time_point{}) {
        drain_deadline = Clock::now() + std::chrono::seconds(2);
      }
      if (stop_ && (queue_.empty() || Clock::now() > drain_deadline)) break;
      taken.assign(queue_.begin(), queue_.end());
      queue_.clear();
    }
    if (Clock::now() < retry_at) {
      dropped_ += static_cast<int64_t>(taken.size());  // the service is down: do not pile up
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (!writer) {
      ctx = std::make_unique<grpc::ClientContext>();
      // The rank's proof of its job, from its worker (docs/security.md, "Rank samples").
      if (!job_token.empty()) ctx->AddMetadata(kJobTokenMetadata, job_token);
      writer = stub->IngestBatches(ctx.get(), &response);
    }
    for (size_t begin = 0; begin < taken.size(); begin += options_.flush_samples) {
      const size_t end = std::min(taken.size(), begin + options_.flush_samples);
      message.Clear();
      for (size_t i = begin; i < end; ++i) FillSample(labels_, taken[i], message.add_samples());
      if (!writer->Write(message)) {
        dropped_ += static_cast<int64_t>(taken.size() - begin);
        close();
        retry_at = Clock::now() + std::chrono::seconds(1);
        break;
      }
      sent_ += static_cast<int64_t>(end - begin);
    }
  }
  close();
}

}  // namespace ringmaster::trainer
