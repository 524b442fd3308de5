#include "agent.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "check_runner.h"
#include "common/checkpoint_metadata.h"
#include "common/job_token.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "core/assignment.h"
#include "core/auth.h"
#include "core/launch.h"
#include "core/run_as.h"
#include "core/teardown.h"
#include "host/file_io.h"

namespace ringmaster::worker {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kLauncherTail = 1500;

std::string ExitText(const ExitInfo& info) {
  return info.signal != 0 ? absl::StrCat("signal ", info.signal)
                          : absl::StrCat("code ", info.exit_code);
}

// The tail of mpirun's output for a failure message; a log that cannot be read says why.
std::string LauncherTail(const std::string& path) {
  absl::StatusOr<std::string> tail = ReadFileTail(path, kLauncherTail);
  if (!tail.ok()) return absl::StrCat("(mpirun's output is unreadable: ", tail.status().message(), ")");
  return *std::move(tail);
}

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

// Creates `dir` and, for an attempt that runs as a team's user, gives it to that user (mode
// 0700): the session and checkpoint directories its processes write, closed to other teams.
absl::Status MakeDirsFor(const std::optional<UnixUser>& user, const std::string& dir) {
  RM_RETURN_IF_ERROR(MakeDirs(dir));
  return user ? HandDirectoryTo(dir, *user, 0700) : absl::OkStatus();
}

// An attempt's log directory. For a team's user it stays root's with mode 0711: the ranks
// open their own (pre-created) logs there, but cannot list, read or replace anything else,
// mpirun.log (every rank's output) included.
absl::Status MakeAttemptDir(const std::optional<UnixUser>& user, const std::string& dir) {
  RM_RETURN_IF_ERROR(MakeDirs(dir));
  if (user && chmod(dir.c_str(), 0711) != 0) {
    return absl::InternalError(absl::StrCat("cannot chmod ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

// One job attempt this worker holds.
struct Agent::Attempt {
  Attempt(Assignment a, std::vector<int32_t> local_ranks)
      : assignment(std::move(a)),
        gang(assignment.job_id, assignment.attempt, std::move(local_ranks)) {}

  const Assignment assignment;  // never changes; readable without the lock
  // Whom its processes run as (--run-as); none: the worker's own user. Set once, at the
  // assignment, before anything reads it.
  std::optional<UnixUser> user;
  GangState gang;
  ProgressForwarder progress;        // which progress reports go on to the scheduler
  std::vector<int32_t> mpi_to_rank;  // placed rank of each MPI rank
  bool launcher = false;
  // Sessions started for the attempt (mpirun, Exec'd commands): everything in them is its.
  std::set<pid_t> sessions;
  // Launcher thread and Exec calls still working with this record; it is not erased before
  // they are done.
  int in_flight = 0;
  // StopJob arrived: erase once nothing of it runs.
  bool forget = false;
  // Teardown: started (`stop` says what was sent when); finished (nothing left).
  bool teardown = false;
  bool quiet = false;
  Teardown stop;
  std::thread launcher_thread;
  // Launcher only: the checkpoint.meta last reported, and the last complaint about it.
  std::optional<CheckpointMetadata> checkpoint_sent;
  std::string checkpoint_error;
  // Launcher only: an in-session check not yet reported, and when to stop waiting for it.
  std::optional<Clock::time_point> precheck_deadline;
  // An Exec with the job's own token arrived: the job's mpirun runs, so the pre-run check's
  // is over, and its token (assignment.check_token) is no longer taken.
  bool check_over = false;
};

Agent::Agent(AgentOptions options, prometheus::Registry* registry)
    : options_(std::move(options)),
      metrics_(registry, options_.inventory),
      layout_{.log_dir = options_.log_dir,
              .session_root = options_.mpi_tmpdir.empty() ? DefaultSessionRoot(geteuid())
                                                          : options_.mpi_tmpdir,
              .session_suffix = SessionSuffix(options_.inventory.worker_id),
              .checkpoint_root = options_.checkpoint_root},
      log_reader_(layout_, options_.inventory.worker_id,
                  [this](const std::string& job_id, int32_t attempt, int32_t rank) {
                    return RankMayWrite(job_id, attempt, rank);
                  }),
      // Rank 0 listens where mpirun runs: on this worker's address.
      master_ports_(options_.master_port_first, options_.master_port_last,
                    options_.inventory.address.find_first_not_of("0123456789.") ==
                            std::string::npos
                        ? options_.inventory.address
                        : "0.0.0.0") {
  // Children get a clean slate: our own RINGMASTER_* settings (flag fallbacks) would leak into
  // programs that read the same names (ringmaster-train's flags do).
  for (auto& [name, value] : CurrentEnvironment()) {
    if (name.rfind("RINGMASTER_", 0) != 0) env_options_.base.emplace(name, value);
  }
  env_options_.worker_id = options_.inventory.worker_id;
  SetPort(options_.inventory.port);
  env_options_.check_delay_ms = options_.check_delay_ms;
  env_options_.tls_env = options_.tls_env;
  for (const auto& [name, value] : options_.tls_env) {
    if (name == kTlsCaEnv || name == kInsecureEnv) env_options_.team_tls_env[name] = value;
  }
  env_options_.agent_socket = options_.agent_socket;
}

Agent::~Agent() { Shutdown(); }

void Agent::SetPort(int32_t port) {
  options_.inventory.port = port;
  env_options_.agent_addr = absl::StrCat(options_.inventory.address, ":", port);
}

void Agent::Start() {
  ProcessSelector leftovers;
  leftovers.env_tags = {{kWorkerIdEnv, options_.inventory.worker_id}};
  leftovers.env_names = {kJobIdEnv};
  if (int n = SignalProcesses(leftovers, SIGKILL); n > 0) {
    RM_LOG(kWarning) << "killed " << n << " processes left by an earlier run of worker "
                     << options_.inventory.worker_id;
  }
  // Session directories of attempts an earlier life did not get to forget.
  // opendir/readdir rather than a directory_iterator, whose increment throws on a read error.
  if (DIR* dir = opendir(layout_.session_root.c_str())) {
    std::vector<std::string> stale;
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (layout_.IsOwnSessionBase(name)) {
        stale.push_back(absl::StrCat(layout_.session_root, "/", name));
      }
    }
    closedir(dir);
    for (const std::string& path : stale) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  }
  housekeeping_ = std::thread([this] { Housekeeping(); });
}

void Agent::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    if (stopping_ || !housekeeping_.joinable()) return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, a] : attempts_) {
      a->forget = true;
      StartTeardownLocked(*a, "worker shutting down");
    }
  }
  const auto deadline = Clock::now() + options_.kill_grace + std::chrono::seconds(2);
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (attempts_.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  housekeeping_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, a] : attempts_) {
      (void)SignalProcesses(SelectorLocked(*a), SIGKILL);
      if (a->launcher_thread.joinable()) threads.push_back(std::move(a->launcher_thread));
    }
  }
  for (std::thread& t : threads) t.join();
}

