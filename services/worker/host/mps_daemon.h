// MpsDaemon: this worker's NVIDIA MPS control daemon (docs/gpu-sharing.md, "MPS on real GPUs"),
// which enforces GPU shares on real GPUs: its clients (the shared ranks, given its pipe
// directory) get the SMs and device memory their environment allows them. An ordinary process
// of the worker's user, with pipe and log directories of its own (WorkerLayout::MpsDir()), so it
// never meets a daemon the machine's admin runs; it changes no device's compute or MIG mode.
//
// Protocol:
//   1. the first attempt of a job with a GPU share placed on this worker's real GPUs calls
//      Ensure (Agent::OnAssignment): the directories are made and `nvidia-cuda-mps-control -d`
//      runs with them in its environment; it forks the daemon and exits. The daemon counts as
//      up once its pid file is in the pipe directory;
//   2. a missing binary, a start that fails or a daemon that does not come up within
//      start_timeout fails that attempt, naming the worker and why (its limits would otherwise
//      go unenforced); the next shared attempt tries again;
//   3. later attempts find it running; their ranks get the pipe directory (PipeDirectory);
//   4. at the worker's exit, after every job process has stopped, Stop sends it `quit` (with
//      the same environment); at the next start StopLeftover does the same for a daemon an
//      earlier life of this worker (killed before it could) left behind.
//
// Thread-safe: one mutex; Ensure holds it while the daemon starts (seconds at most), so a
// second attempt waits for the first's start instead of starting another daemon.
#ifndef RINGMASTER_SERVICES_WORKER_HOST_MPS_DAEMON_H_
#define RINGMASTER_SERVICES_WORKER_HOST_MPS_DAEMON_H_

#include <chrono>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "worker/core/gpu_share.h"

namespace ringmaster::worker {

struct MpsDaemonOptions {
  // nvidia-cuda-mps-control, looked up on env's PATH when it has no '/' (--mps-control).
  std::string control_binary = kMpsControlBinary;
  // WorkerLayout::MpsDir(): pipe/ and log/ go below it.
  std::string dir;
  // The worker's own environment, which the daemon's is made from (MpsDaemonEnvironment).
  std::map<std::string, std::string> env;
  std::string worker_id;  // for messages
  std::chrono::milliseconds start_timeout{10000};
  std::chrono::milliseconds stop_timeout{10000};
};

class MpsDaemon {
 public:
  // Starts nothing; destruction stops nothing either (Stop does: the agent's Shutdown).
  explicit MpsDaemon(MpsDaemonOptions options);
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  // Starts the daemon unless this object has; its pipe directory. FAILED_PRECONDITION naming the
  // worker and the reason when it cannot be started.
  absl::StatusOr<std::string> Ensure();
  // The pipe directory while the daemon runs; empty before (or after Stop).
  std::string PipeDirectory() const;
  // Sends the daemon this object started `quit`; nothing when it started none.
  void Stop();
  // Sends `quit` to a daemon left in the directories by an earlier life of this worker (its pid
  // file is there); nothing when there is none.
  void StopLeftover();

 private:
  absl::Status Start() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `echo quit | CONTROL`; false with `why` when it failed.
  bool Quit(std::string* why) const;

  const MpsDaemonOptions options_;
  const MpsDirectories dirs_;
  const std::map<std::string, std::string> env_;
  mutable Mutex mu_;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
};

// The file the control daemon writes into its pipe directory once it runs (NVIDIA's MPS guide,
// "Utilities and Daemons").
inline constexpr char kMpsPidFile[] = "nvidia-cuda-mps-control.pid";

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_HOST_MPS_DAEMON_H_
