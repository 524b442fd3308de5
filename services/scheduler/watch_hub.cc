#include "watch_hub.h"

#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/event_cursor.h"
#include "core/validation.h"

namespace ringmaster::scheduler {

WatchHub::WatchHub(JobStore* store, int32_t max_watchers)
    : store_(store), max_watchers_(static_cast<size_t>(max_watchers)) {}

absl::Status WatchHub::Begin(Feed* feed) {
  if (auto s = ValidateJobId(feed->job_id); !s.ok()) return s;
  MutexLock lock(&mu_);
  if (count_ >= max_watchers_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the scheduler serves ", max_watchers_,
                     " watches already (--max-watchers); try again when one of them ended"));
  }
  feeds_[feed->job_id].push_back(feed);
  ++count_;
  return absl::OkStatus();
}

void WatchHub::End(Feed* feed) {
  MutexLock lock(&mu_);
  auto it = feeds_.find(feed->job_id);
  if (it == feeds_.end()) return;
  count_ -= it->second.remove(feed);
  if (it->second.empty()) feeds_.erase(it);
}

void WatchHub::Publish(const std::vector<JobEvent>& events) {
  if (events.empty()) return;
  MutexLock lock(&mu_);
  std::map<std::string, std::vector<JobEvent>> by_job;
  for (const JobEvent& e : events) {
    if (feeds_.contains(e.job_id)) by_job[e.job_id].push_back(e);
  }
  for (const auto& [job_id, its] : by_job) {
    for (Feed* feed : feeds_[job_id]) feed->push(its);
  }
}

absl::Status WatchHub::Watch(const std::string& job_id,
                             const std::function<bool(const JobEvent&)>& send,
                             const std::function<bool()>& cancelled) {
  std::vector<JobEvent> pushed;  // under mu_ (pushed there)
  CondVar cv;
  Feed feed{job_id, [&](const std::vector<JobEvent>& events) {
              pushed.insert(pushed.end(), events.begin(), events.end());
              cv.NotifyAll();
            }};
  if (auto s = Begin(&feed); !s.ok()) return s;
  EventCursor cursor;
  // Sends stored events after the last one sent. Registered first, so nothing stored after
  // this read is missed: it is pushed too, and skipped there by its seq.
  auto catch_up = [&]() -> absl::Status {
    auto events = store_->ListEvents(job_id, cursor.last());
    if (!events.ok()) return events.status();
    cursor.Advance(*events, /*stored=*/true, send);
    return absl::OkStatus();
  };
  absl::Status status = catch_up();
  while (status.ok() && !cursor.done() && !cancelled()) {
    std::vector<JobEvent> fresh;
    {
      MutexLock lock(&mu_);
      // Wakes for new events, and once a second to notice a caller that went away.
      cv.WaitFor(&mu_, std::chrono::seconds(1),
                 [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !pushed.empty(); });
      fresh.swap(pushed);
    }
    if (cursor.Advance(fresh, /*stored=*/false, send)) status = catch_up();
  }
  End(&feed);
  return status;
}

}  // namespace ringmaster::scheduler