// ---------------------------------------------------------------------------------------------
// Scheduler side.

void Agent::OnAssignment(const Assignment& assignment) {
  // The job id names log directories: refuse what could leave them.
  if (!IsSafeJobId(assignment.job_id)) {
    RM_LOG(kWarning) << "assignment with a malformed job id ignored";
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const Key key{assignment.job_id, assignment.attempt};
  std::vector<HeldAttempt> held;
  for (const auto& [k, a] : attempts_) held.push_back({k.first, k.second, a->forget});
  const AssignmentPlan plan = PlanAssignment(assignment, options_.inventory.worker_id, held);
  if (plan.repeat) return;
  for (int32_t older : plan.superseded) {
    Attempt& a = *attempts_.at({assignment.job_id, older});
    a.forget = true;
    StartTeardownLocked(a, absl::StrCat("superseded by attempt ", assignment.attempt));
  }
  const std::vector<int32_t>& local = plan.local_ranks;
  if (local.empty()) {
    RM_LOG(kWarning) << "assignment of " << assignment.job_id << " attempt " << assignment.attempt
                     << " places nothing on this worker; ignored";
    return;
  }
  auto owned = std::make_unique<Attempt>(assignment, local);
  Attempt* a = owned.get();
  attempts_[key] = std::move(owned);
  absl::Status valid = ValidatePlacement(assignment.placement);
  if (valid.ok()) a->mpi_to_rank = PlacedRankOfMpiRank(GangHosts(assignment.placement));
  if (valid.ok()) {
    absl::StatusOr<std::optional<UnixUser>> user = UserOfAttempt(
        options_.team_users, options_.default_user, assignment.team, options_.inventory.worker_id);
    if (user.ok()) {
      a->user = *std::move(user);
    } else {
      valid = user.status();
    }
  }
  a->launcher = plan.launcher;
  RM_LOG(kInfo) << "job " << assignment.job_id << " attempt " << assignment.attempt << ": ranks "
                << absl::StrJoin(local, ",") << " placed here" << (a->launcher ? " (launcher)" : "")
                << (a->user
                        ? absl::StrCat(", as uid ", a->user->uid, " (team '", assignment.team, "')")
                        : "");
  if (!valid.ok()) {
    ApplyLocked(*a, a->gang.OnLaunchFailed(std::string(valid.message())));
  } else if (a->launcher) {
    ++a->in_flight;
    a->launcher_thread = std::thread([this, a] { Launch(a); });
  }
  UpdateGaugesLocked();
  assignments_cv_.notify_all();
}

void Agent::OnStop(const std::string& job_id, int32_t attempt, const std::string& reason,
                   std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = attempts_.find({job_id, attempt});
  if (it == attempts_.end()) return;
  RM_LOG(kInfo) << "job " << job_id << " attempt " << attempt << ": stop (" << reason << ")";
  it->second->forget = true;
  StartTeardownLocked(*it->second, reason, /*normal_end=*/true,
                      grace.count() > 0 ? std::optional(grace) : std::nullopt);
}

std::vector<HeldRank> Agent::TakeRegistration() {
  std::lock_guard<std::mutex> lock(mu_);
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

std::vector<RankStatus> Agent::NextStatuses(size_t max, std::chrono::milliseconds timeout) {
  std::vector<RankStatus> out;
  std::unique_lock<std::mutex> lock(mu_);
  if (!outbox_cv_.wait_for(lock, timeout, [&] { return !outbox_.empty(); })) return out;
  while (!outbox_.empty() && out.size() < max) {
    const bool checked = outbox_.front().kind == RankStatus::Kind::kChecked;
    if (checked && !out.empty()) break;
    out.push_back(std::move(outbox_.front()));
    outbox_.pop_front();
    if (checked) break;
  }
  return out;
}

void Agent::SetSchedulerConnected(bool connected) {
  metrics_.SetSchedulerConnected(connected);
}

void Agent::ApplyLocked(Attempt& attempt, const GangState::Decision& decision) {
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
  if (!decision.reports.empty()) outbox_cv_.notify_all();
  if (decision.stop_local) {
    StartTeardownLocked(attempt,
                        decision.why.empty() ? "a rank failed on this worker" : decision.why);
  }
  UpdateGaugesLocked();
}

void Agent::StartTeardownLocked(Attempt& attempt, const std::string& why, bool normal_end,
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
    attempt.stop = StartTeardown(
        Now(), wait_for_clean_exit ? options_.clean_exit_wait : std::chrono::milliseconds(0));
  } else if (!normal_end) {
    // A failure here or the worker's shutdown during the wait for a clean exit: stop now.
    HastenTeardown(attempt.stop, Now());
  }
  if (workload_grace) attempt.stop.workload_grace = workload_grace;
  attempt.quiet = false;
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    wake_ = true;
  }
  loop_cv_.notify_all();
}

