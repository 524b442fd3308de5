#include "support/subprocess.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace ringmaster::test {
namespace {

std::string Basename(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string DefaultLogPath(const std::string& program) {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/ringmaster-test-logs");
  mkdir(dir.c_str(), 0755);  // EEXIST is fine; a real failure shows up at open()
  return absl::StrCat(dir, "/", Basename(program), "-", getpid(), "-", counter.fetch_add(1),
                      ".log");
}

// Reports errno to the parent through `err_fd` and ends the child.
[[noreturn]] void ChildFailed(int err_fd) {
  int err = errno;
  ssize_t ignored = write(err_fd, &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void ExecChild(pid_t parent, int log_fd, int err_fd, const char* working_dir,
                            char* const* argv, char* const* envp) {
  auto fail = [err_fd]() { ChildFailed(err_fd); };
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail();
  // The parent may have died before prctl took effect.
  if (getppid() != parent) _exit(127);
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0) fail();
  if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0) fail();
  if (working_dir != nullptr && chdir(working_dir) != 0) fail();
  // Keep the test's other descriptors (database connections, sockets) out of the child; the
  // error pipe closes on exec too, which tells the parent that exec succeeded.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  execvpe(argv[0], argv, envp);
  ChildFailed(err_fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    std::vector<std::string> argv, std::map<std::string, std::string> env) {
  SubprocessOptions options;
  options.argv = std::move(argv);
  options.env = std::move(env);
  return Start(std::move(options));
}

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(SubprocessOptions options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("Subprocess: empty argv");
  const std::string& program = options.argv[0];
  bool owns_log = options.log_path.empty();
  std::string log_path = owns_log ? DefaultLogPath(program) : options.log_path;

  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<char*> argv;
  for (auto& arg : options.argv) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    if (!options.env.contains(key)) env_strings.push_back(std::move(entry));
  }
  for (const auto& [key, value] : options.env) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(
        absl::StrCat("Subprocess: open log ", log_path, ": ", std::strerror(errno)));
  }
  std::array<int, 2> err_pipe;
  if (pipe2(err_pipe.data(), O_CLOEXEC) != 0) {
    int err = errno;
    close(log_fd);
    return absl::InternalError(absl::StrCat("Subprocess: pipe2: ", std::strerror(err)));
  }
  const char* working_dir = options.working_dir.empty() ? nullptr : options.working_dir.c_str();
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(log_fd);
    close(err_pipe[0]);
    close(err_pipe[1]);
    return absl::InternalError(absl::StrCat("Subprocess: fork: ", std::strerror(err)));
  }
  if (pid == 0) ExecChild(parent, log_fd, err_pipe[1], working_dir, argv.data(), envp.data());

  close(log_fd);
  close(err_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(err_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n > 0) {
    int status;
    waitpid(pid, &status, 0);
    if (owns_log) unlink(log_path.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("Subprocess: cannot run ", program, ": ", std::strerror(child_errno)));
  }
  return std::unique_ptr<Subprocess>(
      new Subprocess(pid, Basename(program), std::move(log_path), owns_log));
}

Subprocess::Subprocess(pid_t pid, std::string program, std::string log_path, bool owns_log)
    : pid_(pid),
      program_(std::move(program)),
      log_path_(std::move(log_path)),
      owns_log_(owns_log) {}

Subprocess::~Subprocess() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!PollLocked()) {
      kill(pid_, SIGKILL);
      int status;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  if (owns_log_) unlink(log_path_.c_str());
}

std::string Subprocess::name() const { return absl::StrCat(program_, " (pid ", pid_, ")"); }

bool Subprocess::PollLocked() {
  if (exit_code_.has_value()) return true;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return false;
  if (r < 0) {
    // Not our child any more (someone else reaped it): treat as exited, cause unknown.
    exit_code_ = -1;
    return true;
  }
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

bool Subprocess::Running() {
  std::lock_guard<std::mutex> lock(mu_);
  return !PollLocked();
}

absl::Status Subprocess::Kill(int signal) {
  std::lock_guard<std::mutex> lock(mu_);
  if (PollLocked()) return absl::OkStatus();
  if (kill(pid_, signal) != 0) {
    return absl::InternalError(absl::StrCat("kill ", name(), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (PollLocked()) return *exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(name(), " still runs after ", timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

absl::StatusOr<int> Subprocess::Stop(std::chrono::milliseconds grace) {
  if (auto status = Kill(SIGTERM); !status.ok()) return status;
  auto code = Wait(grace);
  if (code.ok()) return code;
  if (auto status = Kill(SIGKILL); !status.ok()) return status;
  return Wait(std::chrono::seconds(10));
}

std::string Subprocess::Log() const {
  std::ifstream in(log_path_, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string Subprocess::LogTail(size_t max_bytes) const {
  std::string log = Log();
  if (log.size() <= max_bytes) return log;
  return absl::StrCat("...", log.substr(log.size() - max_bytes));
}

absl::StatusOr<CapturedRun> RunCaptured(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env,
                                        const std::string& stdin_text,
                                        std::chrono::milliseconds timeout) {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TMPDIR");
  const std::string base =
      absl::StrCat(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp", "/rm-run-", getpid(), "-",
                   ++counter);
  const std::string in = base + ".in", out = base + ".out", err = base + ".err";
  std::ofstream(in) << stdin_text;
  // The shell only redirects, then becomes the program: its exit status is the program's.
  std::vector<std::string> shell = {"/bin/sh", "-c",
                                    "exec \"$0\" \"$@\" <\"$RM_IN\" >\"$RM_OUT\" 2>\"$RM_ERR\""};
  shell.insert(shell.end(), argv.begin(), argv.end());
  std::map<std::string, std::string> full_env = env;
  full_env["RM_IN"] = in;
  full_env["RM_OUT"] = out;
  full_env["RM_ERR"] = err;
  auto slurp = [](const std::string& path) {
    std::ifstream file(path);
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
  };
  auto cleanup = [&] {
    for (const std::string& path : {in, out, err}) unlink(path.c_str());
  };
  absl::StatusOr<std::unique_ptr<Subprocess>> child = Subprocess::Start(std::move(shell), full_env);
  if (!child.ok()) {
    cleanup();
    return child.status();
  }
  absl::StatusOr<int> code = (*child)->Wait(timeout);
  if (!code.ok()) {
    (void)(*child)->Stop();
    cleanup();
    return code.status();
  }
  CapturedRun run{*code, slurp(out), slurp(err)};
  cleanup();
  return run;
}

int64_t ProcStatusNumber(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) != 0) continue;
    long long number = -1;
    return std::sscanf(line.c_str() + field.size(), "%lld", &number) == 1 ? number : -1;
  }
  return -1;
}

}  // namespace ringmaster::test
