// Scaling studies (`ringctl study`, docs/ringctl.md, "ringctl study"): the pure part. Parses
// the sizes, reads `total images/sec` from a rank's log, computes speedup and efficiency, and
// renders the table, the comparison of two studies and the chart. No I/O.
#ifndef RINGMASTER_CLI_STUDY_H_
#define RINGMASTER_CLI_STUDY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ringmaster/v1/study.pb.h"

namespace ringmaster::cli {

inline constexpr int kMaxStudySizes = 16;

// "1,2,4,8": 1..kMaxStudySizes distinct sizes of 1..4096, in ascending order. The error names
// --gpus and what is allowed.
absl::StatusOr<std::vector<int32_t>> ParseStudySizes(absl::string_view text);

// The figure of the last `total images/sec: N` line of a log; nullopt when there is none.
std::optional<double> TotalImagesPerSecond(absl::string_view log);

// Fills speedup and efficiency of every point against the smallest size that has a figure.
void ComputeScaling(v1::Study* study);

// `ringctl study get` and the end of `study scaling`: what was run, then one row per size.
std::string FormatStudy(const v1::Study& study);
// `ringctl study list`: one row per study, newest first as given.
std::string FormatStudyList(const std::vector<v1::Study>& studies);
// `ringctl study compare A B`: the two side by side per size, and B's images/sec over A's.
std::string FormatStudyComparison(const v1::Study& a, const v1::Study& b);

// A chart a person can open: images/sec against GPUs (log2 axis), the ideal linear line dotted
// from the smallest size, and efficiency on a second axis. Self-contained SVG.
std::string ScalingChartSvg(const v1::Study& study);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_STUDY_H_
