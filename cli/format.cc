#include "format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <ctime>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/thousandths.h"
#include "job_spec.h"

namespace ringmaster::cli {
namespace {

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

// Keeps table cells and event lines on one line whatever the scheduler put in a message.
std::string OneLine(const std::string& text) {
  return absl::StrReplaceAll(text, {{"\r\n", " "}, {"\n", " "}, {"\r", " "}, {"\t", " "}});
}

std::string WorkloadText(const v1::JobSpec& spec) {
  switch (spec.workload_case()) {
    case v1::JobSpec::kTrainer: {
      const v1::TrainerWorkload& t = spec.trainer();
      return absl::StrCat("trainer model=", t.model().empty() ? "mlp" : t.model(),
                          " batch_size=", t.batch_size() == 0 ? 64 : t.batch_size(),
                          " steps=", t.steps() == 0 ? 100 : t.steps(),
                          t.has_checkpoint_every()
                              ? absl::StrCat(" checkpoint_every=", t.checkpoint_every())
                              : std::string());
    }
    case v1::JobSpec::kCommand: {
      std::string text = absl::StrCat("command ", absl::StrJoin(spec.command().argv(), " "));
      if (!spec.command().env().empty()) {
        std::map<std::string, std::string> env(spec.command().env().begin(),
                                               spec.command().env().end());
        absl::StrAppend(&text, " (env ", absl::StrJoin(env, " ", absl::PairFormatter("=")), ")");
      }
      return OneLine(text);
    }
    case v1::JobSpec::WORKLOAD_NOT_SET:
      break;
  }
  return "-";
}

std::string LabelsText(const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.empty()) return "-";
  // Map iteration order is unspecified; sorted keys keep the output stable.
  std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

// A GPU group of a worker: its type, and whether it is simulated.
using GpuKind = std::pair<std::string, bool>;
struct GpuCount {
  int used = 0;
  int total = 0;
};

std::string GpuKindName(const GpuKind& kind) {
  std::string name = kind.first.empty() ? "gpu" : kind.first;
  return kind.second ? name + "(sim)" : name;
}

std::string GpuCountsText(const std::map<GpuKind, GpuCount>& counts) {
  if (counts.empty()) return "-";
  std::vector<std::string> parts;
  parts.reserve(counts.size());
  for (const auto& [kind, count] : counts) {
    parts.push_back(absl::StrCat(GpuKindName(kind), " ", count.used, "/", count.total));
  }
  return absl::StrJoin(parts, ", ");
}

// `list`'s TASKS cell of an array: "50/1000 ended, 2 failed"; "-" for a job that is none.
std::string TasksCell(const v1::Job& job) {
  if (!job.spec().has_array()) return "-";
  if (!job.has_array_status()) return absl::StrCat(job.spec().array().count(), " tasks");
  const v1::ArrayStatus& a = job.array_status();
  std::string cell =
      absl::StrCat(a.succeeded() + a.failed() + a.cancelled(), "/", a.count(), " ended");
  if (a.failed() > 0) absl::StrAppend(&cell, ", ", a.failed(), " failed");
  return cell;
}

// `get`'s lines of an array: its size and limit, where its tasks are, which failed.
std::vector<std::vector<std::string>> ArrayFields(const v1::Job& job) {
  const v1::JobArray& array = job.spec().array();
  std::vector<std::vector<std::string>> fields = {
      {"Tasks:", absl::StrCat(array.count(),
                              array.parallelism() == 0
                                  ? " (no parallelism limit)"
                                  : absl::StrCat(" (parallelism ", array.parallelism(), ")"))}};
  if (!job.has_array_status()) return fields;
  const v1::ArrayStatus& a = job.array_status();
  // A line of its own under "Tasks:", as the counts would not fit after it.
  fields.push_back({"", absl::StrCat("waiting ", a.waiting(), "  pending ", a.pending(),
                                     "  running ", a.running(), "  succeeded ", a.succeeded(),
                                     "  failed ", a.failed(), "  cancelled ", a.cancelled())});
  if (!a.failed_indices().empty()) {
    std::string indices = absl::StrJoin(a.failed_indices(), ", ");
    // The scheduler lists only the lowest 100.
    if (a.failed_indices_size() < a.failed()) {
      absl::StrAppend(&indices, " (the lowest ", a.failed_indices_size(), " of ", a.failed(), ")");
    }
    fields.push_back({"Failed indices:", indices});
  }
  return fields;
}

}  // namespace

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 0);
  auto measure = [&widths](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  std::string out;
  auto emit = [&out, &widths](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      absl::StrAppend(&line, cell);
      if (i + 1 < widths.size()) line.append(widths[i] - cell.size() + 3, ' ');
    }
    // The last column is not padded, but an empty one leaves spaces behind.
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  };
  emit(header);
  for (const auto& row : rows) emit(row);
  return out;
}

