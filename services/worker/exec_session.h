// The session of one Exec'd command (the Launch protocol in agent.h, step 3): its output
// streamed to the caller until it exited and its pipes closed, and, when the caller gives up
// (`cancelled`, or `output` returning false), SIGTERM to its session and SIGKILL after the
// grace, as sshd stops what it started. Runs on the caller's thread (the RPC's, which spawned
// the command, so PR_SET_PDEATHSIG holds); no shared state, no locks. Which attempt the
// command belongs to and who may run it is the agent's (Agent::Exec).
#ifndef RINGMASTER_SERVICES_WORKER_EXEC_SESSION_H_
#define RINGMASTER_SERVICES_WORKER_EXEC_SESSION_H_

#include <chrono>
#include <functional>
#include <string_view>

#include "host/process.h"

namespace ringmaster::worker {

enum class ExecStream { kStdout, kStderr };

// Reaps `child` (spawned with pipe_output and new_session) and returns how it ended; its pipes
// are closed on return. A descendant that keeps the pipes open is waited for a moment after
// the command's exit, not longer.
ExitInfo PumpExecSession(const Spawned& child, std::chrono::milliseconds kill_grace,
                         const std::function<bool(ExecStream, std::string_view)>& output,
                         const std::function<bool()>& cancelled);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_EXEC_SESSION_H_
