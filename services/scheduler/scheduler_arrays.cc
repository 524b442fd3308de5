// The scheduler's arrays (scheduler.h, "Arrays"; core/array.h decides): tasks created as the
// parallelism lets them run, their transitions counted, the array's own state moved, its tasks
// cancelled with it, and what readers see of it. Members of Scheduler, under its mu_.
#include <prometheus/counter.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "scheduler.h"

namespace ringmaster::scheduler {
void Scheduler::CreateTasksLocked(const std::function<bool(Job&)>& may_run) {
  const int64_t now = clock_->NowMs();
  std::vector<std::pair<std::string, ArrayEnd>> ended;
  for (auto& [id, p] : arrays_) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    Job& array = it->second;
    if (auto end = EndOf(p)) {
      ended.emplace_back(id, std::move(*end));
      continue;
    }
    if (array.state == JobState::kPending && !may_run(array)) continue;
    // Tasks count against the live-job bounds as submits do: arrays submitted in a loop must
    // not grow the scheduler past them. They wait uncreated instead.
    const int64_t bytes = SpecBytes(array.spec);
    const int64_t room = std::min<int64_t>(
        options_.max_live_jobs - static_cast<int64_t>(jobs_.size()) - tasks_in_flight_,
        bytes > 0
            ? (options_.max_live_spec_bytes - live_spec_bytes_ - tasks_in_flight_ * bytes) / bytes
            : std::numeric_limits<int64_t>::max());
    const int32_t n_now =
        static_cast<int32_t>(std::max<int64_t>(0, std::min<int64_t>(TasksToCreate(p), room)));
    for (int32_t n = n_now; n > 0; --n) {
      Job task = TaskOf(array, p.next, now);
      task.last_event_seq = 1;
      Write write;
      write.job_write = {
          JobWrite::Kind::kCreate,
          task,
          JobEvent{task.id, 1, JobState::kPending, 0,
                   absl::StrCat("task ", p.next, " of array ", id, " created"), 0, now},
          false,
          std::nullopt,
          std::nullopt};
      write.in_order = true;
      writer_.Enqueue(std::move(write));
      ++p.next;
      ++p.live;
      ++tasks_in_flight_;
    }
    if (array.state == JobState::kPending) {
      array.pending_reason = ArraySummary(p);
      if (room <= 0 && TasksToCreate(p) > 0) {
        absl::StrAppend(&array.pending_reason,
                        "; no room for more live jobs (--max-live-jobs, --max-live-spec-mib)");
      }
    }
  }
  for (const auto& [id, end] : ended) SetArrayStateLocked(id, end.state, end.reason);
}

void Scheduler::CountTaskLocked(const std::string& task_id, JobState from, JobState to) {
  auto task = ParseTaskId(task_id);
  if (!task) return;
  const std::string& id = task->first;
  auto a = arrays_.find(id);
  if (a == arrays_.end()) return;
  ArrayProgress& p = a->second;
  if (!IsPlaced(from) && IsPlaced(to)) ++p.running;
  if (IsPlaced(from) && !IsPlaced(to)) p.running = std::max(0, p.running - 1);
  if (IsTerminal(to)) {
    TaskEnded(p, task->second, to);
    // Those that wait for the array to succeed learn at once that it cannot.
    if (to != JobState::kSucceeded) {
      for (const std::string& waiting : deps_.WaitersOf(id)) newly_pending_.insert(waiting);
    }
    if (auto end = EndOf(p)) SetArrayStateLocked(id, end->state, end->reason);
    return;  // the task's end woke the next pass, which creates the next tasks
  }
  auto array = jobs_.find(id);
  if (IsPlaced(to) && array != jobs_.end() && array->second.state == JobState::kPending) {
    SetArrayStateLocked(id, JobState::kRunning, absl::StrCat("task ", task->second, " placed"));
  }
}

void Scheduler::SetArrayStateLocked(const std::string& id, JobState to, const std::string& reason) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  const int64_t now = clock_->NowMs();
  Job next = it->second;
  next.state = to;
  next.updated_at_ms = now;
  next.pending_reason.clear();
  if (to == JobState::kRunning) next.started_at_ms = now;
  if (IsTerminal(to)) {
    next.finished_at_ms = now;
    next.message = reason;
  }
  const JobEvent event{id, ++next.last_event_seq, to, next.attempt, reason, 0, now};
  Write write;
  write.job_write = {JobWrite::Kind::kUpdate, next, event, false, std::nullopt, std::nullopt};
  RM_LOG(kInfo) << "array " << id << " " << JobStateName(it->second.state) << " -> "
                << JobStateName(to) << ": " << reason;
  if (IsTerminal(to)) {
    if (metrics_) {
      metrics_->finished.Add({{"state", JobStateName(to)}, {"queue", next.spec.queue}}).Increment();
    }
    arrays_.erase(id);
    pending_since_ms_.erase(id);
    for (const std::string& waiting : deps_.Ended(id, to)) newly_pending_.insert(waiting);
    EraseJobLocked(it);
    Wake();
  } else {
    SetJobLocked(next);
  }
  writer_.Enqueue(std::move(write));
}

void Scheduler::CancelTasksLocked(const std::string& id, JobState array_end) {
  arrays_.erase(id);
  std::vector<std::string> tasks;
  for (const auto& [job_id, job] : jobs_) {
    if (auto task = ParseTaskId(job_id); task && task->first == id) tasks.push_back(job_id);
  }
  const std::string why = absl::StrCat("array ", id, " ended ", JobStateName(array_end));
  for (const std::string& task : tasks) {
    if (auto s = CommitLocked(task, {JobInput::Kind::kCancel, why}); !s.ok()) {
      RM_LOG(kError) << "cancelling " << task << ": " << s;
    }
  }
}

void Scheduler::FillArrayStatus(Job& job) {
  if (!job.spec.array) return;
  {
    MutexLock lock(&mu_);
    if (auto a = arrays_.find(job.id); a != arrays_.end()) {
      job.array_status = StatusOf(a->second, /*cancelled_array=*/false);
      return;
    }
  }
  // Ended (or ending): what the store holds.
  if (auto tally = store_->TallyArray(job.id); tally.ok()) {
    job.array_status = StatusOfEnded(*job.spec.array, *tally);
  }
}

}  // namespace ringmaster::scheduler
