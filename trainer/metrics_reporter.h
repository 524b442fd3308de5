// Streams a rank's per-step samples to ringmaster-metrics without slowing training: Report()
// only queues (dropping the oldest sample when the queue is full), and one background thread
// writes a gRPC client stream, reconnecting after a failure. Thread-safe.
#ifndef RINGMASTER_TRAINER_METRICS_REPORTER_H_
#define RINGMASTER_TRAINER_METRICS_REPORTER_H_

#include <atomic>
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

class MetricsReporter {
 public:
  MetricsReporter(std::string address, ReportLabels labels, size_t max_queue = 4096);
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
  const size_t max_queue_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StepStats> queue_;
  bool stop_ = false;
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_METRICS_REPORTER_H_
