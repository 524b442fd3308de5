#include "worker/host/mps_daemon.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "worker/host/file_io.h"
#include "worker/host/process.h"
#include "worker/host/runtime.h"

namespace ringmaster::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(20);
constexpr size_t kMaxLogText = 1000;
// The clients' pipes must be reachable by every user the worker runs ranks as (--run-as);
// only the worker's user writes the directories.
constexpr auto kDirectoryMode =
    std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
    std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
    std::filesystem::perms::others_exec;

bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// The child's exit, or nullopt when it is still running at `deadline` (then it is killed).
std::optional<ExitInfo> WaitUntil(pid_t pid, Clock::time_point deadline) {
  while (true) {
    int status = 0;
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) {
      if (WIFSIGNALED(status)) return ExitInfo{0, WTERMSIG(status)};
      return ExitInfo{WEXITSTATUS(status), 0};
    }
    if (got < 0 && errno != EINTR) return ExitInfo{-1, 0};
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      WaitForExit(pid);
      return std::nullopt;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace

MpsDaemon::MpsDaemon(MpsDaemonOptions options)
    : options_(std::move(options)),
      dirs_(MpsDirectoriesUnder(options_.dir)),
      env_(MpsDaemonEnvironment(options_.env, dirs_)) {}

absl::StatusOr<std::string> MpsDaemon::Ensure() {
  MutexLock lock(&mu_);
  if (!running_) {
    if (absl::Status started = Start(); !started.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", options_.worker_id,
                       " cannot enforce GPU shares on its GPUs: the MPS control daemon (",
                       options_.control_binary, ") did not start: ", started.message()));
    }
    running_ = true;
    RM_LOG(kInfo) << "MPS control daemon started for GPU shares (pipes in " << dirs_.pipe
                  << ", logs in " << dirs_.log << ")";
  }
  return dirs_.pipe;
}

std::string MpsDaemon::PipeDirectory() const {
  MutexLock lock(&mu_);
  return running_ ? dirs_.pipe : "";
}

absl::Status MpsDaemon::Start() {
  for (const std::string& dir : {dirs_.pipe, dirs_.log}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!ec) std::filesystem::permissions(dir, kDirectoryMode, ec);
    if (ec)
      return absl::FailedPreconditionError(absl::StrCat("cannot make ", dir, ": ", ec.message()));
  }
  // A pid file of an earlier daemon would pass for the new one's.
  std::error_code ignored;
  std::filesystem::remove(dirs_.pipe + "/" + kMpsPidFile, ignored);
  const std::string start_log = dirs_.log + "/control-start.log";
  const int log_fd = open(start_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", start_log, ": ", std::strerror(errno)));
  }
  SpawnOptions spawn;
  spawn.argv = MpsStartArgv(options_.control_binary);
  spawn.env = env_;
  spawn.output_fd = log_fd;
  spawn.new_session = true;
  absl::StatusOr<Spawned> child = Spawn(spawn);
  close(log_fd);
  if (!child.ok()) return child.status();
  const Clock::time_point deadline = Clock::now() + options_.start_timeout;
  const std::optional<ExitInfo> exit = WaitUntil(child->pid, deadline);
  auto log_text = [&start_log] {
    absl::StatusOr<std::string> text = ReadFileToString(start_log, 64 << 10);
    std::string words = text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
    if (words.size() > kMaxLogText) words = words.substr(0, kMaxLogText) + "...";
    return words.empty() ? std::string("(no output)") : words;
  };
  if (!exit) {
    return absl::DeadlineExceededError(
        absl::StrCat("`", options_.control_binary, " -d` did not return within ",
                     options_.start_timeout.count(), " ms; its output: ", log_text()));
  }
  if (exit->ShellCode() != 0) {
    return absl::FailedPreconditionError(absl::StrCat("`", options_.control_binary,
                                                      " -d` exited with ", exit->ShellCode(),
                                                      "; its output: ", log_text()));
  }
  const std::string pid_file = dirs_.pipe + "/" + kMpsPidFile;
  while (!Exists(pid_file)) {
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no ", kMpsPidFile, " in ", dirs_.pipe, " within ", options_.start_timeout.count(),
          " ms of its start; see the daemon's log in ", dirs_.log));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  return absl::OkStatus();
}

bool MpsDaemon::Quit(std::string* why) const {
  const CapturedRun run =
      RunCaptured(MpsQuitArgv(options_.control_binary), env_, Clock::now() + options_.stop_timeout);
  if (!run.timed_out && run.exit.ShellCode() == 0) return true;
  *why = run.timed_out ? "it did not answer in time"
                       : absl::StrCat("exit ", run.exit.ShellCode(), ": ",
                                      absl::StripAsciiWhitespace(run.text));
  return false;
}

void MpsDaemon::Stop() {
  MutexLock lock(&mu_);
  if (!running_) return;
  running_ = false;
  std::string why;
  if (Quit(&why)) {
    RM_LOG(kInfo) << "MPS control daemon stopped";
  } else {
    RM_LOG(kWarning) << "cannot stop the MPS control daemon (pipes in " << dirs_.pipe
                     << "): " << why;
  }
}

void MpsDaemon::StopLeftover() {
  MutexLock lock(&mu_);
  if (running_ || !Exists(dirs_.pipe + "/" + kMpsPidFile)) return;
  std::string why;
  if (Quit(&why)) {
    RM_LOG(kWarning) << "stopped the MPS control daemon an earlier run of worker "
                     << options_.worker_id << " left (pipes in " << dirs_.pipe << ")";
  } else {
    RM_LOG(kWarning) << "an earlier run of worker " << options_.worker_id
                     << " left an MPS control daemon that did not take `quit`: " << why;
  }
}

}  // namespace ringmaster::worker
