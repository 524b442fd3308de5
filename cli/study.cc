#include "study.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "format.h"

namespace ringmaster::cli {
namespace {

constexpr int32_t kMaxStudyGpus = 4096;

std::string Figure(double value) { return value > 0 ? absl::StrFormat("%.2f", value) : "-"; }

std::string Ratio(double value, const char* suffix) {
  return value > 0 ? absl::StrFormat("%.2f%s", value, suffix) : "-";
}

std::string Percent(double value) {
  return value > 0 ? absl::StrFormat("%.1f%%", value * 100) : "-";
}

std::string Workload(const v1::Study& study) {
  if (!study.command().empty()) return absl::StrJoin(study.command(), " ");
  std::string out =
      absl::StrCat("trainer, model ", study.model().empty() ? "(default)" : study.model());
  if (study.steps() > 0) absl::StrAppend(&out, ", ", study.steps(), " steps");
  if (study.batch_size() > 0) absl::StrAppend(&out, ", batch ", study.batch_size());
  return out;
}

std::string Resource(const v1::Study& study) {
  return study.gpu_type().empty() ? "any GPU type" : study.gpu_type();
}

// The best efficiency among sizes above the smallest, for the list.
std::string LargestEfficiency(const v1::Study& study) {
  const v1::StudyPoint* largest = nullptr;
  for (const v1::StudyPoint& p : study.points()) {
    if (p.efficiency() > 0 && (largest == nullptr || p.gpus() > largest->gpus())) largest = &p;
  }
  if (largest == nullptr) return "-";
  return absl::StrCat(Percent(largest->efficiency()), " at ", largest->gpus());
}

std::string Escape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A round step for about `n` ticks up to `max`.
double NiceStep(double max, int n) {
  const double raw = max / n;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= m * magnitude) return m * magnitude;
  }
  return 10 * magnitude;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ParseStudySizes(absl::string_view text) {
  std::set<int32_t> sizes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int32_t n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1 || n > kMaxStudyGpus) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus: expected a comma-separated list of GPU counts of 1..",
                       kMaxStudyGpus, " (such as 1,2,4,8), got '", part, "'"));
    }
    if (!sizes.insert(n).second) {
      return absl::InvalidArgumentError(absl::StrCat("--gpus: ", n, " appears twice"));
    }
  }
  if (sizes.size() > kMaxStudySizes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpus: at most ", kMaxStudySizes, " sizes, got ", sizes.size()));
  }
  return std::vector<int32_t>(sizes.begin(), sizes.end());
}

std::optional<double> TotalImagesPerSecond(absl::string_view log) {
  static const std::regex line("total images/sec: ([0-9]+(\\.[0-9]+)?)");
  std::optional<double> last;
  const std::string text(log);
  for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it) {
    double value = 0;
    if (absl::SimpleAtod((*it)[1].str(), &value) && std::isfinite(value)) last = value;
  }
  return last;
}

void ComputeScaling(v1::Study* study) {
  const v1::StudyPoint* base = nullptr;
  for (const v1::StudyPoint& p : study->points()) {
    if (p.images_per_second() > 0 && (base == nullptr || p.gpus() < base->gpus())) base = &p;
  }
  const double base_ips = base ? base->images_per_second() : 0;
  const int32_t base_gpus = base ? base->gpus() : 0;
  for (v1::StudyPoint& p : *study->mutable_points()) {
    if (base_ips <= 0 || p.images_per_second() <= 0) {
      p.set_speedup(0);
      p.set_efficiency(0);
      continue;
    }
    p.set_speedup(p.images_per_second() / base_ips);
    p.set_efficiency(p.speedup() / (static_cast<double>(p.gpus()) / base_gpus));
  }
}

