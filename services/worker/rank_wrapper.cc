#include "rank_wrapper.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/tls.h"
#include "common/utf8.h"
#include "core/container.h"
#include "core/launch.h"
#include "core/throughput.h"
#include "host/file_io.h"
#include "host/process.h"
#include "host/rank_channel.h"
#include "rank/rank_env.h"
#include "rpc/agent_client.h"
#include "rpc/container_convert.h"

namespace ringmaster::worker {
namespace {

using Clock = std::chrono::steady_clock;
// SIGTERM -> SIGKILL for the workload once we were told to stop.
constexpr auto kStopGrace = std::chrono::seconds(5);

// Where the workload's output goes: the rank log and orted (through our stdout/stderr). A sink
// that fails is dropped with one line saying why, and the rank goes on: a full disk (ENOSPC)
// must not fail a training job, and neither must orted going away (EPIPE; SIGPIPE is ignored).
struct OutputSink {
  int fd = -1;
  std::string name;
  bool broken = false;

  void Write(std::string_view data) {
    if (fd < 0 || broken) return;
    absl::Status s = WriteAllToFd(fd, data, name);
    if (s.ok()) return;
    broken = true;
    const std::string line =
        absl::StrCat("ringmaster-rank: no more output to ", name, ": ", s.message(), "\n");
    // Best effort: stderr may be the sink that broke.
    (void)WriteAllToFd(STDERR_FILENO, line, "stderr");
  }
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "ringmaster-rank: %s\n", message.c_str());
  return 1;
}

// The directory of this executable: libringmaster_pmpi.so and ringmaster-progress sit there.
std::string OwnDirectory() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// A collective counter to preload: the one `variable` names when set (empty: none), else
// `file` next to this executable when it exists.
std::string CounterLibrary(const std::string& own_dir, const char* variable, const char* file) {
  if (const char* v = std::getenv(variable); v != nullptr) return v;
  std::string path = absl::StrCat(own_dir, "/", file);
  return access(path.c_str(), R_OK) == 0 ? path : "";
}

// This process's /proc/self/stat ("" when unreadable).
std::string ReadProcSelfStat() {
  absl::StatusOr<std::string> text = ReadFileToString("/proc/self/stat", 4096);
  return text.ok() ? *std::move(text) : "";
}

// True when `pid` is stopped (state T: SIGSTOP, SIGTSTP) or stopped by a tracer (t).
bool IsStopped(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')', as comm may hold one.
  const char* paren = std::strrchr(buf, ')');
  return paren != nullptr && paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't');
}

bool operator==(const rm_rank_snapshot& a, const rm_rank_snapshot& b) {
  return a.collectives_entered == b.collectives_entered &&
         a.collectives_completed == b.collectives_completed && a.progress_step == b.progress_step &&
         a.progress_reports == b.progress_reports &&
         a.has_images_per_second == b.has_images_per_second &&
         (!a.has_images_per_second || a.images_per_second == b.images_per_second) &&
         a.mpi_state == b.mpi_state;
}

// Times the channel's MPI state (rank_channel.h): the PMPI library reads no clock, so how long
// the rank has been inside a call, or out of MPI, is how long the word stayed the same here.
class MpiStateClock {
 public:
  using Clock = std::chrono::steady_clock;
  void Observe(uint64_t state, Clock::time_point now) {
    if (state == state_ && seen_) return;
    state_ = state;
    since_ = now;
    seen_ = true;
  }
  // The position as of `now` (no call before the rank's first blocking MPI call).
  void Fill(Clock::time_point now, v1::MpiPosition* out) const {
    char unknown[32];
    out->set_inside(rm_mpi_state_inside(state_) != 0);
    const unsigned call = rm_mpi_state_call(state_);
    if (call != RM_CALL_NONE) out->set_call(rm_mpi_call_name(call, unknown, sizeof(unknown)));
    out->set_for_ms(std::chrono::duration_cast<std::chrono::milliseconds>(now - since_).count());
    out->set_calls_entered(rm_mpi_state_calls(state_));
  }

 private:
  uint64_t state_ = 0;
  bool seen_ = false;
  Clock::time_point since_;
};

