// Polling for conditions that become true asynchronously (a server answering, an event
// arriving). Tests wait on a condition, never on a fixed sleep.
#ifndef RINGMASTER_TESTS_SUPPORT_WAIT_FOR_H_
#define RINGMASTER_TESTS_SUPPORT_WAIT_FOR_H_

#include <chrono>
#include <functional>

namespace ringmaster::test {

// Calls `predicate` every `interval` until it returns true (then returns true) or `timeout`
// has passed (then returns false). The predicate is always called at least once, and once more
// at the deadline.
bool WaitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout,
             std::chrono::milliseconds interval = std::chrono::milliseconds(10));

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_WAIT_FOR_H_
