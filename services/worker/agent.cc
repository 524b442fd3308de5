#include "agent.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_token.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "core/assignment.h"
#include "core/auth.h"
#include "core/gpu_share.h"
#include "core/launch.h"
#include "core/run_as.h"
#include "host/file_io.h"
#include "host/gpus.h"
#include "host/runtime.h"

namespace ringmaster::worker {
namespace {

using Clock = std::chrono::steady_clock;

std::map<std::string, std::string> WithoutRingmasterSettings(
    std::map<std::string, std::string> env) {
  std::erase_if(env, [](const auto& entry) { return entry.first.rfind("RINGMASTER_", 0) == 0; });
  return env;
}

}  // namespace

Agent::Agent(AgentOptions options, prometheus::Registry* registry)
    : options_(std::move(options)),
      metrics_(registry, options_.inventory),
      layout_{.log_dir = options_.log_dir,
              .session_root =
                  options_.mpi_tmpdir.empty() ? DefaultSessionRoot(geteuid()) : options_.mpi_tmpdir,
              .session_suffix = SessionSuffix(options_.inventory.worker_id),
              .checkpoint_root = options_.checkpoint_root},
      log_reader_(layout_, options_.inventory.worker_id,
                  [this](const std::string& job_id, int32_t attempt, int32_t rank) {
                    return RankMayWrite(job_id, attempt, rank);
                  }),
      // Rank 0 listens where mpirun runs: on this worker's address.
      master_ports_(options_.master_port_first, options_.master_port_last,
                    options_.inventory.address.find_first_not_of("0123456789.") == std::string::npos
                        ? options_.inventory.address
                        : "0.0.0.0"),
      images_(ImagePullerOptions{.runtime = options_.container_runtime,
                                 .pull_args = options_.image_pull_args,
                                 .timeout = options_.image_pull_timeout,
                                 .env = options_.runtime_env,
                                 .cache_bytes = options_.image_cache_bytes,
                                 .auth_dir = options_.log_dir + "/registry-auth"}),
      table_(
          options_.inventory.worker_id, options_.clean_exit_wait, metrics_,
          [this] { return options_.now ? options_.now() : Clock::now(); },
          [this] { reaper_.Wake(); }),
      launcher_(options_, layout_, env_options_, table_, metrics_, master_ports_, images_),
      reaper_(options_, layout_, table_, launcher_, metrics_, master_ports_),
      mps_(MpsDaemonOptions{.control_binary = options_.mps_control,
                            .dir = layout_.MpsDir(),
                            // As the attempts' (below): none of the worker's own settings.
                            .env = WithoutRingmasterSettings(CurrentEnvironment()),
                            .worker_id = options_.inventory.worker_id}) {
  // Children get a clean slate: our own RINGMASTER_* settings (flag fallbacks) would leak into
  // programs that read the same names (ringmaster-train's flags do).
  env_options_.base = WithoutRingmasterSettings(CurrentEnvironment());
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
  // An MPS daemon an earlier life left: its directory goes with the session directories below.
  if (!options_.simulated_gpus) mps_.StopLeftover();
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
  // Containers an earlier life left (their processes were killed above; the records stay).
  if (!options_.container_runtime.empty()) {
    const std::vector<std::string> stale = LabelledContainers(
        options_.container_runtime, options_.runtime_env, kWorkerLabel, options_.inventory.worker_id);
    std::string why;
    if (!RemoveContainers(options_.container_runtime, options_.runtime_env, stale, &why)) {
      RM_LOG(kWarning) << "cannot remove the containers an earlier run left: " << why;
    } else if (!stale.empty()) {
      RM_LOG(kWarning) << "removed " << stale.size() << " containers left by an earlier run of worker "
                       << options_.inventory.worker_id;
    }
  }
  reaper_.Start();
}

void Agent::Shutdown() {
  if (!reaper_.Running()) {
    mps_.Stop();
    return;
  }
  {
    MutexLock lock(&table_.mu());
    for (auto& [key, a] : table_.attempts()) {
      a->forget = true;
      table_.BeginTeardown(*a, "worker shutting down");
    }
  }
  const auto deadline = Clock::now() + options_.kill_grace + std::chrono::seconds(2);
  while (Clock::now() < deadline) {
    {
      MutexLock lock(&table_.mu());
      if (table_.attempts().empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  reaper_.Stop();
  std::vector<std::thread> threads;
  {
    MutexLock lock(&table_.mu());
    for (auto& [key, a] : table_.attempts()) {
      (void)SignalProcesses(table_.Selector(*a), SIGKILL);
      if (a->launcher_thread.joinable()) threads.push_back(std::move(a->launcher_thread));
    }
  }
  for (std::thread& t : threads) t.join();
  // Its clients are gone: the MPS servers end with it.
  mps_.Stop();
}

// ---------------------------------------------------------------------------------------------
// Scheduler side.

void Agent::OnAssignment(const Assignment& assignment) {
  // The job id names log directories: refuse what could leave them.
  if (!IsSafeJobId(assignment.job_id)) {
    RM_LOG(kWarning) << "assignment with a malformed job id ignored";
    return;
  }
  // Before the lock: it looks at the file system.
  const absl::Status volumes = CheckVolumes(assignment);
  // Before the lock too: the first shared attempt on real GPUs starts the MPS daemon (seconds).
  absl::Status mps = absl::OkStatus();
  if (!options_.simulated_gpus && PlacesSharedRankOn(assignment, options_.inventory.worker_id)) {
    mps = mps_.Ensure().status();
  }
  MutexLock lock(&table_.mu());
  const AttemptTable::Key key{assignment.job_id, assignment.attempt};
  std::vector<HeldAttempt> held;
  for (const auto& [k, a] : table_.attempts()) held.push_back({k.first, k.second, a->forget});
  const AssignmentPlan plan = PlanAssignment(assignment, options_.inventory.worker_id, held);
  if (plan.repeat) return;
  for (int32_t older : plan.superseded) {
    AttemptRecord& a = *table_.attempts().at({assignment.job_id, older});
    a.forget = true;
    table_.BeginTeardown(a, absl::StrCat("superseded by attempt ", assignment.attempt));
  }
  const std::vector<int32_t>& local = plan.local_ranks;
  if (local.empty()) {
    RM_LOG(kWarning) << "assignment of " << assignment.job_id << " attempt " << assignment.attempt
                     << " places nothing on this worker; ignored";
    return;
  }
  auto owned = std::make_unique<AttemptRecord>(assignment, local);
  AttemptRecord* a = owned.get();
  table_.attempts()[key] = std::move(owned);
  absl::Status valid = ValidatePlacement(assignment.placement);
  if (valid.ok() && assignment.start_directly && assignment.placement.size() != 1) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("start_directly: the placement has ", assignment.placement.size(),
                     " ranks; only a one-rank attempt starts without mpirun"));
  }
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
  if (valid.ok() && !mps.ok()) valid = mps;
  if (valid.ok() && assignment.image) {
    if (!volumes.ok()) {
      valid = volumes;
    } else if (a->user) {
      // The wrapper runs as the team's user, whose runtime would be rootless, with an image
      // store of its own that this worker's pulls never fill.
      valid = absl::FailedPreconditionError(absl::StrCat(
          "job ", assignment.job_id, " runs in image ", assignment.image->reference,
          ", but worker ", options_.inventory.worker_id,
          " runs team '", assignment.team, "' as a Unix user (--run-as), and jobs with an image "
          "do not run as teams' users yet (docs/environments.md)"));
    } else if (options_.container_runtime.empty()) {
      valid = absl::FailedPreconditionError(absl::StrCat(
          "job ", assignment.job_id, " runs in image ", assignment.image->reference, ", but worker ",
          options_.inventory.worker_id, " runs no containers (start it with --container-runtime)"));
    } else {
      // Pulled while the attempt starts: by its digest once one is pinned, else by its tag
      // (the launcher's pull of the tag is what pins it).
      images_.Start(ImageToPull(*assignment.image), assignment.job_id,
                    assignment.image->registry_auth);
    }
  }
  a->launcher = plan.launcher;
  RM_LOG(kInfo) << "job " << assignment.job_id << " attempt " << assignment.attempt << ": ranks "
                << absl::StrJoin(local, ",") << " placed here" << (a->launcher ? " (launcher)" : "")
                << (a->user
                        ? absl::StrCat(", as uid ", a->user->uid, " (team '", assignment.team, "')")
                        : "");
  if (!valid.ok()) {
    table_.Apply(*a, a->gang.OnLaunchFailed(std::string(valid.message())));
  } else if (a->launcher) {
    ++a->in_flight;
    a->launcher_thread = std::thread([this, a] { launcher_.Launch(a); });
  }
  table_.UpdateGauges();
  assignments_cv_.NotifyAll();
}

void Agent::OnStop(const std::string& job_id, int32_t attempt, const std::string& reason,
                   std::chrono::milliseconds grace) {
  MutexLock lock(&table_.mu());
  auto it = table_.attempts().find({job_id, attempt});
  if (it == table_.attempts().end()) return;
  RM_LOG(kInfo) << "job " << job_id << " attempt " << attempt << ": stop (" << reason << ")";
  it->second->forget = true;
  table_.BeginTeardown(*it->second, reason, /*normal_end=*/true,
                       grace.count() > 0 ? std::optional(grace) : std::nullopt);
}

std::vector<HeldRank> Agent::TakeRegistration() { return table_.TakeRegistration(); }

std::vector<RankStatus> Agent::NextStatuses(size_t max, std::chrono::milliseconds timeout) {
  return table_.NextStatuses(max, timeout);
}

void Agent::SetSchedulerConnected(bool connected) { metrics_.SetSchedulerConnected(connected); }

// ---------------------------------------------------------------------------------------------
// Peers, wrappers and clients.

absl::Status Agent::CheckLocalCaller(const std::string& job_id, int32_t attempt,
                                     const std::string& token, uid_t uid) {
  MutexLock lock(&table_.mu());
  RM_ASSIGN_OR_RETURN(AttemptRecord * a, table_.Authorize(job_id, attempt, token));
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
  MutexLock lock(&table_.mu());
  auto it = table_.attempts().find({job_id, attempt});
  if (it == table_.attempts().end()) {
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
  AttemptRecord* a = nullptr;
  Spawned child;
  bool for_check = false;
  {
    MutexLock lock(&table_.mu());
    // The launcher may have heard of the attempt before we did.
    if (table_.attempts().count({job_id, attempt}) == 0) {
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
      while (table_.attempts().count({job_id, attempt}) == 0 && !cancelled() &&
             Clock::now() < deadline) {
        assignments_cv_.WaitUntil(
            &table_.mu(), std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
      }
      --exec_waiters_;
    }
    absl::StatusOr<AttemptRecord*> found = table_.Authorize(job_id, attempt, token);
    // The pre-run check's mpirun calls with the check's token: its orted runs as this worker's
    // user, never the team's (AttemptLauncher::CheckBeforeLaunch).
    if (!found.ok() && absl::IsPermissionDenied(found.status())) {
      AttemptRecord& held = *table_.attempts().at({job_id, attempt});
      if (RoleOfToken(token, held.assignment.token, held.assignment.check_token, held.check_over) ==
          TokenRole::kCheck) {
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
    spawn.env = ProcessEnvironment(env_options_, *a, /*as_worker=*/for_check);
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
  // The caller's env names only: the worker's own part (ProcessEnvironment) is the same for
  // every process of the attempt.
  RM_LOG(kInfo) << "job " << job_id << " attempt " << attempt << ": Exec (pid " << child.pid
                << (for_check ? ", the pre-run check's" : "") << ") " << DescribeLaunch(argv, env);

  const ExitInfo info = PumpExecSession(child, options_.kill_grace, output, cancelled);
  RM_LOG(kInfo) << "job " << job_id << " attempt " << attempt << ": Exec (pid " << child.pid
                << ") ended with " << ExitText(info);
  MutexLock lock(&table_.mu());
  table_.Apply(*a, a->gang.OnExecExited(info.exit_code, info.signal));
  --a->in_flight;  // last touch of `a`
  return info;
}

int Agent::ExecWaiters() {
  MutexLock lock(&table_.mu());
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
                                             pid_t pid, const std::string& image_digest) {
  StartedRank started;
  std::string launch;  // logged once the lock is released
  std::optional<UnixUser> user;
  std::optional<Assignment> containerized;  // a copy, for the container's plan
  // Signed before the lock: it reads two files and signs, and proves only the job id.
  const std::string job_token = JobToken(job_id);
  // Before the lock as well: the daemon's lock may be held through a start (seconds).
  const std::string mps_pipe_directory = mps_.PipeDirectory();
  {
    MutexLock lock(&table_.mu());
    RM_ASSIGN_OR_RETURN(AttemptRecord * a, table_.Authorize(job_id, attempt, token));
    user = a->user;
    if (a->teardown) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " attempt ", attempt, " is stopping on this worker"));
    }
    if (mpi_rank < 0 || static_cast<size_t>(mpi_rank) >= a->mpi_to_rank.size()) {
      return absl::InvalidArgumentError(absl::StrCat("mpi_rank ", mpi_rank, " is out of range for ",
                                                     a->mpi_to_rank.size(), " placed ranks"));
    }
    started.rank = a->mpi_to_rank[mpi_rank];
    if (!a->gang.HasRank(started.rank)) {
      return absl::NotFoundError(absl::StrCat("MPI rank ", mpi_rank, " (rank ", started.rank,
                                              ") of job ", job_id, " is not placed on worker ",
                                              options_.inventory.worker_id));
    }
    table_.Apply(*a, a->gang.OnStarted(started.rank, pid));
    RankHost host;
    host.simulated_gpus = options_.simulated_gpus;
    for (const Gpu& g : options_.inventory.gpus) {
      host.gpu_types[g.index] = g.type;
      if (!g.uuid.empty()) host.gpu_uuids[g.index] = g.uuid;
    }
    host.metrics_addr = options_.metrics_service;
    host.job_token = job_token;
    host.checkpoint_dir = layout_.CheckpointDir(job_id);
    host.check_result_path = launcher_.CheckResultPath(*a);
    host.mps_pipe_directory = mps_pipe_directory;
    started.env = RankEnvironment(a->assignment, started.rank, host);
    absl::StatusOr<std::vector<std::string>> workload =
        WorkloadArgv(a->assignment, options_.train_binary);
    launch = DescribeLaunch(workload.ok() ? *workload : std::vector<std::string>{}, started.env);
    if (a->assignment.image) containerized = a->assignment;
  }
  if (containerized) {
    absl::StatusOr<ContainerRun> container =
        RankContainer(*containerized, started.rank, image_digest, user);
    if (!container.ok()) return container.status();
    started.container = *std::move(container);
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

absl::Status Agent::CheckVolumes(const Assignment& assignment) const {
  if (!assignment.image) return absl::OkStatus();
  const JobImage& image = *assignment.image;
  // A volume's host path, symlinks followed, must be a directory here outside the worker's own.
  std::vector<std::string> kept = options_.protected_paths;
  for (const std::string& dir : {layout_.log_dir, layout_.session_root, options_.checkpoint_root,
                                 options_.agent_socket}) {
    kept.push_back(dir);
  }
  for (const auto& [name, value] : options_.tls_env) {
    if (name != kInsecureEnv) kept.push_back(value);
  }
  // Compared as the kernel resolves them, as the volumes are.
  for (std::string& path : kept) {
    std::error_code ec;
    if (path.empty()) continue;
    const std::filesystem::path real = std::filesystem::canonical(path, ec);
    if (!ec) path = real.string();
  }
  for (const AssignedMount& m : image.mounts) {
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(m.host_path, ec);
    if (ec || !std::filesystem::is_directory(real, ec)) {
      return absl::FailedPreconditionError(absl::StrCat("volume ", m.volume, ": ", m.host_path,
                                                        " is not a directory on worker ",
                                                        options_.inventory.worker_id));
    }
    RM_RETURN_IF_ERROR(CheckVolumePath(m.volume, real.string(), kept));
  }
  return absl::OkStatus();
}

absl::StatusOr<ContainerRun> Agent::RankContainer(const Assignment& assignment, int32_t rank,
                                                  const std::string& reported_digest,
                                                  const std::optional<UnixUser>& user) {
  const JobImage& image = *assignment.image;
  // The launcher's digest, which every rank of the attempt runs; a pinned one must match it.
  const std::string digest = reported_digest.empty() ? image.digest : reported_digest;
  if (!IsImageDigest(digest)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank, " of job ", assignment.job_id, " has no digest of image ", image.reference,
        " from its launcher"));
  }
  if (!image.digest.empty() && digest != image.digest) {
    return absl::FailedPreconditionError(absl::StrCat("the launcher ran image digest ", digest,
                                                      ", but the job is pinned to ", image.digest));
  }
  JobImage pinned = image;
  pinned.digest = digest;
  absl::StatusOr<std::string> pulled = images_.Wait(
      ImageToPull(pinned), assignment.job_id, options_.image_pull_timeout, pinned.registry_auth);
  if (!pulled.ok()) return pulled.status();

  ContainerHost host;
  host.runtime = options_.container_runtime;
  host.worker_id = options_.inventory.worker_id;
  host.user = user ? absl::StrCat(user->uid, ":", user->gid) : absl::StrCat(geteuid(), ":", getegid());
  host.simulated_gpus = options_.simulated_gpus;
  host.extra_args = options_.container_args;
  host.host_open_mpi = options_.host_open_mpi;
  host.mps_pipe_directory = mps_.PipeDirectory();
  for (const Gpu& g : options_.inventory.gpus) {
    if (!g.uuid.empty()) host.mig_indices.insert(g.index);
  }
  // What the rank reads and writes of the platform's, at the same path inside: its job's
  // checkpoints, the attempt's Open MPI session directories (PMIx's rendezvous files), the CA.
  if (!options_.checkpoint_root.empty()) {
    host.platform_mounts.push_back({layout_.CheckpointDir(assignment.job_id),
                                    layout_.CheckpointDir(assignment.job_id), false});
  }
  const std::string session = layout_.SessionBase(assignment.job_id, assignment.attempt);
  host.platform_mounts.push_back({session, session, false});
  host.session_dir = session;
  if (auto ca = options_.tls_env.find(kTlsCaEnv); ca != options_.tls_env.end()) {
    host.platform_mounts.push_back({ca->second, ca->second, true});
  }
  if (!options_.simulated_gpus) {
    const GpuDriverFiles driver = FindGpuDriverFiles();
    host.control_devices = driver.control_devices;
    for (const std::string& lib : driver.libraries) host.driver_mounts.push_back({lib, lib, true});
  }
  RM_RETURN_IF_ERROR(CheckVolumes(assignment));
  absl::StatusOr<ContainerRun> run = PlanRankContainer(assignment, rank, digest, host);
  if (!run.ok()) return run.status();
  // Mount the resolved paths: a symlink swapped after the check must not redirect the mount.
  for (ContainerMount& mount : run->mounts) {
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(mount.host_path, ec);
    if (!ec) mount.host_path = real.string();
  }
  return run;
}

absl::Status Agent::ReportExit(const std::string& job_id, int32_t attempt, const std::string& token,
                               const RankExit& exit) {
  MutexLock lock(&table_.mu());
  if (auto it = table_.attempts().find({job_id, attempt});
      it != table_.attempts().end() && it->second->forget && !token.empty() &&
      SecretsEqual(token, it->second->assignment.token)) {
    // Told to stop (a preemption, a cancel, the gang's end): the teardown finds the exit by
    // itself and the scheduler has moved on, so there is nothing to record. Taken, so that the
    // rank's wrapper does not print an error into the job's log for an exit it was asked for.
    return absl::OkStatus();
  }
  RM_ASSIGN_OR_RETURN(AttemptRecord * a, table_.Authorize(job_id, attempt, token));
  if (!a->gang.HasRank(exit.rank)) {
    return absl::NotFoundError(
        absl::StrCat("rank ", exit.rank, " of job ", job_id, " is not placed on this worker"));
  }
  if (exit.images_per_second) metrics_.SetThroughput(job_id, exit.rank, *exit.images_per_second);
  table_.Apply(*a, a->gang.OnExited(exit.rank, exit.exit_code, exit.signal, exit.message));
  return absl::OkStatus();
}

absl::Status Agent::ReportThroughput(const std::string& job_id, int32_t attempt,
                                     const std::string& token, int32_t rank,
                                     double images_per_second) {
  MutexLock lock(&table_.mu());
  RM_ASSIGN_OR_RETURN(AttemptRecord * a, table_.Authorize(job_id, attempt, token));
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
  MutexLock lock(&table_.mu());
  RM_ASSIGN_OR_RETURN(AttemptRecord * a, table_.Authorize(job_id, attempt, token));
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
  table_.Push(std::move(status));
  return absl::OkStatus();
}

absl::Status Agent::ReadLogs(const std::string& job_id, int32_t rank,
                             std::optional<int32_t> attempt, bool follow,
                             const std::function<bool(std::string_view, int32_t)>& write,
                             const std::function<bool()>& cancelled) {
  return log_reader_.Read(job_id, rank, attempt, follow, write, cancelled);
}

bool Agent::RankMayWrite(const std::string& job_id, int32_t attempt, int32_t rank) {
  MutexLock lock(&table_.mu());
  auto it = table_.attempts().find({job_id, attempt});
  if (it == table_.attempts().end() || it->second->forget || !it->second->gang.HasRank(rank)) {
    return false;
  }
  const GangState::Phase p = it->second->gang.phase(rank);
  return p == GangState::Phase::kAssigned || p == GangState::Phase::kStarted;
}

}  // namespace ringmaster::worker