// The runtime's command line that runs the program in the container the worker planned
// (docs/environments.md): the rank's environment by name (the runtime passes the values on),
// the counters preloaded from their host paths, which are mounted read-only where they are, and
// the rank channel mounted at its own path, so that hang detection and throughput work inside.
std::vector<std::string> InContainer(const v1::StartRankResponse& started, const SpawnOptions& spawn,
                                     const std::string& counters, const RankChannelFile* channel,
                                     const std::string& own_dir) {
  ContainerRun run = FromProto(started.container());
  std::map<std::string, std::string> rank_env(started.env().begin(), started.env().end());
  std::map<std::string, std::string> env = spawn.env;
  env.erase("LD_PRELOAD");  // the host's own preloads are not the image's
  run.env_names = ContainerEnvNames(env, rank_env);
  if (!counters.empty()) {
    run.env_values["LD_PRELOAD"] = counters;
    run.mounts.push_back({own_dir, own_dir, true});
  }
  if (channel != nullptr) run.mounts.push_back({channel->path(), channel->path(), false});
  run.program = spawn.argv;
  return ContainerRunArgv(run);
}

}  // namespace

int RunRank(const std::vector<std::string>& program) {
  if (program.empty()) return Fail("usage: ringmaster-rank -- PROGRAM [ARGS...]");
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v == nullptr ? "" : v;
  };
  const std::string agent_addr = env(kAgentAddrEnv);
  const std::string job_id = env(kJobIdEnv);
  const std::string token = env(kTokenEnv);
  int32_t attempt = 0, mpi_rank = 0;
  // Started directly by its worker (a one-rank attempt): MPI rank 0 of 1.
  const bool direct = env(kDirectStartEnv) == "1";
  if (agent_addr.empty() || job_id.empty() || token.empty() ||
      !absl::SimpleAtoi(env(kAttemptEnv), &attempt) ||
      (!direct && !absl::SimpleAtoi(env("OMPI_COMM_WORLD_RANK"), &mpi_rank))) {
    return Fail(absl::StrCat("needs ", kAgentAddrEnv, ", ", kJobIdEnv, ", ", kAttemptEnv, ", ",
                             kTokenEnv, " and OMPI_COMM_WORLD_RANK (or ", kDirectStartEnv,
                             "=1): run it as a Ringmaster worker launches it"));
  }

  // Signals arrive through a signalfd; block them before any thread (gRPC's) exists.
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&handled, sig);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  const int sig_fd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  std::signal(SIGPIPE, SIG_IGN);
  // orted (or, started directly, the worker) gone: stop the workload cleanly (it gets SIGKILL if
  // we die first).
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  // Whatever the workload starts and leaves behind (a daemon that double-forked, a process that
  // left its group) comes back to us when its parent ends, rather than to init: at the end, an
  // empty list of children says nothing is left, without a scan of every process on the host.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  // The worker's certificate, from the environment it gave orted and mpirun; or, for a rank
  // that runs as its team's user (which holds no certificate), the agent's local socket.
  const TlsOptions tls = TlsOptionsFromEnvironment();
  const std::string agent_socket = env(kAgentSocketEnv);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      agent_socket.empty() ? MakeChannelCredentials(tls, ServerName::kAnyOfTheCa)
                           : grpc::InsecureChannelCredentials();
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
  AgentClient agent(agent_socket.empty() ? agent_addr : "unix:" + agent_socket, *credentials);
  v1::StartRankRequest start;
  start.set_job_id(job_id);
  start.set_attempt(attempt);
  start.set_token(token);
  start.set_mpi_rank(mpi_rank);
  start.set_pid(getpid());
  start.set_image_digest(env(kImageDigestEnv));
  // Long enough for the worker's pull of a job's image (its own limit bounds that).
  absl::StatusOr<v1::StartRankResponse> started = agent.StartRank(start, std::chrono::minutes(11));
  if (!started.ok()) {
    return Fail(absl::StrCat("worker ", agent_addr, " refused MPI rank ", mpi_rank, ": ",
                             started.status().ToString()));
  }
  const int32_t rank = started->rank();
  for (const auto& [k, v] : started->env()) setenv(k.c_str(), v.c_str(), 1);
  const int log_fd =
      open(started->log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    std::fprintf(stderr, "ringmaster-rank: cannot open %s: %s; output goes to mpirun only\n",
                 started->log_path().c_str(), std::strerror(errno));
  }
  OutputSink log_sink{log_fd, started->log_path()};
  OutputSink sinks[2] = {{STDOUT_FILENO, "stdout"}, {STDERR_FILENO, "stderr"}};

  v1::ReportRankRequest report;
  report.set_job_id(job_id);
  report.set_attempt(attempt);
  report.set_token(token);
  report.set_rank(rank);

  SpawnOptions spawn;
  spawn.argv = program;
  spawn.env = CurrentEnvironment();
  spawn.env.erase(kDirectStartEnv);  // the wrapper's word, not the workload's
  // The workload is a team's program: it may verify servers against the CA (the trainer's
  // metrics stream) but gets no path to the worker's own certificate and key.
  for (const auto& [name, value] : TlsEnvironment(tls, /*with_identity=*/true)) {
    if (name != kTlsCaEnv && name != kInsecureEnv) spawn.env.erase(name);
  }
  // The rank channel: collective counts (the preloaded PMPI library) and progress
  // (ringmaster-progress, the trainer) come back through it. Without one the rank still runs,
  // unwatched.
  const std::string own_dir = OwnDirectory();
  std::string counters;  // the preloaded collective counters, ':'-separated
  const std::optional<std::string> host_preload =
      spawn.env.count("LD_PRELOAD") > 0 ? std::optional(spawn.env["LD_PRELOAD"]) : std::nullopt;
  std::unique_ptr<RankChannelFile> channel;
  bool tracks_mpi = false;  // the PMPI library, which shows MPI calls, is preloaded
  if (auto created =
          RankChannelFile::Create(RankChannelDir(), absl::StrCat(job_id, "-", attempt, "-", rank));
      created.ok()) {
    channel = std::move(*created);
    spawn.env[RM_RANK_CHANNEL_ENV] = channel->path();
    // MPI collectives (PMPI) and NCCL collectives, counted into the same channel.
    const std::string pmpi = CounterLibrary(own_dir, RM_ENV_PMPI_LIBRARY, "libringmaster_pmpi.so");
    const std::string nccl = CounterLibrary(own_dir, RM_ENV_NCCL_LIBRARY, "libringmaster_nccl.so");
    tracks_mpi = !pmpi.empty();
    for (const std::string& library : {pmpi, nccl}) {
      if (library.empty()) continue;
      spawn.env["LD_PRELOAD"] = AppendPreload(spawn.env["LD_PRELOAD"], library);
      counters = AppendPreload(counters, library);
    }
    if (!pmpi.empty() || !nccl.empty()) {
      // A program built with GCC's (dynamic) AddressSanitizer refuses to start when another
      // library is preloaded before its runtime; the counter does not need to come first.
      std::string& asan = spawn.env["ASAN_OPTIONS"];
      if (asan.find("verify_asan_link_order") == std::string::npos) {
        asan = asan.empty() ? "verify_asan_link_order=0"
                            : absl::StrCat(asan, ":verify_asan_link_order=0");
      }
    }
    if (!own_dir.empty()) {
      const std::string path = spawn.env["PATH"];
      spawn.env["PATH"] = path.empty() ? own_dir : absl::StrCat(path, ":", own_dir);
    }
  } else {
    const std::string line =
        absl::StrCat("ringmaster-rank: no progress channel (", created.status().message(),
                     "): hang detection cannot watch this rank\n");
    sinks[1].Write(line);
    log_sink.Write(line);
  }
  if (started->has_container()) {
    spawn.argv = InContainer(*started, spawn, counters, channel.get(), own_dir);
    // The runtime itself runs with the host's preloads, not the counters meant for the rank.
    if (host_preload) {
      spawn.env["LD_PRELOAD"] = *host_preload;
    } else {
      spawn.env.erase("LD_PRELOAD");
    }
  }
  spawn.pipe_output = true;
  // Not a new session: the worker finds the rank by the session orted runs in. A process
  // group of its own lets us signal the workload and whatever it started at once.
  spawn.new_session = false;
  spawn.new_process_group = true;
  spawn.parent_death_signal = SIGKILL;
  absl::StatusOr<Spawned> child = Spawn(spawn);
  if (!child.ok()) {
    const std::string message = std::string(child.status().message());
    const std::string line = absl::StrCat("ringmaster-rank: ", message, "\n");
    sinks[1].Write(line);
    log_sink.Write(line);
    report.set_kind(v1::ReportRankRequest::KIND_EXITED);
    report.set_exit_code(127);
    report.set_message(Utf8Prefix(message, 1024));
    (void)agent.ReportRank(report, std::chrono::seconds(3));
    return 127;
  }

  int fds[2] = {child->stdout_fd, child->stderr_fd};
  LineSplitter splitters[2];
  std::optional<double> last_value;
  std::optional<double> reported_value;
  Clock::time_point last_report;
  auto on_line = [&](std::string_view line) {
    if (auto sample = ParseThroughputLine(line)) last_value = sample->images_per_second;
  };
  // Progress: sent when the channel's counters (or the printed throughput) changed, at most
  // once per second, so the worker and the scheduler see a bounded rate per rank.
  std::optional<rm_rank_snapshot> reported_progress = rm_rank_snapshot{};
  std::optional<double> progress_value;
  bool reported_stopped = false;
  Clock::time_point last_progress;
  Clock::time_point last_check;
  MpiStateClock mpi_clock;
  auto maybe_report_progress = [&](bool force) {
    if (!channel) return;
    // Every pass (50 ms): one load, so that the time in or out of MPI is measured closely.
    mpi_clock.Observe(channel->MpiState(), Clock::now());
    // Looked at four times a second (reading /proc costs a few system calls), sent at most once.
    if (!force && Clock::now() - last_check < std::chrono::milliseconds(250)) return;
    last_check = Clock::now();
    const rm_rank_snapshot now = channel->Read();
    const bool stopped = IsStopped(child->pid);
    if (reported_progress && *reported_progress == now && progress_value == last_value &&
        stopped == reported_stopped) {
      return;
    }
    if (!force && Clock::now() - last_progress < std::chrono::seconds(1)) return;
    v1::ReportRankRequest sample = report;
    sample.set_kind(v1::ReportRankRequest::KIND_PROGRESS);
    v1::RankProgress* p = sample.mutable_progress();
    p->set_collectives_entered(now.collectives_entered);
    p->set_collectives_completed(now.collectives_completed);
    p->set_step(now.progress_step);
    p->set_progress_reports(now.progress_reports);
    if (now.has_images_per_second) p->set_images_per_second(now.images_per_second);
    p->set_stopped(stopped);
    if (tracks_mpi) mpi_clock.Fill(Clock::now(), p->mutable_mpi());
    if (last_value) sample.set_images_per_second(*last_value);
    (void)agent.ReportRank(sample, std::chrono::seconds(2));
    reported_progress = now;
    progress_value = last_value;
    reported_stopped = stopped;
    last_progress = Clock::now();
  };
  auto maybe_report = [&](bool force) {
    maybe_report_progress(force);
    if (!last_value || last_value == reported_value) return;
    if (!force && Clock::now() - last_report < std::chrono::seconds(1)) return;
    v1::ReportRankRequest sample = report;
    sample.set_kind(v1::ReportRankRequest::KIND_THROUGHPUT);
    sample.set_images_per_second(*last_value);
    (void)agent.ReportRank(sample, std::chrono::seconds(2));
    reported_value = last_value;
    last_report = Clock::now();
  };

  bool exited = false;
  int status = 0;
  Clock::time_point exited_at;
  // Set when we were told to stop: the workload gets SIGKILL if it outlives the grace.
  std::optional<Clock::time_point> kill_at;
  std::string buf(64 * 1024, '\0');
  while (true) {
    if (exited &&
        ((fds[0] < 0 && fds[1] < 0) || Clock::now() - exited_at > std::chrono::milliseconds(200))) {
      break;
    }
    pollfd pfds[3];
    int which[3];
    nfds_t n = 0;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      pfds[n] = {fds[i], POLLIN, 0};
      which[n++] = i;
    }
    pfds[n] = {sig_fd, POLLIN, 0};
    which[n++] = 2;
    if (poll(pfds, n, 50) < 0 && errno != EINTR) break;
    for (nfds_t j = 0; j < n; ++j) {
      if ((pfds[j].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      if (which[j] == 2) {
        signalfd_siginfo info;
        while (read(sig_fd, &info, sizeof(info)) == sizeof(info)) {
          if (info.ssi_signo == SIGCHLD) continue;
          kill(-child->pid, static_cast<int>(info.ssi_signo));
          if (!kill_at) kill_at = Clock::now() + kStopGrace;
        }
        continue;
      }
      const int i = which[j];
      const ssize_t got = read(fds[i], buf.data(), buf.size());
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        close(fds[i]);
        fds[i] = -1;
        continue;
      }
      const std::string_view data(buf.data(), static_cast<size_t>(got));
      sinks[i].Write(data);
      log_sink.Write(data);
      splitters[i].Feed(data, on_line);
    }
    // Every child that ended is reaped: the workload, and orphans of it that came to us.
    for (int st = 0;;) {
      const pid_t reaped = waitpid(-1, &st, WNOHANG);
      if (reaped <= 0) break;
      if (reaped == child->pid && !exited) {
        status = st;
        exited = true;
        exited_at = Clock::now();
      }
    }
    if (!exited && kill_at && Clock::now() >= *kill_at) {
      kill(-child->pid, SIGKILL);
      kill_at = Clock::time_point::max();
    }
    maybe_report(false);
  }
  for (int i = 0; i < 2; ++i) {
    splitters[i].Flush(on_line);
    if (fds[i] >= 0) close(fds[i]);
  }
  if (!exited) waitpid(child->pid, &status, 0);
  if (log_fd >= 0) close(log_fd);
  // The rank ends with its program: whatever the program left running goes too, found by its
  // process group and by the rank's tags (for those that left the group).
  ProcessSelector leftovers;
  for (const char* name : {kJobIdEnv, kAttemptEnv, kWorkerIdEnv, RM_ENV_RINGMASTER_RANK}) {
    auto it = started->env().find(name);
    if (it != started->env().end()) leftovers.env_tags[name] = it->second;
  }
  // None can be older than this wrapper: the environments of older processes are not read.
  leftovers.env_started_since_ticks = ProcStartTicks(ReadProcSelfStat()).value_or(0);
  kill(-child->pid, SIGTERM);
  // Nothing is left when we have no children (the usual end: every descendant still alive
  // would have one of them as its ancestor, being our subreaped orphan if not our child); only
  // then is no scan of /proc needed. Else, or where the kernel cannot list children, the
  // leftovers are found by their tags too, stopped, waited for and killed.
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  const std::optional<std::vector<pid_t>> children = ChildrenOfThisProcess();
  if (!children || !children->empty()) {
    auto signal_all = [&](int sig) {
      int n = SignalProcesses(leftovers, sig);
      for (pid_t pid : children.value_or(std::vector<pid_t>{})) n += kill(pid, sig) == 0 ? 1 : 0;
      return n;
    };
    if (signal_all(SIGTERM) > 0) {
      const auto give_up = Clock::now() + std::chrono::seconds(1);
      auto any_left = [&] {
        while (waitpid(-1, nullptr, WNOHANG) > 0) {
        }
        auto now_children = ChildrenOfThisProcess();
        return !FindProcesses(leftovers).empty() || (now_children && !now_children->empty());
      };
      while (any_left() && Clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      (void)signal_all(SIGKILL);
    }
  }
  kill(-child->pid, SIGKILL);
  maybe_report(true);

  report.set_kind(v1::ReportRankRequest::KIND_EXITED);
  int code;
  if (WIFSIGNALED(status)) {
    report.set_signal(WTERMSIG(status));
    code = 128 + WTERMSIG(status);
  } else {
    report.set_exit_code(WEXITSTATUS(status));
    code = WEXITSTATUS(status);
  }
  if (last_value) report.set_images_per_second(*last_value);
  // Briefly: when the worker is gone (killed with us), nobody is left to tell.
  if (absl::Status s = agent.ReportRank(report, std::chrono::seconds(3)); !s.ok()) {
    std::fprintf(stderr, "ringmaster-rank: rank %d: could not report the exit: %s\n", rank,
                 s.ToString().c_str());
  }
  return code;
}

}  // namespace ringmaster::worker
