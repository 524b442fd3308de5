#include "worker/host/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "worker/host/file_io.h"

extern char** environ;

namespace ringmaster::worker {
namespace {

[[noreturn]] void ChildFailed(int err_fd) {
  int err = errno;
  ssize_t ignored = write(err_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

// Sanitizers keep state of their own per process, which a child sharing our memory would
// corrupt: their builds spawn by fork.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Runs in the child between fork (or clone) and exec: async-signal-safe calls only. The child
// may share our memory (Spawn): it starts with every signal blocked, puts our handlers back to
// the default before it lets any signal in, and writes nothing of ours but errno.
[[noreturn]] void ExecChild(const SpawnOptions& options, pid_t parent, int out_fd, int err_fd_out,
                            int err_pipe, char* const* argv, char* const* envp) {
  if (options.user) {
    // Raw system calls: glibc's wrappers would signal every thread of the process to change
    // theirs too (setxid), which is not async-signal-safe; the child has one thread. Groups
    // and gid first, while we may still change them; and before PR_SET_PDEATHSIG, which the
    // kernel clears when the credentials change.
    const UnixUser& u = *options.user;
    if (syscall(SYS_setgroups, u.groups.size(), u.groups.data()) != 0 ||
        syscall(SYS_setresgid, u.gid, u.gid, u.gid) != 0 ||
        syscall(SYS_setresuid, u.uid, u.uid, u.uid) != 0) {
      ChildFailed(err_pipe);
    }
  }
  if (options.parent_death_signal != 0) {
    if (prctl(PR_SET_PDEATHSIG, options.parent_death_signal) != 0) ChildFailed(err_pipe);
    // The parent may have died before prctl took effect.
    if (getppid() != parent) _exit(127);
  }
  if (options.new_session && setsid() < 0) ChildFailed(err_pipe);
  if (!options.new_session && options.new_process_group && setpgid(0, 0) != 0) {
    ChildFailed(err_pipe);
  }
  // The worker blocks and ignores signals for its own reasons; programs start clean. Handlers
  // first: a signal let in before would run ours in the child.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action {};
    if (sigaction(sig, nullptr, &action) != 0) continue;
    if (action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN) {
      action.sa_handler = SIG_DFL;
      action.sa_flags = 0;
      sigaction(sig, &action, nullptr);
    }
  }
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0) ChildFailed(err_pipe);
  int o = out_fd >= 0 ? out_fd : null_fd;
  int e = err_fd_out >= 0 ? err_fd_out : (out_fd >= 0 ? out_fd : null_fd);
  if (dup2(o, STDOUT_FILENO) < 0 || dup2(e, STDERR_FILENO) < 0) ChildFailed(err_pipe);
  // Nothing of the parent's (sockets, logs, other jobs' pipes) leaks into the program; the
  // error pipe closes on exec, which tells the parent exec worked.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  execvpe(argv[0], argv, envp);
  ChildFailed(err_pipe);
}

// Field 3 (state) and 6 (session) of /proc/PID/stat; false when unreadable, which includes a
// process that exited between open() and read() (ESRCH): it is not alive, which is what the
// callers need to know.
bool ReadStat(pid_t pid, char* state, pid_t* session, uint64_t* start_ticks = nullptr) {
  absl::StatusOr<std::string> text = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"), 4096);
  if (!text.ok() || !ParseProcStat(*text, state, session)) return false;
  if (start_ticks != nullptr) *start_ticks = ProcStartTicks(*text).value_or(0);
  return true;
}

bool EnvironMatches(pid_t pid, const ProcessSelector& selector) {
  // Unreadable (gone, or another user's process): not one of ours to signal.
  absl::StatusOr<std::string> read = ReadFileToString(absl::StrCat("/proc/", pid, "/environ"));
  if (!read.ok()) return false;
  const std::string& data = *read;
  const auto& tags = selector.env_tags;
  std::set<std::string> found;
  std::set<std::string> names;
  size_t start = 0;
  while (start < data.size()) {
    size_t end = data.find('\0', start);
    if (end == std::string::npos) end = data.size();
    std::string_view entry(data.data() + start, end - start);
    auto eq = entry.find('=');
    if (eq != std::string_view::npos) {
      const std::string name(entry.substr(0, eq));
      auto it = tags.find(name);
      if (it != tags.end() && it->second == entry.substr(eq + 1)) found.insert(name);
      if (selector.env_names.count(name)) names.insert(name);
    }
    start = end + 1;
  }
  return found.size() == tags.size() && names.size() == selector.env_names.size();
}

}  // namespace

std::optional<uint64_t> ProcStartTicks(const std::string& stat_text) {
  const auto close = stat_text.rfind(')');
  if (close == std::string::npos || close + 2 >= stat_text.size()) return std::nullopt;
  // Fields from 3 (state) on; starttime is field 22.
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat_text).substr(close + 2), ' ', absl::SkipEmpty());
  uint64_t ticks = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks)) return std::nullopt;
  return ticks;
}

uint64_t BootTicksNow() {
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  const auto hz = static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  return static_cast<uint64_t>(now.tv_sec) * hz +
         static_cast<uint64_t>(now.tv_nsec) * hz / 1'000'000'000;
}

