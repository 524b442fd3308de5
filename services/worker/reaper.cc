#include "reaper.h"

#include <csignal>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/container.h"
#include "host/runtime.h"
#include "agent.h"
#include "common/log.h"
#include "core/teardown.h"
#include "host/process.h"

namespace ringmaster::worker {

void Reaper::Start() {
  MutexLock lock(&loop_mu_);
  thread_ = std::thread([this] { Loop(); });
}

bool Reaper::Running() {
  MutexLock lock(&loop_mu_);
  return thread_.joinable() && !stopping_;
}

void Reaper::Wake() {
  {
    MutexLock lock(&loop_mu_);
    wake_ = true;
  }
  loop_cv_.NotifyAll();
}

void Reaper::Stop() {
  {
    MutexLock lock(&loop_mu_);
    if (stopping_ || !thread_.joinable()) return;
    stopping_ = true;
  }
  loop_cv_.NotifyAll();
  thread_.join();
}

void Reaper::Loop() {
  while (true) {
    {
      MutexLock lock(&loop_mu_);
      loop_cv_.WaitFor(&loop_mu_, options_.check_interval,
                       [this]()
                           ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_mu_) { return wake_ || stopping_; });
      if (stopping_) return;
      wake_ = false;
    }
    Pass();
  }
}

void Reaper::Pass() {
  struct Work {
    AttemptTable::Key key;
    ProcessSelector selector;
    int signal;              // 0: only look
    bool workloads = false;  // the selector holds the workloads only (a graceful stop)
  };
  launcher_.ReportCheckpoints();
  launcher_.PollInSessionChecks();
  std::vector<Work> work;
  {
    MutexLock lock(&table_.mu());
    const auto now = table_.Now();
    for (auto& [key, a] : table_.attempts()) {
      if (!a->teardown) {
        for (const auto& [rank, pid] : a->gang.RunningPids()) {
          if (!ProcessAlive(pid)) table_.Apply(*a, a->gang.OnVanished(rank));
        }
      }
      if (!a->teardown || a->quiet) continue;
      const TeardownStep step = NextTeardownStep(a->stop, now, options_.kill_grace);
      if (step.target == TeardownStep::Target::kWorkloads) {
        // A graceful stop (a preemption): SIGTERM reaches the workloads alone, so that
        // mpirun and orted do not tear the ranks down under them, and they get the whole
        // grace to checkpoint. Then the usual teardown for whatever is left.
        ProcessSelector workloads = table_.Selector(*a);
        workloads.sessions.clear();
        workloads.env_names = {"RINGMASTER_RANK"};
        work.push_back({key, std::move(workloads), step.signal, true});
        continue;
      }
      if (step.after_clean_exit_wait) {
        RM_LOG(kWarning) << "job " << key.first << " attempt " << key.second
                         << ": processes still running " << options_.clean_exit_wait.count()
                         << " ms after every rank here exited 0; sending SIGTERM";
      }
      // No signal: only look; the attempt is done once its processes exited by themselves.
      work.push_back({key, table_.Selector(*a), step.signal});
    }
    std::set<std::string> held_jobs;
    for (const auto& [key, a] : table_.attempts()) held_jobs.insert(key.first);
    metrics_.RemoveExpired(now, held_jobs);
  }
  // /proc scans without the lock: RPCs must not wait for them.
  std::vector<std::pair<AttemptTable::Key, size_t>> remaining;
  std::vector<AttemptTable::Key> workloads_gone;
  for (const Work& w : work) {
    if (w.workloads) {
      const int n = w.signal != 0 ? SignalProcesses(w.selector, w.signal)
                                  : static_cast<int>(FindProcesses(w.selector).size());
      if (n == 0) workloads_gone.push_back(w.key);
      continue;
    }
    const size_t n = w.signal != 0 ? static_cast<size_t>(SignalProcesses(w.selector, w.signal))
                                   : FindProcesses(w.selector).size();
    if (w.signal == SIGKILL && n > 0) {
      RM_LOG(kWarning) << "job " << w.key.first << " attempt " << w.key.second << ": " << n
                       << " processes outlived SIGTERM by " << options_.kill_grace.count()
                       << " ms; sent SIGKILL";
    }
    remaining.emplace_back(w.key, n);
  }
  std::vector<std::thread> finished;
  std::vector<std::string> containers;  // of forgotten attempts, removed without the lock
  {
    MutexLock lock(&table_.mu());
    for (const AttemptTable::Key& key : workloads_gone) {
      auto it = table_.attempts().find(key);
      if (it != table_.attempts().end()) WorkloadsGone(it->second->stop);
    }
    for (const auto& [key, n] : remaining) {
      auto it = table_.attempts().find(key);
      if (it == table_.attempts().end() || n > 0 || it->second->in_flight > 0) continue;
      AttemptRecord& a = *it->second;
      if (!a.forget) {
        // Everything here ended; the record waits for StopJob, which needs every rank here
        // reported, including those whose wrapper died before it could tell.
        table_.Apply(a, a.gang.OnTornDown(StrongestSignalSent(a.stop)));
        a.quiet = true;
        continue;
      }
      RM_LOG(kInfo) << "job " << key.first << " attempt " << key.second
                    << ": nothing left here; forgotten";
      // Tell the scheduler this attempt's ranks here are gone: a preempted attempt holds its
      // GPUs until they are (it ignores reports of attempts it has moved on from otherwise).
      for (const auto& r : a.assignment.placement) {
        if (r.worker_id != table_.worker_id()) continue;
        table_.Push({key.first,
                     key.second,
                     r.rank,
                     RankStatus::Kind::kExited,
                     0,
                     SIGTERM,
                     "stopped: nothing of the attempt is left on this worker",
                     0,
                     0,
                     {},
                     std::nullopt,
                     ""});
      }
      if (a.launcher_thread.joinable()) finished.push_back(std::move(a.launcher_thread));
      // Each container ends with its rank (--rm); this removes one whose runtime was killed.
      if (a.assignment.image && !options_.container_runtime.empty()) {
        for (const auto& r : a.assignment.placement) {
          if (r.worker_id != table_.worker_id()) continue;
          containers.push_back(RankContainerName(key.first, key.second, r.rank));
        }
      }
      std::error_code ignored;
      std::filesystem::remove_all(layout_.SessionBase(key.first, key.second), ignored);
      master_ports_.Release(absl::StrCat(key.first, "/", key.second));
      metrics_.ExpireJobAt(key.first, table_.Now() + options_.metrics_retention);
      table_.attempts().erase(it);
    }
    table_.UpdateGauges();
  }
  for (std::thread& t : finished) t.join();
  std::string why;
  if (!RemoveContainers(options_.container_runtime, options_.runtime_env, containers, &why)) {
    RM_LOG(kWarning) << "cannot remove containers " << absl::StrJoin(containers, ", ") << ": "
                     << why;
  }
}

}  // namespace ringmaster::worker
