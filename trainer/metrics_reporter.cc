#include "trainer/metrics_reporter.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <vector>

#include "common/log.h"
#include "ringmaster/v1/metrics.grpc.pb.h"

namespace ringmaster::trainer {

MetricsReporter::MetricsReporter(std::string address, ReportLabels labels, size_t max_queue)
    : address_(std::move(address)), labels_(std::move(labels)), max_queue_(max_queue) {
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= max_queue_) {
      queue_.pop_front();
      ++dropped_;
    }
    queue_.push_back(stats);
  }
  cv_.notify_one();
}

void MetricsReporter::Run() {
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  auto stub = v1::MetricsService::NewStub(channel);
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientWriter<v1::Sample>> writer;
  v1::IngestResponse response;
  auto close = [&] {
    if (!writer) return;
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (!status.ok()) RM_LOG(kWarning) << "metrics stream to " << address_ << ": " << status.error_message();
    writer.reset();
    ctx.reset();
  };
  std::chrono::steady_clock::time_point drain_deadline{};
  auto retry_at = std::chrono::steady_clock::now();
  while (true) {
    std::vector<StepStats> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_ && drain_deadline == std::chrono::steady_clock::time_point{}) {
        drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      }
      if (stop_ && (queue_.empty() || std::chrono::steady_clock::now() > drain_deadline)) break;
      batch.assign(queue_.begin(), queue_.end());
      queue_.clear();
    }
    if (std::chrono::steady_clock::now() < retry_at) {
      dropped_ += static_cast<int64_t>(batch.size());  // the service is down: do not pile up
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (!writer) {
      ctx = std::make_unique<grpc::ClientContext>();
      writer = stub->Ingest(ctx.get(), &response);
    }
    for (const StepStats& s : batch) {
      v1::Sample sample;
      sample.set_job_id(labels_.job_id);
      sample.set_attempt(labels_.attempt);
      sample.set_rank(labels_.rank);
      sample.set_world_size(labels_.world_size);
      sample.set_queue(labels_.queue);
      sample.set_model(labels_.model);
      sample.set_gpu_type(labels_.gpu_type);
      sample.set_worker_id(labels_.worker_id);
      sample.set_step(s.step);
      sample.set_step_seconds(s.step_seconds);
      sample.set_samples_per_second(s.images_per_sec);
      sample.set_allreduce_bytes(s.allreduce_bytes);
      sample.set_allreduce_seconds(s.allreduce_seconds);
      sample.set_loss(s.loss);
      if (!writer->Write(sample)) {
        dropped_ += 1;
        close();
        retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        break;
      }
      ++sent_;
    }
  }
  close();
}

}  // namespace ringmaster::trainer