ProcessSelector Agent::SelectorLocked(const Attempt& attempt) const {
  ProcessSelector selector;
  selector.sessions = attempt.sessions;
  selector.env_tags = {{kWorkerIdEnv, options_.inventory.worker_id},
                       {kJobIdEnv, attempt.assignment.job_id},
                       {kAttemptEnv, absl::StrCat(attempt.assignment.attempt)}};
  return selector;
}

void Agent::ReportCheckpoints() {
  if (options_.checkpoint_root.empty()) return;
  std::vector<Key> launched;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, a] : attempts_) {
      if (a->launcher) launched.push_back(key);
    }
  }
  // The files are read without the lock: RPCs must not wait for the disk.
  std::vector<std::pair<Key, absl::StatusOr<CheckpointMetadata>>> read;
  for (const Key& key : launched) {
    read.emplace_back(key, ReadCheckpointMetadata(layout_.CheckpointDir(key.first)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  bool queued = false;
  for (auto& [key, meta] : read) {
    auto it = attempts_.find(key);
    if (it == attempts_.end()) continue;
    Attempt& a = *it->second;
    if (!meta.ok()) {
      const std::string why(meta.status().message());
      if (meta.status().code() != absl::StatusCode::kNotFound && why != a.checkpoint_error) {
        RM_LOG(kWarning) << "job " << key.first << ": " << why;
      }
      a.checkpoint_error = why;
      continue;
    }
    if (a.checkpoint_sent && a.checkpoint_sent->step == meta->step &&
        a.checkpoint_sent->time_ms == meta->time_ms) {
      continue;
    }
    a.checkpoint_sent = *meta;
    RankStatus s;
    s.job_id = key.first;
    s.attempt = key.second;
    s.rank = 0;
    s.kind = RankStatus::Kind::kCheckpoint;
    s.checkpoint_step = meta->step;
    s.checkpoint_time_ms = meta->time_ms;
    outbox_.push_back(std::move(s));
    queued = true;
  }
  if (queued) outbox_cv_.notify_all();
}

void Agent::Housekeeping() {
  struct Work {
    Key key;
    ProcessSelector selector;
    int signal;  // 0: only look
    bool workloads = false;  // the selector holds the workloads only (a graceful stop)
  };
  while (true) {
    {
      std::unique_lock<std::mutex> lock(loop_mu_);
      loop_cv_.wait_for(lock, options_.check_interval, [this] { return wake_ || stopping_; });
      if (stopping_) return;
      wake_ = false;
    }
    ReportCheckpoints();
    PollInSessionChecks();
    std::vector<Work> work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto now = Now();
      for (auto& [key, a] : attempts_) {
        if (!a->teardown) {
          for (const auto& [rank, pid] : a->gang.RunningPids()) {
            if (!ProcessAlive(pid)) ApplyLocked(*a, a->gang.OnVanished(rank));
          }
        }
        if (!a->teardown || a->quiet) continue;
        const TeardownStep step = NextTeardownStep(a->stop, now, options_.kill_grace);
        if (step.target == TeardownStep::Target::kWorkloads) {
          // A graceful stop (a preemption): SIGTERM reaches the workloads alone, so that
          // mpirun and orted do not tear the ranks down under them, and they get the whole
          // grace to checkpoint. Then the usual teardown for whatever is left.
          ProcessSelector workloads = SelectorLocked(*a);
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
        work.push_back({key, SelectorLocked(*a), step.signal});
      }
      std::set<std::string> held_jobs;
      for (const auto& [key, a] : attempts_) held_jobs.insert(key.first);
      metrics_.RemoveExpired(now, held_jobs);
    }
    // /proc scans without the lock: RPCs must not wait for them.
    std::vector<std::pair<Key, size_t>> remaining;
    std::vector<Key> workloads_gone;
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const Key& key : workloads_gone) {
        auto it = attempts_.find(key);
        if (it != attempts_.end()) WorkloadsGone(it->second->stop);
      }
      for (const auto& [key, n] : remaining) {
        auto it = attempts_.find(key);
        if (it == attempts_.end() || n > 0 || it->second->in_flight > 0) continue;
        Attempt& a = *it->second;
        if (!a.forget) {
          // Everything here ended; the record waits for StopJob, which needs every rank here
          // reported, including those whose wrapper died before it could tell.
          ApplyLocked(a, a.gang.OnTornDown(StrongestSignalSent(a.stop)));
          a.quiet = true;
          continue;
        }
        RM_LOG(kInfo) << "job " << key.first << " attempt " << key.second
                      << ": nothing left here; forgotten";
        // Tell the scheduler this attempt's ranks here are gone: a preempted attempt holds its
        // GPUs until they are (it ignores reports of attempts it has moved on from otherwise).
        for (const auto& r : a.assignment.placement) {
          if (r.worker_id != options_.inventory.worker_id) continue;
          outbox_.push_back({key.first, key.second, r.rank, RankStatus::Kind::kExited, 0, SIGTERM,
                             "stopped: nothing of the attempt is left on this worker", 0, 0, {},
                             std::nullopt});
        }
        outbox_cv_.notify_all();
        if (a.launcher_thread.joinable()) finished.push_back(std::move(a.launcher_thread));
        std::error_code ignored;
        std::filesystem::remove_all(layout_.SessionBase(key.first, key.second), ignored);
        master_ports_.Release(absl::StrCat(key.first, "/", key.second));
        metrics_.ExpireJobAt(key.first, Now() + options_.metrics_retention);
        attempts_.erase(it);
      }
      UpdateGaugesLocked();
    }
    for (std::thread& t : finished) t.join();
  }
}

