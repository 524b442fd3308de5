// Reaper: the agent's housekeeping thread. Every check_interval, or at once when a teardown
// starts (Wake), one pass:
//   1. the launcher's reports (AttemptLauncher::ReportCheckpoints, PollInSessionChecks);
//   2. ranks whose wrapper vanished without reporting are failed (GangState::OnVanished);
//   3. every attempt in teardown takes its next step (core/teardown.h): a signal to its
//      workloads or to all its processes, or only a look at what is left;
//   4. an attempt with nothing left is reported torn down (ranks unreported count as killed by
//      the strongest signal sent) or, after a StopJob, forgotten: its ranks reported gone, its
//      session directories removed, its MASTER_PORT released, its launcher thread joined;
//   5. throughput gauges of jobs forgotten long enough are removed.
// Locks: the table's mutex for the decisions only; /proc scans and signals go without it, so
// RPCs never wait for them. Its own loop mutex guards the wake-up flags; Wake takes it under
// the table's mutex, so it is taken last and nothing is locked while it is held.
#ifndef RINGMASTER_SERVICES_WORKER_REAPER_H_
#define RINGMASTER_SERVICES_WORKER_REAPER_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "agent_metrics.h"
#include "attempt_launcher.h"
#include "attempt_table.h"
#include "common/mutex.h"
#include "core/layout.h"
#include "host/ports.h"

namespace ringmaster::worker {

struct AgentOptions;

class Reaper {
 public:
  // Everything is the agent's and outlives this.
  Reaper(const AgentOptions& options, const WorkerLayout& layout, AttemptTable& table,
         AttemptLauncher& launcher, AgentMetrics& metrics, PortPool& master_ports)
      : options_(options),
        layout_(layout),
        table_(table),
        launcher_(launcher),
        metrics_(metrics),
        master_ports_(master_ports) {}
  ~Reaper() { Stop(); }
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  void Start();
  // Whether the thread runs (started, not stopped).
  bool Running() ABSL_LOCKS_EXCLUDED(loop_mu_);
  // Runs the next pass now.
  void Wake() ABSL_LOCKS_EXCLUDED(loop_mu_);
  // Ends the thread after its current pass; no more passes.
  void Stop() ABSL_LOCKS_EXCLUDED(loop_mu_);

 private:
  void Loop();
  void Pass() ABSL_LOCKS_EXCLUDED(table_.mu());

  const AgentOptions& options_;
  const WorkerLayout& layout_;
  AttemptTable& table_;
  AttemptLauncher& launcher_;
  AgentMetrics& metrics_;
  PortPool& master_ports_;

  Mutex loop_mu_;
  CondVar loop_cv_;
  bool wake_ ABSL_GUARDED_BY(loop_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(loop_mu_) = false;
  std::thread thread_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_REAPER_H_
