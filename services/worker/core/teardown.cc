#include "worker/core/teardown.h"

#include <csignal>

namespace ringmaster::worker {

Teardown StartTeardown(Teardown::TimePoint now, std::chrono::milliseconds clean_exit_wait) {
  Teardown teardown;
  teardown.started_at = now;
  teardown.signal_at = now + clean_exit_wait;
  return teardown;
}

void HastenTeardown(Teardown& teardown, Teardown::TimePoint now) {
  if (teardown.signal_at > now) teardown.signal_at = now;
}

TeardownStep NextTeardownStep(Teardown& teardown, Teardown::TimePoint now,
                              std::chrono::milliseconds kill_grace) {
  TeardownStep step;
  if (teardown.workload_grace && !teardown.workloads_done && now >= teardown.signal_at) {
    // mpirun and orted wait, so that they do not tear the ranks down under their workloads,
    // which get the whole grace to checkpoint.
    if (!teardown.workloads_termed) {
      teardown.workloads_termed = true;
      teardown.workloads_termed_at = now;
      return {TeardownStep::Target::kWorkloads, SIGTERM};
    }
    if (now - teardown.workloads_termed_at < *teardown.workload_grace) {
      return {TeardownStep::Target::kWorkloads, 0};
    }
    teardown.workloads_done = true;  // the grace ran out: on with the rest in this same pass
  }
  if (now < teardown.signal_at) return step;  // the clean-exit wait: only look
  if (!teardown.term_sent) {
    teardown.term_sent = true;
    step.signal = SIGTERM;
    step.after_clean_exit_wait = teardown.signal_at > teardown.started_at;
  } else if (now - teardown.signal_at >= kill_grace) {
    teardown.kill_sent = true;
    step.signal = SIGKILL;
  }
  return step;
}

int StrongestSignalSent(const Teardown& teardown) {
  if (teardown.kill_sent) return SIGKILL;
  if (teardown.term_sent || teardown.workloads_termed) return SIGTERM;
  return 0;
}

}  // namespace ringmaster::worker