// ---------------------------------------------------------------------------------------------
// Launch (runs on the attempt's launcher thread; in_flight counts it).

void Agent::Launch(Attempt* a) {
  const Assignment& assignment = a->assignment;
  const std::string dir = layout_.AttemptDir(assignment.job_id, assignment.attempt);
  const std::string hostfile = dir + "/hostfile";
  const std::string log_path = dir + "/mpirun.log";
  auto fail = [&](const absl::Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.CountLaunch("failed");
    ApplyLocked(*a, a->gang.OnLaunchFailed(std::string(why.message())));
    --a->in_flight;
  };

  const std::vector<GangHost> hosts = GangHosts(assignment.placement);
  absl::StatusOr<std::vector<std::string>> workload =
      WorkloadArgv(assignment, options_.train_binary);
  if (!workload.ok()) return fail(workload.status());
  if (auto s = MakeAttemptDir(a->user, dir); !s.ok()) return fail(s);
  if (auto s = WriteFileAtomically(hostfile, HostfileText(hosts)); !s.ok()) return fail(s);
  // mpirun's own Open MPI session directory (see WorkerLayout); TMPDIR, unlike
  // orte_tmpdir_base, is not passed on to the orteds.
  const std::string session_dir = layout_.SessionBase(assignment.job_id, assignment.attempt) + "/mpirun";
  if (auto s = MakeDirsFor(a->user, session_dir); !s.ok()) return fail(s);
  // MASTER_PORT must be free where rank 0 runs: here. Held until the attempt is forgotten.
  const std::string& address = options_.inventory.address;
  absl::StatusOr<int> master_port =
      master_ports_.Acquire(absl::StrCat(assignment.job_id, "/", assignment.attempt));
  if (!master_port.ok()) return fail(master_port.status());

  MpirunOptions mpirun;
  mpirun.mpirun = options_.mpirun;
  mpirun.hostfile_path = hostfile;
  mpirun.rsh_agent = options_.rsh_agent;
  mpirun.rank_binary = options_.rank_binary;
  mpirun.mpi_interface = ResolveMpiInterface(options_.mpi_interface, address);
  mpirun.allow_run_as_root = geteuid() == 0 && !a->user;
  mpirun.extra_args = options_.mpirun_args;
  mpirun.abort_on_rank_failure = false;
  SpawnOptions spawn;
  spawn.argv = MpirunArgv(mpirun, static_cast<int32_t>(assignment.placement.size()), *workload);
  spawn.env = MpirunEnvironment(ChildEnvironment(*a), assignment, hosts, *master_port);
  spawn.user = a->user;
  spawn.env["TMPDIR"] = session_dir;
  if (assignment.run_check && ChecksInSession(assignment)) {
    // The ranks run the check in their MPI_Init; a result left by nothing must not be read.
    if (a->user) {
      if (auto s = MakeDirsFor(a->user, dir + "/check"); !s.ok()) return fail(s);
    }
    unlink(CheckResultPath(*a).c_str());
    std::lock_guard<std::mutex> lock(mu_);
    a->precheck_deadline = Now() + options_.check_timeout;
  } else if (assignment.run_check &&
             !CheckBeforeLaunch(a, mpirun, spawn.env, session_dir, hosts, *master_port)) {
    return;
  }
  spawn.new_session = true;
  spawn.parent_death_signal = SIGKILL;  // this thread waits for mpirun for its whole life
  spawn.output_fd =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, a->user ? 0600 : 0644);
  if (spawn.output_fd < 0) {
    return fail(
        absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", std::strerror(errno))));
  }
  pid_t pid = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (a->teardown) {
      close(spawn.output_fd);
      --a->in_flight;
      return;
    }
    absl::StatusOr<Spawned> spawned = Spawn(spawn);
    close(spawn.output_fd);
    if (!spawned.ok()) {
      metrics_.CountLaunch("failed");
      ApplyLocked(*a, a->gang.OnLaunchFailed(std::string(spawned.status().message())));
      --a->in_flight;
      return;
    }
    pid = spawned->pid;
    a->sessions.insert(pid);
    metrics_.CountLaunch("started");
  }
  RM_LOG(kInfo) << "job " << assignment.job_id << " attempt " << assignment.attempt
                << ": mpirun (pid " << pid << ") " << DescribeLaunch(spawn.argv, spawn.env);
  const ExitInfo info = WaitForExit(pid);
  const std::string tail = LauncherTail(log_path);
  RM_LOG(kInfo) << "job " << assignment.job_id << " attempt " << assignment.attempt
                << ": mpirun ended with " << ExitText(info);
  std::lock_guard<std::mutex> lock(mu_);
  ApplyLocked(*a, a->gang.OnLauncherExited(info.exit_code, info.signal, tail));
  --a->in_flight;  // last touch of `a`
}

