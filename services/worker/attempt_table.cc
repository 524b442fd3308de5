#include "attempt_table.h"

#include <unistd.h>

#include <csignal>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "core/auth.h"

namespace ringmaster::worker {

std::string ExitText(const ExitInfo& info) {
  return info.signal != 0 ? absl::StrCat("signal ", info.signal)
                          : absl::StrCat("code ", info.exit_code);
}

AttemptTable::AttemptTable(std::string worker_id, std::chrono::milliseconds clean_exit_wait,
                           AgentMetrics& metrics, std::function<Clock::time_point()> now,
                           std::function<void()> wake)
    : worker_id_(std::move(worker_id)),
      clean_exit_wait_(clean_exit_wait),
      metrics_(metrics),
      now_(std::move(now)),
      wake_(std::move(wake)) {}

absl::StatusOr<AttemptRecord*> AttemptTable::Authorize(const std::string& job_id, int32_t attempt,
                                                       const std::string& token) {
  auto it = attempts_.find({job_id, attempt});
  if (it == attempts_.end() || it->second->forget) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " attempt ", attempt,
                                            " is not placed on worker ", worker_id_));
  }
  const Assignment& held = it->second->assignment;
  if (RoleOfToken(token, held.token, held.check_token, it->second->check_over) != TokenRole::kJob) {
    return absl::PermissionDeniedError(
        absl::StrCat("wrong or missing token for job ", job_id, " attempt ", attempt));
  }
  return it->second.get();
}

void AttemptTable::Apply(AttemptRecord& attempt, const GangState::Decision& decision) {
  for (const RankStatus& s : decision.reports) {
    if (s.kind != RankStatus::Kind::kStarted) {
      const bool ok = s.kind == RankStatus::Kind::kExited && s.exit_code == 0 && s.signal == 0;
      const std::string line =
          absl::StrCat("job ", s.job_id, " attempt ", s.attempt, " rank ", s.rank, ": ",
                       s.kind == RankStatus::Kind::kLaunchFailed
                           ? "launch failed"
                           : absl::StrCat("exited with ", ExitText({s.exit_code, s.signal})),
                       s.message.empty() ? "" : ": ", s.message);
      if (ok) {
        RM_LOG(kInfo) << line;
      } else {
        RM_LOG(kWarning) << line;
      }
      metrics_.CountRankExit(ok);
    }
    outbox_.push_back(s);
  }
  if (!decision.reports.empty()) outbox_cv_.NotifyAll();
  if (decision.stop_local) {
    BeginTeardown(attempt, decision.why.empty() ? "a rank failed on this worker" : decision.why);
  }
  UpdateGauges();
}

void AttemptTable::BeginTeardown(AttemptRecord& attempt, const std::string& why, bool normal_end,
                                 std::optional<std::chrono::milliseconds> workload_grace) {
  if (!attempt.teardown) {
    const bool wait_for_clean_exit = normal_end && attempt.gang.AllSucceeded();
    RM_LOG(kInfo) << "job " << attempt.assignment.job_id << " attempt "
                  << attempt.assignment.attempt << ": stopping its processes here (" << why << ")"
                  << (wait_for_clean_exit ? "; every rank here exited 0, so mpirun and orted "
                                            "may finish first"
                                          : "");
    attempt.teardown = true;
    attempt.gang.MarkStopping(why);
    attempt.stop = worker::StartTeardown(
        now_(), wait_for_clean_exit ? clean_exit_wait_ : std::chrono::milliseconds(0));
  } else if (!normal_end) {
    // A failure here or the worker's shutdown during the wait for a clean exit: stop now.
    HastenTeardown(attempt.stop, now_());
  }
  if (workload_grace) attempt.stop.workload_grace = workload_grace;
  attempt.quiet = false;
  wake_();
}