bool ParseProcStat(const std::string& text, char* state, pid_t* session) {
  // The command name (field 2) is in parentheses and may hold spaces or ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  std::vector<std::string> fields =
      absl::StrSplit(text.substr(close + 2), ' ', absl::SkipEmpty());
  // state ppid pgrp session ...
  int64_t sid = 0;
  if (fields.size() < 4 || fields[0].size() != 1 || !absl::SimpleAtoi(fields[3], &sid)) {
    return false;
  }
  *state = fields[0][0];
  *session = static_cast<pid_t>(sid);
  return true;
}

namespace {

struct ChildArgs {
  const SpawnOptions* options;
  pid_t parent;
  int out_fd, err_fd, err_pipe;
  char* const* argv;
  char* const* envp;
};

int ChildMain(void* arg) {
  const ChildArgs& a = *static_cast<const ChildArgs*>(arg);
  ExecChild(*a.options, a.parent, a.out_fd, a.err_fd, a.err_pipe, a.argv, a.envp);
}

// Starts ExecChild in a child that shares our memory until it execs (as posix_spawn does, with
// CLONE_VM | CLONE_VFORK): fork would copy the page tables of a large multi-threaded process,
// and every page we write afterwards would fault to be copied, on every job's launch. The
// calling thread waits until the child has exec'd or exited; signals stay blocked meanwhile.
pid_t CloneChild(ChildArgs& args) {
  constexpr size_t kStackBytes = 256 * 1024;  // execvpe's PATH search and script fallback
  void* stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = clone(ChildMain, static_cast<char*>(stack) + kStackBytes,
                          CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  const int err = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  munmap(stack, kStackBytes);
  errno = err;
  return pid;
}

}  // namespace

absl::StatusOr<Spawned> Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("Spawn: empty argv");
  // Everything the child needs is built before fork.
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : options.env) env_strings.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_pipe[2] = {-1, -1};
  int err_pipe_fds[2] = {-1, -1};
  int status_pipe[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe_fds[0], err_pipe_fds[1], status_pipe[0],
                   status_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
  };
  if ((options.pipe_output &&
       (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe_fds, O_CLOEXEC) != 0)) ||
      pipe2(status_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    close_all();
    return absl::ResourceExhaustedError(absl::StrCat("pipe2: ", std::strerror(err)));
  }
  const int child_out = options.pipe_output ? out_pipe[1] : options.output_fd;
  const int child_err = options.pipe_output ? err_pipe_fds[1] : -1;
  const pid_t parent = getpid();
  ChildArgs child{&options, parent, child_out, child_err, status_pipe[1], argv.data(), envp.data()};
  const pid_t pid = kSanitized ? fork() : CloneChild(child);
  if (pid < 0) {
    int err = errno;
    close_all();
    return absl::ResourceExhaustedError(
        absl::StrCat(kSanitized ? "fork: " : "clone: ", std::strerror(err)));
  }
  if (pid == 0) ChildMain(&child);  // fork's child
  close(status_pipe[1]);
  status_pipe[1] = -1;
  if (options.pipe_output) {
    close(out_pipe[1]);
    close(err_pipe_fds[1]);
    out_pipe[1] = err_pipe_fds[1] = -1;
  }
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(status_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  status_pipe[0] = -1;
  if (n > 0) {
    WaitForExit(pid);
    close_all();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", options.argv[0], ": ", std::strerror(child_errno)));
  }
  return Spawned{pid, out_pipe[0], err_pipe_fds[0]};
}

ExitInfo WaitForExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ExitInfo{-1, 0};
  }
  if (WIFSIGNALED(status)) return ExitInfo{0, WTERMSIG(status)};
  return ExitInfo{WEXITSTATUS(status), 0};
}

bool ProcessAlive(pid_t pid) {
  char state = 0;
  pid_t session = 0;
  if (pid <= 0 || !ReadStat(pid, &state, &session)) return false;
  return state != 'Z' && state != 'X';
}

std::map<std::string, std::string> CurrentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::vector<pid_t> FindProcesses(const ProcessSelector& selector) {
  std::vector<pid_t> found;
  const bool by_env = !selector.env_tags.empty() || !selector.env_names.empty();
  if (selector.sessions.empty() && !by_env) return found;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return found;
  const pid_t self = getpid();
  while (dirent* entry = readdir(dir)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid == self) continue;
    char state = 0;
    pid_t session = 0;
    uint64_t started = 0;
    if (!ReadStat(pid, &state, &session, &started) || state == 'Z' || state == 'X') continue;
    if (selector.sessions.count(session) ||
        (by_env && started >= selector.env_started_since_ticks && EnvironMatches(pid, selector))) {
      found.push_back(pid);
    }
  }
  closedir(dir);
  return found;
}

std::optional<std::vector<pid_t>> ChildrenOfThisProcess() {
  const pid_t self = getpid();
  absl::StatusOr<std::string> text =
      ReadFileToString(absl::StrCat("/proc/", self, "/task/", self, "/children"), 1 << 20);
  if (!text.ok()) return std::nullopt;
  std::vector<pid_t> children;
  for (absl::string_view word : absl::StrSplit(*text, ' ', absl::SkipWhitespace())) {
    pid_t pid = 0;
    if (absl::SimpleAtoi(word, &pid)) children.push_back(pid);
  }
  return children;
}

int SignalProcesses(const ProcessSelector& selector, int signal) {
  std::vector<pid_t> pids = FindProcesses(selector);
  for (pid_t pid : pids) kill(pid, signal);
  return static_cast<int>(pids.size());
}

}  // namespace ringmaster::worker