bool Agent::CheckBeforeLaunch(Attempt* a, const MpirunOptions& mpirun,
                              const std::map<std::string, std::string>& env,
                              const std::string& session_dir, const std::vector<GangHost>& hosts,
                              int32_t master_port) {
  const Assignment& assignment = a->assignment;
  const std::string dir = layout_.AttemptDir(assignment.job_id, assignment.attempt);
  CheckRun run;
  MpirunOptions check = mpirun;
  check.rank_binary = options_.check_binary;
  check.abort_on_rank_failure = true;
  auto fail = [&](const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    ApplyLocked(*a, a->gang.OnLaunchFailed(std::string(s.message())));
    --a->in_flight;
    return false;
  };
  // With a check token the check runs as the worker's own user: no process of the team (which
  // runs as the team's user with --run-as) can signal, trace or feed it, or touch its result
  // in the attempt's directory, which is root's. Without one (an older scheduler), as before.
  const bool as_worker = !assignment.check_token.empty();
  if (as_worker) {
    check.allow_run_as_root = geteuid() == 0;
    run.result_path = dir + "/check.result";
    run.spawn.env =
        MpirunEnvironment(ChildEnvironment(*a, /*as_worker=*/true), assignment, hosts, master_port);
    run.spawn.env[kTokenEnv] = assignment.check_token;
    const std::string check_session =
        layout_.SessionBase(assignment.job_id, assignment.attempt) + "/check-mpirun";
    if (auto s = MakeDirsFor(std::nullopt, check_session); !s.ok()) return fail(s);
    run.spawn.env["TMPDIR"] = check_session;
    unlink(run.result_path.c_str());
  } else {
    run.result_path = CheckResultPath(*a);
    // ringmaster-check (rank 0, the team's user) writes the result by a rename: into a
    // directory of its own, as the attempt's directory is root's.
    if (a->user) {
      if (auto s = MakeDirsFor(a->user, dir + "/check"); !s.ok()) return fail(s);
    }
    run.spawn.env = env;
    run.spawn.env["TMPDIR"] = session_dir;
    run.spawn.user = a->user;
  }
  run.log_path = dir + "/check.log";
  run.spawn.argv = MpirunArgv(check, static_cast<int32_t>(assignment.placement.size()),
                              {"--result", run.result_path});
  run.timeout = options_.check_timeout;
  run.policy = assignment.check_policy;
  CheckReport report = RunCheck(
      run,
      [&](pid_t pid) {
        std::lock_guard<std::mutex> lock(mu_);
        if (a->teardown) return false;
        a->sessions.insert(pid);
        return true;
      },
      [&](pid_t pid) {
        std::lock_guard<std::mutex> lock(mu_);
        a->sessions.erase(pid);
      });
  std::lock_guard<std::mutex> lock(mu_);
  if (a->teardown) {
    --a->in_flight;
    return false;
  }
  SendCheckLocked(*a, report);
  // A passed check, or a slow ring with no one worker to blame, runs the job. A named culprit
  // waits for the scheduler to re-place the attempt (its StopJob follows). A check that could
  // not run is the attempt's launch failure.
  if (report.passed || (report.completed && report.culprit_worker_id.empty())) return true;
  if (!report.culprit_worker_id.empty()) {
    --a->in_flight;
    return false;
  }
  metrics_.CountLaunch("failed");
  ApplyLocked(*a, a->gang.OnLaunchFailed(absl::StrCat("pre-run check: ", report.message)));
  --a->in_flight;
  return false;
}

void Agent::PollInSessionChecks() {
  struct Pending {
    Key key;
    std::string path;
    bool expired;
  };
  std::vector<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Now();
    for (const auto& [key, a] : attempts_) {
      if (!a->precheck_deadline || a->teardown) continue;
      pending.push_back({key, CheckResultPath(*a), now >= *a->precheck_deadline});
    }
  }
  for (const Pending& p : pending) {
    // With --run-as the result's directory is the team user's: read it as a plain file.
    absl::StatusOr<std::string> text = ReadRegularFile(p.path, 64 << 10);
    if (!text.ok() && !p.expired) continue;  // not written yet
    CheckReport report;
    if (text.ok()) {
      absl::StatusOr<CheckReport> parsed = ParseCheckResult(*text);
      if (parsed.ok()) {
        report = *std::move(parsed);
      } else {
        report.message = std::string(parsed.status().message());
      }
    } else {
      report.message = absl::StrCat("the job's ranks wrote no check result within ",
                                    options_.check_timeout.count(), " ms of its launch (",
                                    text.status().message(), "); the job goes on unchecked");
    }
    report.in_session = true;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = attempts_.find(p.key);
    if (it == attempts_.end() || !it->second->precheck_deadline || it->second->teardown) continue;
    Attempt& a = *it->second;
    a.precheck_deadline.reset();
    if (report.completed) JudgeCheck(report, a.assignment.check_policy);
    SendCheckLocked(a, report);
  }
}