std::string JobStateName(v1::JobState state) {
  const std::string& name = v1::JobState_Name(state);
  if (name.empty()) return absl::StrCat("STATE_", static_cast<int>(state));
  if (state == v1::JOB_STATE_UNSPECIFIED) return "UNSPECIFIED";
  return std::string(absl::StripPrefix(name, "JOB_STATE_"));
}

std::string RestartPolicyName(v1::RestartPolicy policy) {
  switch (policy) {
    case v1::RESTART_POLICY_ON_FAILURE:
      return "OnFailure";
    case v1::RESTART_POLICY_NEVER:
    case v1::RESTART_POLICY_UNSPECIFIED:
      return "Never";
    default:
      break;
  }
  return absl::StrCat("policy ", static_cast<int>(policy));
}

std::string FormatTimeMs(int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  auto secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text.data();
}

std::string FormatAge(int64_t then_ms, int64_t now_ms) {
  if (then_ms == 0) return "-";
  int64_t secs = std::max<int64_t>(0, (now_ms - then_ms) / 1000);
  if (secs < 120) return absl::StrCat(secs, "s");
  if (secs < int64_t{120} * 60) return absl::StrCat(secs / 60, "m");
  if (secs < int64_t{48} * 3600) return absl::StrCat(secs / 3600, "h");
  return absl::StrCat(secs / 86400, "d");
}

namespace {

bool IsElastic(const v1::JobSpec& spec) {
  return spec.min_replicas() > 0 && spec.max_replicas() > 0;
}

// The list's REPLICAS: "4"; an elastic job's "3 (2:4)" while it runs at 3, "(2:4)" otherwise.
std::string ReplicasCell(const v1::Job& job) {
  const v1::JobSpec& spec = job.spec();
  if (!IsElastic(spec)) return absl::StrCat(spec.replicas());
  const std::string range = absl::StrCat("(", spec.min_replicas(), ":", spec.max_replicas(), ")");
  return job.placement().empty() ? range : absl::StrCat(job.placement_size(), " ", range);
}

// get's "Replicas:": "4"; an elastic job's "4 (elastic: 2 to 8; running at 3)", with
// sizes_divide "8 (elastic: 2 to 8, sizes dividing 256; running at 4)".
std::string ReplicasText(const v1::Job& job) {
  const v1::JobSpec& spec = job.spec();
  if (!IsElastic(spec)) return absl::StrCat(spec.replicas());
  std::string text = absl::StrCat(spec.replicas(), " (elastic: ", spec.min_replicas(), " to ",
                                  spec.max_replicas());
  if (spec.sizes_divide() > 0) absl::StrAppend(&text, ", sizes dividing ", spec.sizes_divide());
  if (!job.placement().empty()) absl::StrAppend(&text, "; running at ", job.placement_size());
  return text + ")";
}

}  // namespace

std::string FormatGpuRequest(const v1::JobSpec& spec) {
  if (spec.gpus_per_replica() == 0) return "cpu";
  const std::string type = spec.gpu_type().empty() ? "any" : spec.gpu_type();
  if (spec.gpu_share() > 0) {
    return absl::StrCat(spec.replicas(), " x ", ThousandthsText(spec.gpu_share()), " ", type);
  }
  int64_t total = int64_t{spec.replicas()} * spec.gpus_per_replica();
  return absl::StrCat(total, " x ", type);
}