std::string FormatStudy(const v1::Study& study) {
  std::string out = absl::StrCat(
      "Study:      ", study.id(), "\n", "Created:    ", FormatTimeMs(study.created_at_ms()), "\n",
      "Scheduler:  ", study.scheduler(), "\n", "Workload:   ", Workload(study), "\n",
      "GPUs:       ", Resource(study), ", jobs ",
      study.parallel() ? "together" : "one after the other", "\n\n");
  std::vector<std::vector<std::string>> rows;
  for (const v1::StudyPoint& p : study.points()) {
    rows.push_back({absl::StrCat(p.gpus()), Figure(p.images_per_second()), Ratio(p.speedup(), "x"),
                    Percent(p.efficiency()), p.job_id(), JobStateName(p.state())});
  }
  absl::StrAppend(
      &out, RenderTable({"GPUS", "IMAGES/SEC", "SPEEDUP", "EFFICIENCY", "JOB", "STATE"}, rows));
  for (const v1::StudyPoint& p : study.points()) {
    if (!p.message().empty()) absl::StrAppend(&out, p.gpus(), " GPUs: ", p.message(), "\n");
  }
  return out;
}

std::string FormatStudyList(const std::vector<v1::Study>& studies) {
  if (studies.empty()) return "No studies.\n";
  std::vector<std::vector<std::string>> rows;
  for (const v1::Study& s : studies) {
    std::vector<std::string> sizes;
    for (const v1::StudyPoint& p : s.points()) sizes.push_back(absl::StrCat(p.gpus()));
    rows.push_back({s.id(), FormatTimeMs(s.created_at_ms()), absl::StrJoin(sizes, ","), Resource(s),
                    Workload(s), LargestEfficiency(s)});
  }
  return RenderTable({"ID", "CREATED", "GPUS", "GPU TYPE", "WORKLOAD", "EFFICIENCY (LARGEST)"},
                     rows);
}

std::string FormatStudyComparison(const v1::Study& a, const v1::Study& b) {
  std::string out = absl::StrCat("A: ", a.id(), "  ", Resource(a), ", ", Workload(a), "\n",
                                 "B: ", b.id(), "  ", Resource(b), ", ", Workload(b), "\n\n");
  std::map<int32_t, std::pair<const v1::StudyPoint*, const v1::StudyPoint*>> sizes;
  for (const v1::StudyPoint& p : a.points()) sizes[p.gpus()].first = &p;
  for (const v1::StudyPoint& p : b.points()) sizes[p.gpus()].second = &p;
  std::vector<std::vector<std::string>> rows;
  for (const auto& [gpus, pair] : sizes) {
    const v1::StudyPoint empty;
    const v1::StudyPoint& pa = pair.first ? *pair.first : empty;
    const v1::StudyPoint& pb = pair.second ? *pair.second : empty;
    const double ratio = pa.images_per_second() > 0 && pb.images_per_second() > 0
                             ? pb.images_per_second() / pa.images_per_second()
                             : 0;
    rows.push_back({absl::StrCat(gpus), Figure(pa.images_per_second()), Percent(pa.efficiency()),
                    Figure(pb.images_per_second()), Percent(pb.efficiency()), Ratio(ratio, "")});
  }
  absl::StrAppend(&out, RenderTable({"GPUS", "A IMAGES/SEC", "A EFFICIENCY", "B IMAGES/SEC",
                                     "B EFFICIENCY", "B/A"},
                                    rows));
  return out;
}