void Agent::SendCheckLocked(const Attempt& attempt, CheckReport& report) {
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
  outbox_cv_.notify_all();
}

std::map<std::string, std::string> Agent::ChildEnvironment(const Attempt& attempt,
                                                           bool as_worker) const {
  std::optional<EnvUser> user;
  if (attempt.user && !as_worker) user = EnvUser{attempt.user->name, attempt.user->home};
  return AttemptEnvironment(env_options_, attempt.assignment.job_id, attempt.assignment.attempt,
                            user);
}

std::string Agent::CheckResultPath(const Attempt& attempt) const {
  return layout_.CheckResultPath(attempt.assignment.job_id, attempt.assignment.attempt,
                                 attempt.user.has_value());
}

Clock::time_point Agent::Now() const { return options_.now ? options_.now() : Clock::now(); }

// ---------------------------------------------------------------------------------------------
// Peers, wrappers and clients.

absl::StatusOr<Agent::Attempt*> Agent::AuthorizeLocked(const std::string& job_id, int32_t attempt,
                                                       const std::string& token) {
  auto it = attempts_.find({job_id, attempt});
  if (it == attempts_.end() || it->second->forget) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " attempt ", attempt,
                                            " is not placed on worker ",
                                            options_.inventory.worker_id));
  }
  const Assignment& held = it->second->assignment;
  if (RoleOfToken(token, held.token, held.check_token, it->second->check_over) !=
      TokenRole::kJob) {
    return absl::PermissionDeniedError(
        absl::StrCat("wrong or missing token for job ", job_id, " attempt ", attempt));
  }
  return it->second.get();
}

absl::Status Agent::CheckLocalCaller(const std::string& job_id, int32_t attempt,
                                     const std::string& token, uid_t uid) {
  std::lock_guard<std::mutex> lock(mu_);
  RM_ASSIGN_OR_RETURN(Attempt * a, AuthorizeLocked(job_id, attempt, token));
  if (!a->user) {
    return absl::PermissionDeniedError(
        absl::StrCat("job ", job_id, " attempt ", attempt,
                     " does not run as a team's user here; the local socket serves only those"));
  }
  if (a->user->uid != uid) {
    return absl::PermissionDeniedError(absl::StrCat("the caller runs as uid ", uid, ", but job ",
                                                    job_id, " attempt ", attempt, " runs as uid ",
                                                    a->user->uid, " here"));
  }
  return absl::OkStatus();
}

absl::Status Agent::CheckForwardTarget(const std::string& job_id, int32_t attempt,
                                       const std::string& target) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = attempts_.find({job_id, attempt});
  if (it == attempts_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", job_id, " attempt ", attempt,
                                            " is not placed on worker ",
                                            options_.inventory.worker_id));
  }
  for (const RankPlacement& r : it->second->assignment.placement) {
    if (absl::StrCat(r.worker_address, ":", r.worker_port) == target) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("forward_to: ", target,
                                                  " is not the agent of a worker of job ", job_id,
                                                  " attempt ", attempt));
}