ProcessSelector AttemptTable::Selector(const AttemptRecord& attempt) const {
  ProcessSelector selector;
  selector.sessions = attempt.sessions;
  selector.env_tags = {{kWorkerIdEnv, worker_id_},
                       {kJobIdEnv, attempt.assignment.job_id},
                       {kAttemptEnv, absl::StrCat(attempt.assignment.attempt)}};
  // Older processes' environments are not read (a /proc scan per attempt in teardown read every
  // process's). Two seconds of slack for the rounding of the two clocks.
  const uint64_t slack = 2 * static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  selector.env_started_since_ticks =
      attempt.assigned_ticks > slack ? attempt.assigned_ticks - slack : 0;
  return selector;
}

void AttemptTable::SendCheck(const AttemptRecord& attempt, CheckReport& report) {
  const Assignment& assignment = attempt.assignment;
  report.job_id = assignment.job_id;
  report.attempt = assignment.attempt;
  // Only a worker of the placement can be blamed (and avoided); the scheduler checks the same.
  const bool culprit_placed =
      std::any_of(assignment.placement.begin(), assignment.placement.end(),
                  [&](const RankPlacement& r) { return r.worker_id == report.culprit_worker_id; });
  if (!culprit_placed) report.culprit_worker_id.clear();
  RM_LOG(kInfo) << "job " << report.job_id << " attempt " << report.attempt << ": pre-run check"
                << (report.in_session ? " in MPI_Init " : " ")
                << (report.passed ? "passed" : "failed") << ", busbw " << report.busbw_gbps
                << " GB/s in " << report.seconds << " s" << (report.message.empty() ? "" : ": ")
                << report.message;
  RankStatus status;
  status.job_id = report.job_id;
  status.attempt = report.attempt;
  status.kind = RankStatus::Kind::kChecked;
  status.check = report;
  outbox_.push_back(std::move(status));
  outbox_cv_.NotifyAll();
}

void AttemptTable::Push(RankStatus status) {
  outbox_.push_back(std::move(status));
  outbox_cv_.NotifyAll();
}

void AttemptTable::UpdateGauges() {
  int assigned = 0, running = 0, ended = 0;
  for (const auto& [key, a] : attempts_) {
    for (const HeldRank& h : a->gang.Held()) {
      switch (a->gang.phase(h.rank)) {
        case GangState::Phase::kAssigned:
          ++assigned;
          break;
        case GangState::Phase::kStarted:
          ++running;
          break;
        default:
          ++ended;
          break;
      }
    }
  }
  metrics_.SetHeld(assigned, running, ended, attempts_.size());
}

std::vector<HeldRank> AttemptTable::TakeRegistration() {
  MutexLock lock(&mu_);
  outbox_.clear();
  std::vector<HeldRank> held;
  for (const auto& [key, a] : attempts_) {
    a->checkpoint_sent.reset();  // the new session hears the newest checkpoint again
    for (HeldRank h : a->gang.Held()) {
      // A stopped attempt is listed only while its ranks are still exiting (a preemption's
      // grace): a scheduler that restarted meanwhile must not hand their GPUs out yet.
      if (a->forget && h.exited) continue;
      h.stopping = a->forget;
      for (const RankPlacement& p : a->assignment.placement) {
        if (p.rank == h.rank) h.gpu_indices = p.gpu_indices;
      }
      held.push_back(std::move(h));
    }
  }
  return held;
}

std::vector<RankStatus> AttemptTable::NextStatuses(size_t max, std::chrono::milliseconds timeout) {
  std::vector<RankStatus> out;
  MutexLock lock(&mu_);
  if (!outbox_cv_.WaitFor(&mu_, timeout,
                          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !outbox_.empty(); })) {
    return out;
  }
  while (!outbox_.empty() && out.size() < max) {
    const bool checked = outbox_.front().kind == RankStatus::Kind::kChecked;
    if (checked && !out.empty()) break;
    out.push_back(std::move(outbox_.front()));
    outbox_.pop_front();
    if (checked) break;
  }
  return out;
}

}  // namespace ringmaster::worker
