#include "attempt_launcher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "agent.h"
#include "check_runner.h"
#include "common/checkpoint_metadata.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "core/container.h"
#include "host/file_io.h"

namespace ringmaster::worker {
namespace {

constexpr size_t kLauncherTail = 1500;

// The tail of the launcher's output for a failure message; a log that cannot be read says why.
std::string LauncherTail(const std::string& path) {
  absl::StatusOr<std::string> tail = ReadFileTail(path, kLauncherTail);
  if (!tail.ok()) {
    return absl::StrCat("(the launcher's output is unreadable: ", tail.status().message(), ")");
  }
  return *std::move(tail);
}

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeDirsFor(const std::optional<UnixUser>& user, const std::string& dir) {
  RM_RETURN_IF_ERROR(MakeDirs(dir));
  return user ? HandDirectoryTo(dir, *user, 0700) : absl::OkStatus();
}

absl::Status MakeAttemptDir(const std::optional<UnixUser>& user, const std::string& dir) {
  RM_RETURN_IF_ERROR(MakeDirs(dir));
  if (user && chmod(dir.c_str(), 0711) != 0) {
    return absl::InternalError(absl::StrCat("cannot chmod ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> ProcessEnvironment(const AttemptEnvOptions& env,
                                                      const AttemptRecord& attempt,
                                                      bool as_worker) {
  std::optional<EnvUser> user;
  if (attempt.user && !as_worker) user = EnvUser{attempt.user->name, attempt.user->home};
  return AttemptEnvironment(env, attempt.assignment.job_id, attempt.assignment.attempt, user);
}

void AttemptLauncher::Launch(AttemptRecord* a) {
  const Assignment& assignment = a->assignment;
  const std::string dir = layout_.AttemptDir(assignment.job_id, assignment.attempt);
  const std::string hostfile = dir + "/hostfile";
  // A one-rank attempt without mpirun: the launcher runs ringmaster-rank itself, as MPI rank 0
  // of 1, and there is no ring to check (the scheduler sends no check).
  const bool direct = assignment.start_directly;
  const std::string launcher_name = direct ? "ringmaster-rank" : "mpirun";
  const std::string log_path = dir + (direct ? "/launcher.log" : "/mpirun.log");
  auto fail = [&](const absl::Status& why) {
    MutexLock lock(&table_.mu());
    metrics_.CountLaunch("failed", direct);
    table_.Apply(*a, a->gang.OnLaunchFailed(std::string(why.message())));
    --a->in_flight;
  };

  const std::vector<GangHost> hosts = GangHosts(assignment.placement);
  absl::StatusOr<std::vector<std::string>> workload =
      WorkloadArgv(assignment, options_.train_binary);
  if (!workload.ok()) return fail(workload.status());
  if (auto s = MakeAttemptDir(a->user, dir); !s.ok()) return fail(s);
  if (!direct) {
    if (auto s = WriteFileAtomically(hostfile, HostfileText(hosts)); !s.ok()) return fail(s);
  }
  // mpirun's own Open MPI session directory (see WorkerLayout); TMPDIR, unlike
  // orte_tmpdir_base, is not passed on to the orteds.
  const std::string session_dir =
      layout_.SessionBase(assignment.job_id, assignment.attempt) + "/mpirun";
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
  if (assignment.elastic) mpirun.extra_exports.push_back(kElasticEnv);
  auto launch_argv = [&] {
    return direct
               ? DirectRankArgv(options_.rank_binary, *workload)
               : MpirunArgv(mpirun, static_cast<int32_t>(assignment.placement.size()), *workload);
  };
  SpawnOptions spawn;
  spawn.argv = launch_argv();
  spawn.env = MpirunEnvironment(ProcessEnvironment(env_, *a), assignment, hosts, *master_port);
  if (direct) spawn.env = DirectRankEnvironment(std::move(spawn.env));
  spawn.user = a->user;
  spawn.env["TMPDIR"] = session_dir;
  if (direct) {
    // Nothing to check: the scheduler sends run_check only with mpirun.
  } else if (assignment.run_check && ChecksInSession(assignment)) {
    // The ranks run the check in their MPI_Init; a result left by nothing must not be read.
    if (a->user) {
      if (auto s = MakeDirsFor(a->user, dir + "/check"); !s.ok()) return fail(s);
    }
    unlink(CheckResultPath(*a).c_str());
    MutexLock lock(&table_.mu());
    a->precheck_deadline = table_.Now() + options_.check_timeout;
  } else if (assignment.run_check &&
             !CheckBeforeLaunch(a, mpirun, spawn.env, session_dir, hosts, *master_port)) {
    return;
  }
  // A job with an image: this worker's pull resolves its tag (the first attempt), and every
  // rank runs that digest, which the scheduler stores so that later attempts run it too. The
  // pull started when the assignment arrived; waited for only now, so that it overlaps the
  // pre-run check (on the hosts: it needs no image).
  if (assignment.image) {
    absl::StatusOr<std::string> digest =
        images_.Wait(ImageToPull(*assignment.image), assignment.job_id, options_.image_pull_timeout,
                     assignment.image->registry_auth);
    if (!digest.ok()) return fail(digest.status());
    RM_LOG(kInfo) << "job " << assignment.job_id << " attempt " << assignment.attempt
                  << ": image " << assignment.image->reference << " is " << *digest;
    if (assignment.image->digest.empty()) {
      RankStatus resolved;
      resolved.job_id = assignment.job_id;
      resolved.attempt = assignment.attempt;
      resolved.kind = RankStatus::Kind::kImageResolved;
      resolved.image_digest = *digest;
      MutexLock lock(&table_.mu());
      table_.Push(std::move(resolved));
    }
    mpirun.extra_exports.push_back(kImageDigestEnv);
    spawn.argv = launch_argv();
    spawn.env[kImageDigestEnv] = *digest;
  }

  spawn.new_session = true;
  spawn.parent_death_signal = SIGKILL;  // this thread waits for it for its whole life
  spawn.output_fd =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, a->user ? 0600 : 0644);
  if (spawn.output_fd < 0) {
    return fail(
        absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", std::strerror(errno))));
  }
  pid_t pid = -1;
  {
    MutexLock lock(&table_.mu());
    if (a->teardown) {
      close(spawn.output_fd);
      --a->in_flight;
      return;
    }
    absl::StatusOr<Spawned> spawned = Spawn(spawn);
    close(spawn.output_fd);
    if (!spawned.ok()) {
      metrics_.CountLaunch("failed", direct);
      table_.Apply(*a, a->gang.OnLaunchFailed(std::string(spawned.status().message())));
      --a->in_flight;
      return;
    }
    pid = spawned->pid;
    a->sessions.insert(pid);
    metrics_.CountLaunch("started", direct);
  }
  RM_LOG(kInfo) << "job " << assignment.job_id << " attempt " << assignment.attempt << ": "
                << launcher_name << " (pid " << pid << ") "
                << DescribeLaunch(spawn.argv, spawn.env);
  const ExitInfo info = WaitForExit(pid);
  const std::string tail = LauncherTail(log_path);
  RM_LOG(kInfo) << "job " << assignment.job_id << " attempt " << assignment.attempt << ": "
                << launcher_name << " ended with " << ExitText(info);
  MutexLock lock(&table_.mu());
  table_.Apply(*a, a->gang.OnLauncherExited(info.exit_code, info.signal, tail));
  --a->in_flight;  // last touch of `a`
}

bool AttemptLauncher::CheckBeforeLaunch(AttemptRecord* a, const MpirunOptions& mpirun,
                                        const std::map<std::string, std::string>& env,
                                        const std::string& session_dir,
                                        const std::vector<GangHost>& hosts, int32_t master_port) {
  const Assignment& assignment = a->assignment;
  const std::string dir = layout_.AttemptDir(assignment.job_id, assignment.attempt);
  CheckRun run;
  MpirunOptions check = mpirun;
  check.rank_binary = options_.check_binary;
  check.abort_on_rank_failure = true;
  auto fail = [&](const absl::Status& s) {
    MutexLock lock(&table_.mu());
    table_.Apply(*a, a->gang.OnLaunchFailed(std::string(s.message())));
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
    run.spawn.env = MpirunEnvironment(ProcessEnvironment(env_, *a, /*as_worker=*/true), assignment,
                                      hosts, master_port);
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
        MutexLock lock(&table_.mu());
        if (a->teardown) return false;
        a->sessions.insert(pid);
        return true;
      },
      [&](pid_t pid) {
        MutexLock lock(&table_.mu());
        a->sessions.erase(pid);
      });
  MutexLock lock(&table_.mu());
  if (a->teardown) {
    --a->in_flight;
    return false;
  }
  table_.SendCheck(*a, report);
  // A passed check, or a slow ring with no one worker to blame, runs the job. A named culprit
  // waits for the scheduler to re-place the attempt (its StopJob follows). A check that could
  // not run is the attempt's launch failure.
  if (report.passed || (report.completed && report.culprit_worker_id.empty())) return true;
  if (!report.culprit_worker_id.empty()) {
    --a->in_flight;
    return false;
  }
  metrics_.CountLaunch("failed", /*direct=*/false);
  table_.Apply(*a, a->gang.OnLaunchFailed(absl::StrCat("pre-run check: ", report.message)));
  --a->in_flight;
  return false;
}

std::string AttemptLauncher::CheckResultPath(const AttemptRecord& attempt) const {
  return layout_.CheckResultPath(attempt.assignment.job_id, attempt.assignment.attempt,
                                 attempt.user.has_value());
}

void AttemptLauncher::PollInSessionChecks() {
  struct Pending {
    AttemptTable::Key key;
    std::string path;
    bool expired;
  };
  std::vector<Pending> pending;
  {
    MutexLock lock(&table_.mu());
    const auto now = table_.Now();
    for (const auto& [key, a] : table_.attempts()) {
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
    MutexLock lock(&table_.mu());
    auto it = table_.attempts().find(p.key);
    if (it == table_.attempts().end() || !it->second->precheck_deadline || it->second->teardown)
      continue;
    AttemptRecord& a = *it->second;
    a.precheck_deadline.reset();
    if (report.completed) JudgeCheck(report, a.assignment.check_policy);
    table_.SendCheck(a, report);
  }
}

void AttemptLauncher::ReportCheckpoints() {
  if (options_.checkpoint_root.empty()) return;
  std::vector<AttemptTable::Key> launched;
  {
    MutexLock lock(&table_.mu());
    for (const auto& [key, a] : table_.attempts()) {
      if (a->launcher) launched.push_back(key);
    }
  }
  // The files are read without the lock: RPCs must not wait for the disk.
  std::vector<std::pair<AttemptTable::Key, absl::StatusOr<CheckpointMetadata>>> read;
  for (const AttemptTable::Key& key : launched) {
    read.emplace_back(key, ReadCheckpointMetadata(layout_.CheckpointDir(key.first)));
  }
  MutexLock lock(&table_.mu());
  for (auto& [key, meta] : read) {
    auto it = table_.attempts().find(key);
    if (it == table_.attempts().end()) continue;
    AttemptRecord& a = *it->second;
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
    table_.Push(std::move(s));
  }
}

}  // namespace ringmaster::worker
