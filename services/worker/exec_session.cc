#include "exec_session.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <thread>

namespace ringmaster::worker {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kChunk = 64 * 1024;

}  // namespace

ExitInfo PumpExecSession(const Spawned& child, std::chrono::milliseconds kill_grace,
                         const std::function<bool(ExecStream, std::string_view)>& output,
                         const std::function<bool()>& cancelled) {
  // Pump output until the command exited and its pipes closed (or, when a descendant keeps
  // them open, a moment after the exit).
  int fds[2] = {child.stdout_fd, child.stderr_fd};
  const ExecStream streams[2] = {ExecStream::kStdout, ExecStream::kStderr};
  bool exited = false;
  ExitInfo info;
  Clock::time_point exited_at;
  bool stopping = false;
  Clock::time_point term_at;
  bool killed = false;
  std::string buf(kChunk, '\0');
  ProcessSelector own;
  own.sessions = {child.pid};
  while (true) {
    if (!exited) {
      int status = 0;
      if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
        exited = true;
        info =
            WIFSIGNALED(status) ? ExitInfo{0, WTERMSIG(status)} : ExitInfo{WEXITSTATUS(status), 0};
        exited_at = Clock::now();
      }
    }
    const bool pipes_open = fds[0] >= 0 || fds[1] >= 0;
    if (exited && (!pipes_open || Clock::now() - exited_at > std::chrono::milliseconds(200))) {
      break;
    }
    if (!stopping && cancelled()) {
      stopping = true;
      term_at = Clock::now();
      (void)SignalProcesses(own, SIGTERM);
    }
    if (stopping && !killed && Clock::now() - term_at >= kill_grace) {
      killed = true;
      (void)SignalProcesses(own, SIGKILL);
    }
    pollfd pfds[2];
    int n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      pfds[n] = {fds[i], POLLIN, 0};
      which[n++] = i;
    }
    if (n == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (poll(pfds, static_cast<nfds_t>(n), 50) <= 0) continue;
    for (int j = 0; j < n; ++j) {
      if ((pfds[j].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const int i = which[j];
      ssize_t got = read(fds[i], buf.data(), buf.size());
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        close(fds[i]);
        fds[i] = -1;
        continue;
      }
      if (!stopping && !output(streams[i], std::string_view(buf.data(), got))) {
        stopping = true;  // the caller is gone: like sshd, stop what it started
        term_at = Clock::now();
        (void)SignalProcesses(own, SIGTERM);
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  return info;
}

}  // namespace ringmaster::worker