std::string FormatJobList(const v1::ListJobsResponse& response, int64_t now_ms) {
  if (response.jobs().empty()) return "No jobs.\n";
  // A TASKS column only where an array is listed, so a list of plain jobs stays as narrow.
  const bool arrays = std::any_of(response.jobs().begin(), response.jobs().end(),
                                  [](const v1::Job& job) { return job.spec().has_array(); });
  std::vector<std::vector<std::string>> rows;
  for (const v1::Job& job : response.jobs()) {
    const v1::JobSpec& spec = job.spec();
    std::string reason =
        job.state() == v1::JOB_STATE_PENDING ? job.pending_reason() : job.message();
    std::vector<std::string> row = {job.id(),
                                    OrDash(spec.name()),
                                    OrDash(spec.queue()),
                                    JobStateName(job.state()),
                                    absl::StrCat(spec.priority()),
                                    ReplicasCell(job),
                                    FormatGpuRequest(spec),
                                    absl::StrCat(job.attempt()),
                                    FormatAge(job.created_at_ms(), now_ms),
                                    OneLine(reason)};
    if (arrays) row.insert(row.begin() + 4, TasksCell(job));
    rows.push_back(std::move(row));
  }
  std::vector<std::string> header = {"ID",       "NAME", "QUEUE",   "STATE", "PRIORITY",
                                     "REPLICAS", "GPUS", "ATTEMPT", "AGE",   "REASON"};
  if (arrays) header.insert(header.begin() + 4, "TASKS");
  return RenderTable(header, rows);
}

