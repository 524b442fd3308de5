// Streams a rank's per-step samples to ringmaster-metrics without slowing training: Report()
// only queues (dropping the oldest sample when the queue is full), and one background thread
// sends them in batches on one gRPC client stream (MetricsService.IngestBatches), reconnecting
// after a failure. A batch leaves when `flush_samples` are waiting or when the oldest waiting
// sample is `flush_interval` old, whichever comes first: few messages for the service, and a
// dashboard never more than the interval behind. Thread-safe.
#ifndef RINGMASTER_TRAINER_METRICS_REPORTER_H_
#define RINGMASTER_TRAINER_METRICS_REPORTER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "trainer/trainer.h"

namespace ringmaster::trainer {

// The labels every sample of this rank carries.
struct ReportLabels {
  std::string job_id;
  int32_t attempt = 0;
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string queue;
  std::string model;
  std::string gpu_type;
  std::string worker_id;
};

struct ReporterOptions {
  size_t max_queue = 4096;
  // At most 1,024: the service refuses larger batches.
  size_t flush_samples = 256;
  std::chrono::milliseconds flush_interval{100};
};

class MetricsReporter {
 public:
  MetricsReporter(std::string address, ReportLabels labels, ReporterOptions options = {});
  // Sends what is queued (for at most about two seconds), then stops.
  ~MetricsReporter();
  MetricsReporter(const MetricsReporter&) = delete;
  MetricsReporter& operator=(const MetricsReporter&) = delete;

  void Report(const StepStats& stats);
  int64_t sent() const { return sent_; }
  int64_t dropped() const { return dropped_; }

 private:
  void Run();

  const std::string address_;
  const ReportLabels labels_;
  const ReporterOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StepStats> queue_;
  std::chrono::steady_clock::time_point oldest_at_;  // when the oldest queued sample came
  bool stop_ = false;
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_METRICS_REPORTER_H_
