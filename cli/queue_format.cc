#include "queue_format.h"

#include <functional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/thousandths.h"
#include "format.h"
#include "queue_yaml.h"

namespace ringmaster::cli {
namespace {

// Every resource named by the queue's quotas or its status, by name.
std::set<std::string> Resources(const v1::QueueWithStatus& q) {
  std::set<std::string> names;
  for (const auto& [name, quota] : q.queue().resources()) names.insert(name);
  for (const auto& [name, usage] : q.status().resources()) names.insert(name);
  return names;
}

// An amount given whole and in thousandths (exact where jobs hold GPU shares): "3", "0.75".
// A scheduler from before shares sends only the whole amount.
std::string Amount(int64_t whole, int64_t thousandths) {
  return thousandths == 0 ? absl::StrCat(whole) : ThousandthsText(thousandths);
}
std::string InUse(const v1::ResourceStatus& r) {
  return Amount(r.in_use(), r.in_use_thousandths());
}
std::string Borrowed(const v1::ResourceStatus& r) {
  return Amount(r.borrowed(), r.borrowed_thousandths());
}
std::string Lent(const v1::ResourceStatus& r) { return Amount(r.lent(), r.lent_thousandths()); }

// "t4:3 cpu:8" over the resources where `value` is not 0; "0" when it is 0 everywhere.
std::string PerResource(const v1::QueueWithStatus& q,
                        const std::function<std::string(const v1::ResourceStatus&)>& value) {
  std::vector<std::string> parts;
  for (const std::string& name : Resources(q)) {
    auto it = q.status().resources().find(name);
    if (it == q.status().resources().end() || value(it->second) == "0") continue;
    parts.push_back(absl::StrCat(name, ":", value(it->second)));
  }
  return parts.empty() ? "0" : absl::StrJoin(parts, " ");
}

std::string Nominal(const v1::Queue& queue) {
  if (queue.resources().empty()) return "unlimited";
  std::vector<std::string> parts;
  std::set<std::string> names;
  for (const auto& [name, quota] : queue.resources()) names.insert(name);
  for (const std::string& name : names) {
    parts.push_back(absl::StrCat(name, ":", queue.resources().at(name).nominal()));
  }
  return absl::StrJoin(parts, " ");
}

std::string Share(double share) { return absl::StrFormat("%.2f", share); }

}  // namespace

std::string FormatQueueList(const v1::ListQueuesResponse& response) {
  if (response.queues().empty()) return "No queues.\n";
  std::vector<std::vector<std::string>> rows;
  for (const v1::QueueWithStatus& q : response.queues()) {
    rows.push_back({q.queue().name(), q.queue().cohort().empty() ? "-" : q.queue().cohort(),
                    absl::StrCat(q.queue().weight()), Nominal(q.queue()), PerResource(q, InUse),
                    PerResource(q, Borrowed), PerResource(q, Lent),
                    absl::StrCat(q.status().pending_jobs()), Share(q.status().weighted_share())});
  }
  return RenderTable(
      {"NAME", "COHORT", "WEIGHT", "NOMINAL", "IN USE", "BORROWED", "LENT", "PENDING", "SHARE"},
      rows);
}

std::string FormatQueue(const v1::QueueWithStatus& q) {
  const v1::Queue& queue = q.queue();
  const std::vector<std::vector<std::string>> fields = {
      {"Name:", queue.name()},
      {"Cohort:", queue.cohort().empty() ? "- (none: lends and borrows nothing)" : queue.cohort()},
      {"Weight:", absl::StrCat(queue.weight())},
      {"Within queue:", PreemptWithinQueueName(queue.within_queue())},
      {"Reclaim:", ReclaimWithinCohortName(queue.reclaim_within_cohort())},
      {"Min runtime:", absl::StrCat(queue.min_runtime_seconds(), "s")},
      {"Teams:", queue.teams().empty() ? "- (every team)" : absl::StrJoin(queue.teams(), ", ")},
      {"Hang timeout:", !queue.has_progress_timeout_seconds() ? "600s (default)"
                        : queue.progress_timeout_seconds() == 0
                            ? "off"
                            : absl::StrCat(queue.progress_timeout_seconds(), "s")},
      {"Idle timeout:",
       queue.idle_timeout_seconds() == 0 ? "off" : absl::StrCat(queue.idle_timeout_seconds(), "s")},
      // How long GPUs stay idle before the queue's elastic jobs grow into them.
      {"Elastic delay:", queue.has_elastic_idle_delay_seconds()
                             ? absl::StrCat(queue.elastic_idle_delay_seconds(), "s idle")
                             : "the scheduler's (--elastic-idle-delay-ms)"},
      {"Pending jobs:", absl::StrCat(q.status().pending_jobs())},
      {"Share:", Share(q.status().weighted_share())},
      {"Created:", FormatTimeMs(queue.created_at_ms())},
      {"Updated:", FormatTimeMs(queue.updated_at_ms())},
  };
  std::string out;
  for (const auto& field : fields) {
    absl::StrAppend(&out, field[0], std::string(15 - field[0].size(), ' '), field[1], "\n");
  }
  if (queue.resources().empty() && q.status().resources().empty()) {
    absl::StrAppend(&out, "\nNo quotas: only the cluster's capacity bounds this queue.\n");
    return out;
  }
  std::vector<std::vector<std::string>> rows;
  for (const std::string& name : Resources(q)) {
    auto quota = queue.resources().find(name);
    auto usage = q.status().resources().find(name);
    const v1::ResourceStatus empty;
    const v1::ResourceStatus& u = usage == q.status().resources().end() ? empty : usage->second;
    std::string nominal = "-", borrowing = "-", lending = "-";
    if (quota != queue.resources().end()) {
      nominal = absl::StrCat(quota->second.nominal());
      borrowing = quota->second.has_borrowing_limit()
                      ? absl::StrCat(quota->second.borrowing_limit())
                      : "unlimited";
      lending =
          quota->second.has_lending_limit() ? absl::StrCat(quota->second.lending_limit()) : "all";
    }
    rows.push_back({name, nominal, borrowing, lending, InUse(u), Borrowed(u), Lent(u),
                    absl::StrFormat("%.2f", u.used_seconds() / 3600.0)});
  }
  absl::StrAppend(&out, "\n",
                  RenderTable({"RESOURCE", "NOMINAL", "BORROWING LIMIT", "LENDING LIMIT", "IN USE",
                               "BORROWED", "LENT", "USED (HOURS)"},
                              rows));
  return out;
}

}  // namespace ringmaster::cli