std::string FormatJob(const v1::Job& job) {
  const v1::JobSpec& spec = job.spec();
  std::string gpus = spec.gpus_per_replica() == 0
                         ? "none (CPU ranks)"
                         : absl::StrCat(spec.gpus_per_replica(), " per replica, type ",
                                        spec.gpu_type().empty() ? "any" : spec.gpu_type());
  if (spec.gpu_share() > 0) {
    gpus =
        absl::StrCat("a share of ", ThousandthsText(spec.gpu_share()), " of one per replica, type ",
                     spec.gpu_type().empty() ? "any" : spec.gpu_type());
    if (spec.gpu_memory() > 0)
      absl::StrAppend(&gpus, ", ", spec.gpu_memory(), " bytes of its memory");
  }
  std::string restart = RestartPolicyName(spec.restart_policy());
  if (spec.restart_policy() == v1::RESTART_POLICY_ON_FAILURE) {
    // backoff_limit has presence: unset means the scheduler's default, 0 means no restart.
    absl::StrAppend(&restart, spec.has_backoff_limit()
                                  ? absl::StrCat(" (backoff limit ", spec.backoff_limit(), ")")
                                  : " (default backoff limit)");
  }
  std::vector<std::string> after;
  for (const v1::JobDependency& d : spec.after()) after.push_back(DependencyText(d));
  std::vector<std::vector<std::string>> fields = {{"ID:", job.id()}};
  if (!job.array_id().empty()) {
    fields.push_back({"Array:", absl::StrCat(job.array_id(), " index ", job.array_index())});
  }
  const std::vector<std::vector<std::string>> head = {
      {"Name:", OrDash(spec.name())},
      {"Queue:", OrDash(spec.queue())},
      {"Priority:", absl::StrCat(spec.priority())},
      {"State:", JobStateName(job.state())},
  };
  fields.insert(fields.end(), head.begin(), head.end());
  if (!job.pending_reason().empty()) {
    fields.push_back({"Pending reason:", OneLine(job.pending_reason())});
  }
  if (spec.has_array()) {
    const std::vector<std::vector<std::string>> array = ArrayFields(job);
    fields.insert(fields.end(), array.begin(), array.end());
  }
  std::vector<std::vector<std::string>> rest = {
      {"Attempt:", absl::StrCat(job.attempt())},
      {"Replicas:", ReplicasText(job)},
      {"GPUs:", gpus},
      {"Workload:", WorkloadText(spec)},
      {"Launch:", spec.replicas() == 1 && spec.max_replicas() <= 1 && !spec.use_mpirun()
                      ? "directly (one rank, no mpirun)"
                  : spec.use_mpirun() ? "mpirun (use_mpirun)"
                                      : "mpirun"},
      {"After:", after.empty() ? "-" : absl::StrJoin(after, ", ")},
      {"Restart policy:", restart},
      {"Max runtime:",
       spec.max_runtime_seconds() == 0 ? "none" : absl::StrCat(spec.max_runtime_seconds(), "s")},
      {"Hang timeout:", !spec.has_progress_timeout_seconds() ? "the queue's"
                        : spec.progress_timeout_seconds() == 0
                            ? "off"
                            : absl::StrCat(spec.progress_timeout_seconds(), "s")},
      {"Labels:", LabelsText(spec.labels())},
      {"Request id:", OrDash(job.request_id())},
      {"Created:", FormatTimeMs(job.created_at_ms())},
      {"Started:", FormatTimeMs(job.started_at_ms())},
      {"Finished:", FormatTimeMs(job.finished_at_ms())},
      {"Updated:", FormatTimeMs(job.updated_at_ms())},
      {"Last checkpoint:", job.last_checkpoint_time_ms() == 0
                               ? "-"
                               : absl::StrCat("step ", job.last_checkpoint_step(), " at ",
                                              FormatTimeMs(job.last_checkpoint_time_ms()))},
      {"Exit code:", absl::StrCat(job.exit_code())},
      {"Message:", OrDash(OneLine(job.message()))},
  };
  if (!spec.image().empty()) {
    // After "Workload:": what it runs in.
    std::vector<std::string> mounts;
    for (const v1::Mount& m : spec.mounts()) {
      mounts.push_back(absl::StrCat(m.volume(), ":", m.path(), m.read_only() ? ":ro" : ":rw"));
    }
    const std::vector<std::vector<std::string>> environment = {
        {"Image:", spec.image()},
        {"Image digest:", job.image_digest().empty() ? "- (not resolved yet)" : job.image_digest()},
        {"Mounts:", mounts.empty() ? "-" : absl::StrJoin(mounts, ", ")},
        {"Shm size:",
         spec.shm_size_bytes() == 0 ? "default" : absl::StrCat(spec.shm_size_bytes(), " bytes")},
        {"Workdir:", spec.workdir().empty() ? "the image's" : spec.workdir()},
    };
    rest.insert(rest.begin() + 4, environment.begin(), environment.end());
  }
  fields.insert(fields.end(), rest.begin(), rest.end());
  // An elastic job's resizes, one a line: when, into which attempt, and why.
  for (int i = 0; i < job.resizes_size(); ++i) {
    const v1::JobEvent& e = job.resizes(i);
    fields.push_back(
        {i == 0 ? "Resizes:" : "", absl::StrCat(FormatTimeMs(e.time_ms()), " attempt ", e.attempt(),
                                                ": ", OneLine(e.reason()))});
  }
  std::string out;
  for (const auto& field : fields) {
    absl::StrAppend(&out, field[0], std::string(17 - field[0].size(), ' '), field[1], "\n");
  }
  if (job.placement().empty()) {
    absl::StrAppend(&out, "Placement:       none\n");
    return out;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::RankPlacement& p : job.placement()) {
    std::string address = p.worker_address();
    if (!address.empty() && p.worker_port() != 0) {
      address = absl::StrCat(address, ":", p.worker_port());
    }
    rows.push_back({absl::StrCat(p.rank()), p.worker_id(), OrDash(address),
                    p.gpu_indices().empty() ? "cpu" : absl::StrJoin(p.gpu_indices(), ",")});
  }
  absl::StrAppend(&out, "Placement:\n", RenderTable({"RANK", "WORKER", "ADDRESS", "GPUS"}, rows));
  return out;
}

