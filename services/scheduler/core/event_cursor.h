// EventCursor: where a watcher of one job's events is. Events reach a watcher twice over (read
// from the store, and handed over by the writer as they are stored); the cursor takes each
// once, in seq order, up to the job's end. Pure; not thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_EVENT_CURSOR_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_EVENT_CURSOR_H_

#include <cstdint>
#include <vector>

#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

class EventCursor {
 public:
  // Calls `take` with each event of `events` after the last one taken, in order, until the
  // job's last event is taken or `take` returns false (the watcher is gone): then done().
  // `stored` events were read from the store after last() and are taken as they come. A
  // handed-over event past the next one means some are missing: Advance stops there and
  // returns true, and the caller reads the store after last().
  template <typename Take>
  bool Advance(const std::vector<JobEvent>& events, bool stored, Take&& take) {
    for (const JobEvent& e : events) {
      if (done_) return false;
      if (e.seq <= last_) continue;
      if (!stored && e.seq != last_ + 1) return true;
      if (!take(e)) {
        done_ = true;
        return false;
      }
      last_ = e.seq;
      done_ = IsTerminal(e.state);
    }
    return false;
  }
  int64_t last() const { return last_; }
  bool done() const { return done_; }

 private:
  int64_t last_ = 0;   // seq of the last event taken
  bool done_ = false;  // the job's last event was taken, or the watcher is gone
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_EVENT_CURSOR_H_
