// Running short commands with their output captured (the container runtime's pull, inspect and
// rm), and removing a worker's containers. Thread-safe (no shared state).
#ifndef RINGMASTER_SERVICES_WORKER_HOST_RUNTIME_H_
#define RINGMASTER_SERVICES_WORKER_HOST_RUNTIME_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "worker/host/process.h"

namespace ringmaster::worker {

struct CapturedRun {
  ExitInfo exit;
  std::string text;  // stdout and stderr together, the first 64 KiB
  bool timed_out = false;
};

// Runs argv in a session of its own with `env`, capturing its output; SIGKILL at `deadline`.
// A program that cannot be started exits 127 with the reason as its text.
CapturedRun RunCaptured(const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env,
                        std::chrono::steady_clock::time_point deadline);

// `RUNTIME rm --force --ignore NAME...`; true when it succeeded. `why` gets the runtime's words
// otherwise.
bool RemoveContainers(const std::string& runtime, const std::map<std::string, std::string>& env,
                      const std::vector<std::string>& names, std::string* why);

// Names of every container (running or not) carrying `label`=`value`.
std::vector<std::string> LabelledContainers(const std::string& runtime,
                                            const std::map<std::string, std::string>& env,
                                            const std::string& label, const std::string& value);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_RUNTIME_H_
