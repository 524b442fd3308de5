#include "worker/host/runtime.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringmaster::worker {

using Clock = std::chrono::steady_clock;

CapturedRun RunCaptured(const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env,
                        Clock::time_point deadline) {
  CapturedRun out;
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.env = env;
  spawn.pipe_output = true;
  spawn.new_session = true;
  spawn.parent_death_signal = SIGKILL;
  absl::StatusOr<Spawned> child = Spawn(spawn);
  if (!child.ok()) {
    out.exit.exit_code = 127;
    out.text = std::string(child.status().message());
    return out;
  }
  int fds[2] = {child->stdout_fd, child->stderr_fd};
  char buf[4096];
  while (fds[0] >= 0 || fds[1] >= 0) {
    if (Clock::now() >= deadline) {
      kill(-child->pid, SIGKILL);
      out.timed_out = true;
      break;
    }
    pollfd pfds[2];
    int which[2];
    nfds_t n = 0;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      pfds[n] = {fds[i], POLLIN, 0};
      which[n++] = i;
    }
    if (poll(pfds, n, 100) < 0 && errno != EINTR) break;
    for (nfds_t j = 0; j < n; ++j) {
      if ((pfds[j].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = read(fds[which[j]], buf, sizeof(buf));
      if (got <= 0) {
        close(fds[which[j]]);
        fds[which[j]] = -1;
        continue;
      }
      if (out.text.size() < (64 << 10)) out.text.append(buf, static_cast<size_t>(got));
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  out.exit = WaitForExit(child->pid);
  return out;
}

bool RemoveContainers(const std::string& runtime, const std::map<std::string, std::string>& env,
                      const std::vector<std::string>& names, std::string* why) {
  if (names.empty()) return true;
  std::vector<std::string> argv = {runtime, "rm", "--force", "--ignore", "--time", "0"};
  argv.insert(argv.end(), names.begin(), names.end());
  CapturedRun run = RunCaptured(argv, env, Clock::now() + std::chrono::seconds(60));
  if (run.exit.ShellCode() == 0) return true;
  if (why != nullptr) *why = std::string(absl::StripAsciiWhitespace(run.text));
  return false;
}

std::vector<std::string> LabelledContainers(const std::string& runtime,
                                            const std::map<std::string, std::string>& env,
                                            const std::string& label, const std::string& value) {
  CapturedRun run = RunCaptured({runtime, "ps", "--all", "--format", "{{.Names}}", "--filter",
                                 absl::StrCat("label=", label, "=", value)},
                                env, Clock::now() + std::chrono::seconds(60));
  std::vector<std::string> names;
  if (run.exit.ShellCode() != 0) return names;
  for (absl::string_view line : absl::StrSplit(run.text, '\n', absl::SkipWhitespace())) {
    names.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return names;
}

}  // namespace ringmaster::worker
