// Processes on this machine: starting programs in sessions of their own, waiting for them, and
// finding (and signalling) every process of a job attempt through /proc, however it was
// started. Linux only. Thread-safe (no shared state).
#ifndef RINGMASTER_SERVICES_WORKER_HOST_PROCESS_H_
#define RINGMASTER_SERVICES_WORKER_HOST_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/host/users.h"

namespace ringmaster::worker {

struct SpawnOptions {
  // argv[0] is looked up on the PATH of `env` when it has no '/'.
  std::vector<std::string> argv;
  // The child's whole environment.
  std::map<std::string, std::string> env;
  // Where stdout and stderr go: pipes (read ends in Spawned) when true, else `output_fd`
  // (both streams), else /dev/null when that is -1.
  bool pipe_output = false;
  int output_fd = -1;
  // Start a new session (and process group) led by the child, so that the child and
  // everything it starts can be found and stopped together.
  bool new_session = true;
  // Without a new session: put the child in a new process group of its own, so that it and
  // its descendants can be signalled together (kill(-pid, ...)).
  bool new_process_group = false;
  // Sent to the child when the *thread* that spawned it exits (prctl PR_SET_PDEATHSIG); 0 for
  // none. Spawn from a thread that outlives the child, as Linux ties this to the thread.
  int parent_death_signal = 0;
  // Run as this user (its groups, gid, then uid are set in the child before exec; the
  // caller must be root). None: as this process's user.
  std::optional<UnixUser> user;
};

struct Spawned {
  pid_t pid = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// Forks and execs. FAILED_PRECONDITION (with errno's text) when the program cannot be run;
// the failed child runs none of our code.
absl::StatusOr<Spawned> Spawn(const SpawnOptions& options);

struct ExitInfo {
  int exit_code = 0;  // 0 when a signal ended it
  int signal = 0;
  // The shell's convention: exit_code, or 128 + signal.
  int ShellCode() const { return signal != 0 ? 128 + signal : exit_code; }
};

// Waits for a child of this process (restarting on EINTR).
ExitInfo WaitForExit(pid_t pid);

// True while `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);

// Fields 3 (state) and 6 (session) of the text of /proc/PID/stat; false when malformed.
bool ParseProcStat(const std::string& text, char* state, pid_t* session);
// Field 22: when the process started, in clock ticks after boot; nullopt when unparsable.
std::optional<uint64_t> ProcStartTicks(const std::string& stat_text);
// Now on the clock of ProcStartTicks.
uint64_t BootTicksNow();

// This process's environment.
std::map<std::string, std::string> CurrentEnvironment();

// Which processes belong to a job attempt: members of one of `sessions`, or processes whose
// environment holds every variable of `env_tags` with that value and every name of
// `env_names` with any value (for ranks that started sessions of their own).
struct ProcessSelector {
  std::set<pid_t> sessions;
  std::map<std::string, std::string> env_tags;
  std::set<std::string> env_names;
  // Only processes started at or after this (ProcStartTicks) match by their environment: the
  // leftovers of a program started then cannot be older, and an older process's environment is
  // then never read (most of a machine's processes).
  uint64_t env_started_since_ticks = 0;
};

// Live (non-zombie) processes matching `selector`, this process excluded.
std::vector<pid_t> FindProcesses(const ProcessSelector& selector);

// Sends `signal` to every process FindProcesses returns; returns how many there were.
int SignalProcesses(const ProcessSelector& selector, int signal);

// The children of this process's main thread, zombies included (/proc/PID/task/PID/children):
// those it started, and orphans that came to it as their subreaper (the kernel hands them to
// the main thread while it lives). nullopt where the kernel has no such file (built without
// CONFIG_PROC_CHILDREN). One file: listing every thread's would leave /proc entries that the
// kernel walks again when the process is reaped, which cost its parent more than the scan saved.
std::optional<std::vector<pid_t>> ChildrenOfThisProcess();

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_PROCESS_H_