std::string ScalingChartSvg(const v1::Study& study) {
  constexpr double kWidth = 720, kHeight = 440;
  constexpr double kLeft = 80, kRight = 80, kTop = 50, kBottom = 60;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;

  std::vector<const v1::StudyPoint*> points;
  for (const v1::StudyPoint& p : study.points()) points.push_back(&p);
  std::sort(points.begin(), points.end(),
            [](const auto* x, const auto* y) { return x->gpus() < y->gpus(); });
  const v1::StudyPoint* base = nullptr;
  for (const auto* p : points) {
    if (p->images_per_second() > 0) {
      base = p;
      break;
    }
  }
  double max_ips = 0;
  for (const auto* p : points) {
    max_ips = std::max(max_ips, p->images_per_second());
    if (base) {
      max_ips = std::max(max_ips, base->images_per_second() * p->gpus() / base->gpus());
    }
  }
  const double y_step = NiceStep(max_ips > 0 ? max_ips : 1, 5);
  const double y_max = y_step * std::ceil((max_ips > 0 ? max_ips : 1) / y_step);
  const double lo = points.empty() ? 0 : std::log2(points.front()->gpus());
  const double hi = points.empty() ? 1 : std::log2(points.back()->gpus());
  auto x_of = [&](int32_t gpus) {
    return hi > lo ? kLeft + (std::log2(gpus) - lo) / (hi - lo) * plot_w : kLeft + plot_w / 2;
  };
  auto y_of = [&](double ips) { return kTop + plot_h - ips / y_max * plot_h; };
  auto y_eff = [&](double eff) { return kTop + plot_h - eff / 1.2 * plot_h; };  // 0..120%

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, kHeight, kWidth, kHeight);
  absl::StrAppendFormat(&svg,
                        "<text x=\"%.0f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
                        "Scaling study %s: %s, %s</text>\n",
                        kWidth / 2, Escape(study.id()), Escape(Resource(study)),
                        Escape(Workload(study)));
  // Axes, grid and ticks.
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                        "stroke=\"#444\"/>\n",
                        kLeft, kTop, plot_w, plot_h);
  for (double v = 0; v <= y_max + y_step / 2; v += y_step) {
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                          kLeft, y_of(v), kLeft + plot_w, y_of(v), kLeft - 6, y_of(v) + 4,
                          absl::StrFormat("%.6g", v));
  }
  for (int pct = 0; pct <= 120; pct += 20) {
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c0392b\">%d%%</text>\n",
                          kLeft + plot_w + 6, y_eff(pct / 100.0) + 4, pct);
  }
  for (const auto* p : points) {
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n",
                          x_of(p->gpus()), kTop + plot_h + 18, p->gpus());
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">GPUs</text>\n"
                        "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 18 %.1f)\">images/sec</text>\n"
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#c0392b\" "
                        "transform=\"rotate(90 %.1f %.1f)\">scaling efficiency</text>\n",
                        kLeft + plot_w / 2, kHeight - 20, kTop + plot_h / 2, kTop + plot_h / 2,
                        kWidth - 22, kTop + plot_h / 2, kWidth - 22, kTop + plot_h / 2);
  // Ideal (dotted), measured, efficiency.
  auto polyline = [&](const std::vector<std::pair<double, double>>& xy, const char* style) {
    if (xy.empty()) return;
    std::vector<std::string> coords;
    for (const auto& [x, y] : xy) coords.push_back(absl::StrFormat("%.1f,%.1f", x, y));
    absl::StrAppendFormat(&svg, "<polyline fill=\"none\" %s points=\"%s\"/>\n", style,
                          absl::StrJoin(coords, " "));
  };
  std::vector<std::pair<double, double>> ideal, measured, efficiency;
  for (const auto* p : points) {
    if (base) {
      ideal.push_back(
          {x_of(p->gpus()), y_of(base->images_per_second() * p->gpus() / base->gpus())});
    }
    if (p->images_per_second() > 0) {
      measured.push_back({x_of(p->gpus()), y_of(p->images_per_second())});
    }
    if (p->efficiency() > 0) {
      efficiency.push_back({x_of(p->gpus()), y_eff(std::min(p->efficiency(), 1.2))});
    }
  }
  polyline(ideal, "stroke=\"#888\" stroke-width=\"1.5\" stroke-dasharray=\"2,4\"");
  polyline(measured, "stroke=\"#1f77b4\" stroke-width=\"2.5\"");
  polyline(efficiency, "stroke=\"#c0392b\" stroke-width=\"1.5\"");
  for (const auto& [x, y] : measured) {
    absl::StrAppendFormat(&svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#1f77b4\"/>\n", x,
                          y);
  }
  // Legend.
  absl::StrAppendFormat(
      &svg,
      "<g transform=\"translate(%.1f %.1f)\">"
      "<line x1=\"0\" y1=\"0\" x2=\"24\" y2=\"0\" stroke=\"#1f77b4\" stroke-width=\"2.5\"/>"
      "<text x=\"30\" y=\"4\">images/sec</text>"
      "<line x1=\"0\" y1=\"18\" x2=\"24\" y2=\"18\" stroke=\"#888\" stroke-dasharray=\"2,4\"/>"
      "<text x=\"30\" y=\"22\">ideal (linear from the smallest size)</text>"
      "<line x1=\"0\" y1=\"36\" x2=\"24\" y2=\"36\" stroke=\"#c0392b\"/>"
      "<text x=\"30\" y=\"40\">efficiency</text></g>\n",
      kLeft + 12, kTop + 16);
  svg += "</svg>\n";
  return svg;
}

}  // namespace ringmaster::cli
