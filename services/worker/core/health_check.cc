#include "worker/core/health_check.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/utf8.h"
#include "rank/check_result.h"

namespace ringmaster::worker {
namespace {

absl::Status Malformed(int line, const std::string& text) {
  return absl::InvalidArgumentError(
      absl::StrCat("check result line ", line, ": malformed \"", Utf8Prefix(text, 80), "\""));
}

// Mean wait of each worker's ranks.
std::map<std::string, double> WaitByWorker(const CheckReport& report) {
  std::map<std::string, std::pair<double, int>> sums;
  for (const CheckRankTiming& r : report.ranks) {
    auto& [sum, n] = sums[r.worker_id];
    sum += r.wait_seconds;
    ++n;
  }
  std::map<std::string, double> mean;
  for (const auto& [id, s] : sums) mean[id] = s.first / s.second;
  return mean;
}

}  // namespace

absl::StatusOr<CheckReport> ParseCheckResult(const std::string& text) {
  CheckReport report;
  int64_t wrong = -1;
  bool have_busbw = false;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line_no;
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() == 2 && words[0] == RM_CHECK_KEY_TRANSPORT) {
      if (words[1] != "cpu" && words[1] != "gpu") return Malformed(line_no, std::string(line));
      report.transport = words[1];
    } else if (words.size() == 2 && words[0] == RM_CHECK_KEY_BUSBW) {
      if (!absl::SimpleAtod(words[1], &report.busbw_gbps) || report.busbw_gbps < 0) {
        return Malformed(line_no, std::string(line));
      }
      have_busbw = true;
    } else if (words.size() == 2 && words[0] == RM_CHECK_KEY_ELAPSED) {
      if (!absl::SimpleAtod(words[1], &report.seconds)) {
        return Malformed(line_no, std::string(line));
      }
    } else if (words.size() == 2 && words[0] == RM_CHECK_KEY_WRONG) {
      if (!absl::SimpleAtoi(words[1], &wrong) || wrong < 0) {
        return Malformed(line_no, std::string(line));
      }
    } else if (words.size() == 4 && words[0] == RM_CHECK_KEY_RANK) {
      CheckRankTiming r;
      if (!absl::SimpleAtoi(words[1], &r.rank) || !absl::SimpleAtod(words[3], &r.wait_seconds) ||
          r.rank != static_cast<int32_t>(report.ranks.size())) {
        return Malformed(line_no, std::string(line));
      }
      // Written by the job's own processes (in-session): it goes on to the scheduler as a
      // protobuf string, which must be valid UTF-8, so a bad one is refused here.
      if (words[2].size() > 128 || Utf8Prefix(words[2], words[2].size()) != words[2]) {
        return Malformed(line_no, std::string(line));
      }
      r.worker_id = words[2];
      report.ranks.push_back(std::move(r));
    } else {
      return Malformed(line_no, std::string(line));
    }
  }
  if (!have_busbw || wrong < 0 || report.ranks.empty()) {
    return absl::InvalidArgumentError(
        "check result: busbw_gbps, wrong and at least one rank line are required");
  }
  report.completed = wrong == 0;
  if (wrong > 0)
    report.message = absl::StrCat("the check's allreduce summed ", wrong, " wrong elements");
  return report;
}

std::string ChooseCulprit(const CheckReport& report, const CheckPolicy& policy) {
  const std::map<std::string, double> waits = WaitByWorker(report);
  if (waits.size() < 2) return "";
  auto least = std::min_element(waits.begin(), waits.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
  for (const auto& [id, wait] : waits) {
    if (id == least->first) continue;
    if (least->second > wait * policy.straggler_wait_ratio) return "";
  }
  return least->first;
}

void JudgeCheck(CheckReport& report, const CheckPolicy& policy) {
  report.passed = false;
  report.culprit_worker_id.clear();
  if (!report.completed) {
    if (report.message.empty()) report.message = "the check did not complete";
    return;
  }
  const std::string straggler = ChooseCulprit(report, policy);
  double others_wait = 0;
  if (!straggler.empty()) {
    others_wait = 1e300;
    for (const auto& [id, wait] : WaitByWorker(report)) {
      if (id != straggler) others_wait = std::min(others_wait, wait);
    }
  }
  const bool below_baseline =
      policy.baseline_gbps > 0 && report.busbw_gbps < policy.baseline_gbps * policy.min_ratio;
  const bool idle_ring = !straggler.empty() && report.seconds > 0 &&
                         others_wait >= policy.idle_fraction * report.seconds;
  if (!below_baseline && !idle_ring) {
    report.passed = true;
    report.message.clear();
    return;
  }
  report.culprit_worker_id = straggler;
  if (below_baseline) {
    report.message =
        absl::StrFormat("busbw %.3f GB/s is below %.0f%% of the baseline %.3f GB/s",
                        report.busbw_gbps, policy.min_ratio * 100, policy.baseline_gbps);
  } else {
    report.message =
        absl::StrFormat("the other workers' ranks waited %.0f%% of the check for worker %s",
                        100 * others_wait / report.seconds, straggler);
  }
  if (!straggler.empty()) {
    absl::StrAppendFormat(&report.message, "; worker %s was the last to every allreduce",
                          straggler);
  }
}

}  // namespace ringmaster::worker
