// When the teardown of a job attempt on this worker sends which signal (the Stop protocol in
// agent.h, steps 2 to 4, and a preemption's grace for the workloads): a next-step function of
// what was sent, when, the time now and the grace. Plain values and a caller's clock; no
// processes are looked at or signalled here. Thread-compatible.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_TEARDOWN_H_
#define RINGMASTER_SERVICES_WORKER_CORE_TEARDOWN_H_

#include <chrono>
#include <optional>

namespace ringmaster::worker {

// One attempt's teardown: when it started, and what was sent so far.
struct Teardown {
  using TimePoint = std::chrono::steady_clock::time_point;

  TimePoint started_at;
  // No signal before this (a normal end's wait for mpirun and orted to exit by themselves);
  // SIGKILL from signal_at + kill_grace.
  TimePoint signal_at;
  // A StopJob with a grace of its own (a preemption): SIGTERM reaches the workloads alone
  // first, and they get this long to exit before the rest of the teardown.
  std::optional<std::chrono::milliseconds> workload_grace;
  bool workloads_termed = false;
  TimePoint workloads_termed_at;
  // The workloads exited, or their grace ran out.
  bool workloads_done = false;
  bool term_sent = false;
  bool kill_sent = false;
};

// A teardown started at `now`; `clean_exit_wait` (zero: none) holds every signal back.
Teardown StartTeardown(Teardown::TimePoint now, std::chrono::milliseconds clean_exit_wait);

// A failure here or the worker's shutdown during the clean-exit wait: signals may go now.
void HastenTeardown(Teardown& teardown, Teardown::TimePoint now);

// What the teardown does on one pass.
struct TeardownStep {
  enum class Target {
    kWorkloads,  // the ranks' workloads alone (a preemption's grace)
    kAll,        // every process of the attempt
  };
  Target target = Target::kAll;
  int signal = 0;  // 0: only look whether anything is left
  // This SIGTERM is the first signal after a clean-exit wait that did not end it (worth a
  // warning: mpirun or orted did not exit by themselves).
  bool after_clean_exit_wait = false;
};

// The next step at `now`, recorded in `teardown` as taken (the signal counts as sent).
// `kill_grace` is the time from SIGTERM to SIGKILL for the processes of the whole attempt.
// Called on every pass, it repeats SIGKILL once that is due, and looks in between.
TeardownStep NextTeardownStep(Teardown& teardown, Teardown::TimePoint now,
                              std::chrono::milliseconds kill_grace);

// The workloads were seen gone during their grace: the rest of the teardown may go on.
inline void WorkloadsGone(Teardown& teardown) { teardown.workloads_done = true; }

// The strongest signal the teardown sent (SIGKILL, SIGTERM, or 0): what a rank that vanished
// unreported during it is taken to have died of.
int StrongestSignalSent(const Teardown& teardown);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_TEARDOWN_H_