absl::StatusOr<ExitInfo> Agent::Exec(const std::string& job_id, int32_t attempt,
                                     const std::string& token, const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& env,
                                     const std::function<bool(Stream, std::string_view)>& output,
                                     const std::function<bool()>& cancelled) {
  auto count = [&](const char* result) { metrics_.CountExec(result); };
  if (token.empty()) {
    count("denied");
    return absl::PermissionDeniedError("Exec needs the job attempt's token");
  }
  if (auto s = ValidateExecCommand(argv, env); !s.ok()) {
    count("invalid");
    return s;
  }
  Attempt* a = nullptr;
  Spawned child;
  bool for_check = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // The launcher may have heard of the attempt before we did.
    if (attempts_.count({job_id, attempt}) == 0) {
      if (exec_waiters_ >= options_.max_exec_waiters) {
        count("busy");
        RM_LOG(kWarning) << "Exec for job " << job_id << " attempt " << attempt
                         << " refused: " << exec_waiters_
                         << " Exec calls already wait for assignments";
        return absl::ResourceExhaustedError(absl::StrCat(
            "worker ", options_.inventory.worker_id, " does not hold job ", job_id, " attempt ",
            attempt, " and already has ", exec_waiters_,
            " Exec calls waiting for assignments (the bound); retry once the scheduler has "
            "placed the attempt here"));
      }
      ++exec_waiters_;
      // In slices, so that a caller that gave up frees its thread soon.
      const auto deadline = Clock::now() + options_.exec_wait;
      while (attempts_.count({job_id, attempt}) == 0 && !cancelled() && Clock::now() < deadline) {
        assignments_cv_.wait_until(lock,
                                   std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
      }
      --exec_waiters_;
    }
    absl::StatusOr<Attempt*> found = AuthorizeLocked(job_id, attempt, token);
    // The pre-run check's mpirun calls with the check's token: its orted runs as this worker's
    // user, never the team's (CheckBeforeLaunch).
    if (!found.ok() && absl::IsPermissionDenied(found.status())) {
      Attempt& held = *attempts_.at({job_id, attempt});
      if (RoleOfToken(token, held.assignment.token, held.assignment.check_token,
                      held.check_over) == TokenRole::kCheck) {
        found = &held;
        for_check = true;
      }
    }
    if (!found.ok()) {
      count("denied");
      RM_LOG(kWarning) << "Exec denied: " << found.status().message();
      // Not placed here and wrong token look the same to the caller.
      return absl::PermissionDeniedError(found.status().message());
    }
    a = *found;
    if (!for_check) a->check_over = true;
    if (a->teardown) {
      count("denied");
      return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " attempt ", attempt,
                                                        " is stopping on worker ",
                                                        options_.inventory.worker_id));
    }
    const std::optional<UnixUser> user = for_check ? std::nullopt : a->user;
    SpawnOptions spawn;
    spawn.argv = {"bash", "-c", JoinCommand(argv)};
    spawn.env = ChildEnvironment(*a, /*as_worker=*/for_check);
    for (const auto& [k, v] : env) spawn.env[k] = v;
    // orted's Open MPI session directory (see WorkerLayout); the check's apart, as its owner
    // may differ from the job's.
    const std::string session_dir =
        layout_.SessionBase(job_id, attempt) + (for_check ? "/check-orted" : "/orted");
    if (auto s = MakeDirsFor(user, session_dir); !s.ok()) {
      count("error");
      return s;
    }
    spawn.env["OMPI_MCA_orte_tmpdir_base"] = session_dir;
    spawn.pipe_output = true;
    spawn.new_session = true;
    spawn.parent_death_signal = SIGKILL;  // this thread waits for it
    spawn.user = user;
    absl::StatusOr<Spawned> spawned = Spawn(spawn);
    if (!spawned.ok()) {
      count("error");
      return spawned.status();
    }
    child = *spawned;
    a->sessions.insert(child.pid);
    ++a->in_flight;
    count("ok");
  }
  // The caller's env names only: the worker's own part (ChildEnvironment) is the same for
  // every process of the attempt.
  RM_LOG(kInfo) << "job " << job_id << " attempt " << attempt << ": Exec (pid " << child.pid
                << (for_check ? ", the pre-run check's" : "") << ") " << DescribeLaunch(argv, env);

  const ExitInfo info = PumpExecSession(child, options_.kill_grace, output, cancelled);
  RM_LOG(kInfo) << "job " << job_id << " attempt " << attempt << ": Exec (pid " << child.pid
                << ") ended with " << ExitText(info);
  std::lock_guard<std::mutex> lock(mu_);
  ApplyLocked(*a, a->gang.OnExecExited(info.exit_code, info.signal));
  --a->in_flight;  // last touch of `a`
  return info;
}

int Agent::ExecWaiters() {
  std::lock_guard<std::mutex> lock(mu_);
  return exec_waiters_;
}

std::string Agent::JobToken(const std::string& job_id) const {
  if (options_.metrics_service.empty()) return "";  // only the metrics service asks for it
  auto cert = options_.tls_env.find(kTlsCertEnv);
  auto key = options_.tls_env.find(kTlsKeyEnv);
  if (cert == options_.tls_env.end() || key == options_.tls_env.end()) return "";  // plaintext
  // Read at every start: a renewed certificate (cert-manager) signs from then on.
  absl::StatusOr<std::string> chain = ReadFileToString(cert->second, 1 << 20);
  absl::StatusOr<std::string> pem = ReadFileToString(key->second, 1 << 20);
  absl::StatusOr<std::string> token =
      chain.ok() && pem.ok() ? SignJobToken(job_id, *chain, *pem)
                             : absl::Status(chain.ok() ? pem.status() : chain.status());
  if (!token.ok()) {
    RM_LOG(kWarning) << "job " << job_id << ": no job token for its ranks (the metrics service "
                     << "will refuse their samples): " << token.status().message();
    return "";
  }
  return *token;
}

