// Subprocess: a child program started by a test (a server, a CLI), with its stdout and stderr
// in a log file that failure messages can quote. The child gets PR_SET_PDEATHSIG(SIGKILL), so
// it dies with the test even when the test crashes; note that Linux sends that signal when the
// *thread* that started the child exits, so start long-lived children from the test's main
// thread. The destructor kills (SIGKILL) and reaps a child that still runs. Thread-safe.
#ifndef RINGMASTER_TESTS_SUPPORT_SUBPROCESS_H_
#define RINGMASTER_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::test {

struct SubprocessOptions {
  // argv[0] is looked up on PATH when it has no '/'.
  std::vector<std::string> argv;
  // Added to the test's own environment, overriding variables of the same name.
  std::map<std::string, std::string> env;
  // Where stdout and stderr go (appended). Empty: a fresh file under $TMPDIR (or /tmp), removed
  // again by the destructor.
  std::string log_path;
  // Empty: the test's working directory.
  std::string working_dir;
};

class Subprocess {
 public:
  // Forks and execs. Fails (with the reason, e.g. "No such file or directory") when the
  // program cannot be executed; the failed child never runs test code.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(SubprocessOptions options);
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      std::vector<std::string> argv, std::map<std::string, std::string> env = {});

  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  // "redis-server (pid 42)".
  std::string name() const;

  // True until the child has exited (reaps it when it has).
  bool Running();
  // Sends `signal`; a no-op returning OK when the child has already exited.
  absl::Status Kill(int signal = SIGTERM);
  // Waits until the child exits. Returns its exit code, or 128 + the signal number when a
  // signal ended it (the shell's convention). DEADLINE_EXCEEDED when it still runs after
  // `timeout`.
  absl::StatusOr<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL if it has not exited after `grace`; returns what Wait returns.
  absl::StatusOr<int> Stop(std::chrono::milliseconds grace = std::chrono::seconds(5));

  // The whole log so far.
  std::string Log() const;
  // At most the last `max_bytes` of the log, for failure messages.
  std::string LogTail(size_t max_bytes = 8192) const;

 private:
  Subprocess(pid_t pid, std::string program, std::string log_path, bool owns_log);
  // Reaps the child if it has exited; returns true if it has. Needs mu_.
  bool PollLocked();

  const pid_t pid_;
  const std::string program_;
  const std::string log_path_;
  const bool owns_log_;
  mutable std::mutex mu_;
  std::optional<int> exit_code_;  // set once reaped
};

// The first number of a line of /proc/PID/status ("VmRSS:" in KiB, "Threads:"), of any
// process; -1 when the process or the line is not there.
int64_t ProcStatusNumber(pid_t pid, const std::string& field);

// A program run to its end with stdout and stderr kept apart (a CLI under test).
struct CapturedRun {
  int exit_code = -1;  // or 128 + signal
  std::string out;
  std::string err;
};

// Runs `argv` with `env` added and `stdin_text` on its standard input, waits for it, and
// returns what it wrote. An error when it cannot start or outlives `timeout` (it is killed).
absl::StatusOr<CapturedRun> RunCaptured(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env = {},
                                        const std::string& stdin_text = "",
                                        std::chrono::milliseconds timeout = std::chrono::seconds(120));

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_SUBPROCESS_H_
