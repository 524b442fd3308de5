// Throughput lines in the style of tf_cnn_benchmarks, which the built-in trainer and most
// training scripts print:
//   "total images/sec: 12881.34"                          (the final result)
//   "10\timages/sec: 170.3 +/- 0.0 (jitter = 0.0)\t7.594"  (progress)
//   "step 10/100 loss 0.5213 images/sec 812.4"             (ringmaster-train's progress)
#ifndef RINGMASTER_SERVICES_WORKER_CORE_THROUGHPUT_H_
#define RINGMASTER_SERVICES_WORKER_CORE_THROUGHPUT_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ringmaster::worker {

struct ThroughputSample {
  double images_per_second = 0;
  // True for the "total images/sec" line, the run's result.
  bool total = false;
};

// The sample in one line of output (without its newline), if it has one: the number after
// the last "images/sec" (optionally followed by ':'). Negative, NaN and infinite values are
// not samples.
std::optional<ThroughputSample> ParseThroughputLine(std::string_view line);

// Cuts a byte stream into lines. Lines longer than `max_line` are cut there (so a program that
// never prints a newline cannot make us buffer without bound). Not thread-safe.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line = 64 * 1024) : max_line_(max_line) {}
  // Calls `on_line` for every line completed by `chunk` (without the '\n').
  void Feed(std::string_view chunk, const std::function<void(std::string_view)>& on_line);
  // Calls `on_line` for a last line without a newline, if any.
  void Flush(const std::function<void(std::string_view)>& on_line);

 private:
  size_t max_line_;
  std::string partial_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_THROUGHPUT_H_
