#include "check_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "host/file_io.h"

namespace ringmaster::worker {
namespace {

using Clock = std::chrono::steady_clock;

CheckReport Failed(std::string message) {
  CheckReport report;
  report.completed = false;
  report.message = std::move(message);
  return report;
}

std::string Tail(const std::string& path) {
  absl::StatusOr<std::string> tail = ReadFileTail(path, 1000);
  return tail.ok() ? *tail : std::string("(no output)");
}

}  // namespace

CheckReport RunCheck(const CheckRun& run, const std::function<bool(pid_t)>& spawned,
                     const std::function<void(pid_t)>& exited) {
  const auto start = Clock::now();
  unlink(run.result_path.c_str());
  SpawnOptions spawn = run.spawn;
  spawn.new_session = true;
  spawn.parent_death_signal = SIGKILL;
  spawn.output_fd = open(run.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (spawn.output_fd < 0) {
    return Failed(absl::StrCat("cannot open ", run.log_path, ": ", std::strerror(errno)));
  }
  absl::StatusOr<Spawned> child = Spawn(spawn);
  close(spawn.output_fd);
  if (!child.ok())
    return Failed(absl::StrCat("cannot start the check: ", child.status().message()));
  const pid_t pid = child->pid;
  bool timed_out = false;
  if (!spawned(pid)) {
    kill(-pid, SIGKILL);
  } else {
    // Polled: the launcher thread has nothing else to do, and a 5 ms step is noise next to
    // mpirun's own start.
    const auto deadline = start + run.timeout;
    int status = 0;
    for (;;) {
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      if (r < 0 && errno != EINTR) {
        status = 0;
        timed_out = true;  // not our child any more: treat as lost
        break;
      }
      if (Clock::now() >= deadline) {
        timed_out = true;
        kill(-pid, SIGKILL);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!timed_out) {
      // Reaped above; report what it was.
      const ExitInfo info =
          WIFSIGNALED(status) ? ExitInfo{0, WTERMSIG(status)} : ExitInfo{WEXITSTATUS(status), 0};
      exited(pid);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (info.ShellCode() != 0) {
        CheckReport report = Failed(absl::StrCat("the check exited with code ", info.ShellCode(),
                                                 ": ", Tail(run.log_path)));
        report.seconds = seconds;
        return report;
      }
      // With --run-as the result's directory is the team user's: read it as a plain file.
      absl::StatusOr<std::string> text = ReadRegularFile(run.result_path, 64 << 10);
      if (!text.ok())
        return Failed(absl::StrCat("the check wrote no result: ", text.status().message()));
      absl::StatusOr<CheckReport> parsed = ParseCheckResult(*text);
      if (!parsed.ok()) return Failed(std::string(parsed.status().message()));
      CheckReport report = *parsed;
      JudgeCheck(report, run.policy);
      report.seconds = seconds;
      return report;
    }
  }
  WaitForExit(pid);
  kill(-pid, SIGKILL);  // anything left in its session
  exited(pid);
  CheckReport report =
      Failed(timed_out ? absl::StrCat("the check did not end within ", run.timeout.count(),
                                      " ms: ", Tail(run.log_path))
                       : std::string("the attempt is stopping"));
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace ringmaster::worker