std::string FormatWorkers(const v1::ListWorkersResponse& response, int64_t now_ms) {
  if (response.workers().empty()) return "No workers.\n";
  std::map<GpuKind, GpuCount> cluster;
  int64_t cpu_used = 0;
  int64_t cpu_total = 0;
  std::vector<std::vector<std::string>> rows;
  for (const v1::WorkerInfo& w : response.workers()) {
    const std::set<int32_t> allocated(w.allocated_gpus().begin(), w.allocated_gpus().end());
    std::map<GpuKind, GpuCount> counts;
    for (const v1::Gpu& gpu : w.gpus()) {
      GpuCount& count = counts[{gpu.type(), gpu.simulated()}];
      ++count.total;
      if (allocated.contains(gpu.index())) ++count.used;
    }
    // Capacity of a lost or unhealthy worker is not schedulable, so it stays out of the totals.
    const bool unhealthy = !w.unhealthy_reason().empty();
    if (w.state() == "READY" && !unhealthy) {
      for (const auto& [kind, count] : counts) {
        cluster[kind].used += count.used;
        cluster[kind].total += count.total;
      }
      cpu_used += w.cpu_slots_used();
      cpu_total += w.cpu_slots();
    }
    std::string address = w.address();
    if (w.port() != 0) address = absl::StrCat(address, ":", w.port());
    std::string heartbeat =
        w.last_heartbeat_ms() == 0 ? "-" : FormatAge(w.last_heartbeat_ms(), now_ms) + " ago";
    std::string state = OrDash(w.state());
    if (unhealthy && w.state() == "READY") state = w.on_probation() ? "PROBATION" : "UNHEALTHY";
    rows.push_back({w.worker_id(), OrDash(address), state, GpuCountsText(counts),
                    absl::StrCat(w.cpu_slots_used(), "/", w.cpu_slots()), heartbeat});
  }
  std::string out = RenderTable(
      {"WORKER", "ADDRESS", "STATE", "GPUS (USED/TOTAL)", "CPU SLOTS", "HEARTBEAT"}, rows);
  absl::StrAppend(&out, "\nREADY totals: GPUs ", GpuCountsText(cluster), "; CPU slots ", cpu_used,
                  "/", cpu_total, "\n");
  // A GPU counts as used above when a whole rank or any share holds it; the shares apart.
  std::vector<std::vector<std::string>> shared;
  for (const v1::WorkerInfo& w : response.workers()) {
    for (const v1::GpuUse& use : w.gpu_uses()) {
      if (use.whole() || use.share() == 0) continue;
      int64_t memory = 0;
      for (const v1::Gpu& gpu : w.gpus()) {
        if (gpu.index() == use.index()) memory = gpu.memory_bytes();
      }
      shared.push_back({w.worker_id(), absl::StrCat(use.index()),
                        absl::StrCat(ThousandthsText(use.share()), "/1"),
                        absl::StrCat(use.share_ranks()), absl::StrCat(use.memory(), "/", memory)});
    }
  }
  if (!shared.empty()) {
    absl::StrAppend(
        &out, "\nShared GPUs:\n",
        RenderTable({"WORKER", "GPU", "SHARES HELD", "RANKS", "MEMORY PROMISED (BYTES)"}, shared));
  }
  bool header = false;
  for (const v1::WorkerInfo& w : response.workers()) {
    if (w.unhealthy_reason().empty()) continue;
    if (!header) absl::StrAppend(&out, "\nUnhealthy (ringctl workers clear WORKER):\n");
    header = true;
    absl::StrAppend(
        &out, "  ", w.worker_id(), ": ", w.unhealthy_reason(),
        w.on_probation() ? " (on probation: the first pre-run check it passes clears it)" : "",
        "\n");
  }
  return out;
}

namespace {
constexpr std::array<size_t, 4> kWatchWidths = {22, 5, 11, 9};
std::string WatchLine(const std::vector<std::string>& cells, const std::string& last) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    const size_t width = kWatchWidths.at(i);
    absl::StrAppend(&line, cells[i],
                    std::string(cells[i].size() < width ? width - cells[i].size() : 1, ' '));
  }
  absl::StrAppend(&line, last);
  line.erase(line.find_last_not_of(' ') + 1);
  return line + "\n";
}
}  // namespace

std::string WatchHeader() { return WatchLine({"TIME", "SEQ", "STATE", "ATTEMPT"}, "REASON"); }

std::string FormatEvent(const v1::JobEvent& event) {
  std::string reason = OneLine(event.reason());
  // The scheduler's reason usually says "exited with code N" already; say it once.
  if (event.exit_code() != 0 &&
      !absl::StrContains(reason, absl::StrCat("code ", event.exit_code()))) {
    absl::StrAppend(&reason, reason.empty() ? "" : " ", "(exit code ", event.exit_code(), ")");
  }
  return WatchLine({FormatTimeMs(event.time_ms()), absl::StrCat(event.seq()),
                    JobStateName(event.state()), absl::StrCat(event.attempt())},
                   reason);
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot write JSON: ", status.ToString()));
  }
  // Pretty output already ends with a newline; a JSON Lines record gets one.
  if (json.empty() || json.back() != '\n') json.push_back('\n');
  return json;
}

}  // namespace ringmaster::cli