absl::StatusOr<StartedRank> Agent::StartRank(const std::string& job_id, int32_t attempt,
                                             const std::string& token, int32_t mpi_rank,
                                             pid_t pid) {
  StartedRank started;
  std::string launch;  // logged once the lock is released
  std::optional<UnixUser> user;
  // Signed before the lock: it reads two files and signs, and proves only the job id.
  const std::string job_token = JobToken(job_id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    RM_ASSIGN_OR_RETURN(Attempt * a, AuthorizeLocked(job_id, attempt, token));
    user = a->user;
    if (a->teardown) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " attempt ", attempt, " is stopping on this worker"));
    }
    if (mpi_rank < 0 || static_cast<size_t>(mpi_rank) >= a->mpi_to_rank.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("mpi_rank ", mpi_rank, " is out of range for ", a->mpi_to_rank.size(),
                       " placed ranks"));
    }
    started.rank = a->mpi_to_rank[mpi_rank];
    if (!a->gang.HasRank(started.rank)) {
      return absl::NotFoundError(absl::StrCat("MPI rank ", mpi_rank, " (rank ", started.rank,
                                              ") of job ", job_id, " is not placed on worker ",
                                              options_.inventory.worker_id));
    }
    ApplyLocked(*a, a->gang.OnStarted(started.rank, pid));
    RankHost host;
    host.simulated_gpus = options_.simulated_gpus;
    for (const Gpu& g : options_.inventory.gpus) host.gpu_types[g.index] = g.type;
    host.metrics_addr = options_.metrics_service;
    host.job_token = job_token;
    host.checkpoint_dir = layout_.CheckpointDir(job_id);
    host.check_result_path = CheckResultPath(*a);
    started.env = RankEnvironment(a->assignment, started.rank, host);
    absl::StatusOr<std::vector<std::string>> workload =
        WorkloadArgv(a->assignment, options_.train_binary);
    launch = DescribeLaunch(workload.ok() ? *workload : std::vector<std::string>{}, started.env);
  }
  RM_LOG(kInfo) << "job " << job_id << " attempt " << attempt << ": rank " << started.rank
                << " starting (pid " << pid << ") " << launch;
  const std::string dir = layout_.AttemptDir(job_id, attempt);
  RM_RETURN_IF_ERROR(MakeAttemptDir(user, dir));
  if (auto it = started.env.find("RINGMASTER_CHECKPOINT_DIR"); it != started.env.end()) {
    RM_RETURN_IF_ERROR(MakeDirsFor(user, it->second));
  }
  started.log_path = layout_.RankLogPath(job_id, attempt, started.rank);
  // The wrapper, as the team's user, cannot create files in the attempt's directory.
  if (user) RM_RETURN_IF_ERROR(HandFileTo(started.log_path, *user, 0600));
  return started;
}

absl::Status Agent::ReportExit(const std::string& job_id, int32_t attempt, const std::string& token,
                               const RankExit& exit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = attempts_.find({job_id, attempt}); it != attempts_.end() && it->second->forget &&
                                                   !token.empty() &&
                                                   SecretsEqual(token, it->second->assignment.token)) {
    // Told to stop (a preemption, a cancel, the gang's end): the teardown finds the exit by
    // itself and the scheduler has moved on, so there is nothing to record. Taken, so that the
    // rank's wrapper does not print an error into the job's log for an exit it was asked for.
    return absl::OkStatus();
  }
  RM_ASSIGN_OR_RETURN(Attempt * a, AuthorizeLocked(job_id, attempt, token));
  if (!a->gang.HasRank(exit.rank)) {
    return absl::NotFoundError(
        absl::StrCat("rank ", exit.rank, " of job ", job_id, " is not placed on this worker"));
  }
  if (exit.images_per_second) metrics_.SetThroughput(job_id, exit.rank, *exit.images_per_second);
  ApplyLocked(*a, a->gang.OnExited(exit.rank, exit.exit_code, exit.signal, exit.message));
  return absl::OkStatus();
}

absl::Status Agent::ReportThroughput(const std::string& job_id, int32_t attempt,
                                     const std::string& token, int32_t rank,
                                     double images_per_second) {
  std::lock_guard<std::mutex> lock(mu_);
  RM_ASSIGN_OR_RETURN(Attempt * a, AuthorizeLocked(job_id, attempt, token));
  if (!a->gang.HasRank(rank)) {
    return absl::NotFoundError(
        absl::StrCat("rank ", rank, " of job ", job_id, " is not placed on this worker"));
  }
  metrics_.SetThroughput(job_id, rank, images_per_second);
  return absl::OkStatus();
}

absl::Status Agent::ReportProgress(const std::string& job_id, int32_t attempt,
                                   const std::string& token, int32_t rank,
                                   const RankProgress& progress) {
  std::lock_guard<std::mutex> lock(mu_);
  RM_ASSIGN_OR_RETURN(Attempt * a, AuthorizeLocked(job_id, attempt, token));
  if (!a->gang.HasRank(rank)) {
    return absl::NotFoundError(
        absl::StrCat("rank ", rank, " of job ", job_id, " is not placed on this worker"));
  }
  if (auto v = progress.images_per_second ? progress.images_per_second
                                          : progress.step_images_per_second) {
    metrics_.SetThroughput(job_id, rank, *v);
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  if (!a->progress.ShouldForward(rank, progress, now_ms)) return absl::OkStatus();
  RankStatus status;
  status.job_id = job_id;
  status.attempt = attempt;
  status.rank = rank;
  status.kind = RankStatus::Kind::kProgress;
  status.progress = progress;
  outbox_.push_back(std::move(status));
  outbox_cv_.notify_all();
  return absl::OkStatus();
}

void Agent::UpdateGaugesLocked() {
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

absl::Status Agent::ReadLogs(const std::string& job_id, int32_t rank,
                             std::optional<int32_t> attempt, bool follow,
                             const std::function<bool(std::string_view, int32_t)>& write,
                             const std::function<bool()>& cancelled) {
  return log_reader_.Read(job_id, rank, attempt, follow, write, cancelled);
}

bool Agent::RankMayWrite(const std::string& job_id, int32_t attempt, int32_t rank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = attempts_.find({job_id, attempt});
  if (it == attempts_.end() || it->second->forget || !it->second->gang.HasRank(rank)) {
    return false;
  }
  const GangState::Phase p = it->second->gang.phase(rank);
  return p == GangState::Phase::kAssigned || p == GangState::Phase::kStarted;
}

}  // namespace ringmaster::worker
