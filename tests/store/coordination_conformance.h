// The conformance suite for PendingQueue, Liveness and LeaderLease: one set of tests that the
// in-memory (unit binary) and Redis (integration binary) implementations both pass. An
// implementation joins with
//   INSTANTIATE_TEST_SUITE_P(Name, CoordinationConformanceTest,
//                            ::testing::Values(CoordinationBackendParam{"Name", Make}),
//                            CoordinationBackendName);
#ifndef RINGMASTER_TESTS_STORE_COORDINATION_CONFORMANCE_H_
#define RINGMASTER_TESTS_STORE_COORDINATION_CONFORMANCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "scheduler/store/coordination.h"

namespace ringmaster::scheduler::store_test {

// Makes coordination objects of one implementation, all over the same (initially empty)
// backing state. Created once per test.
class CoordinationBackend {
 public:
  virtual ~CoordinationBackend() = default;
  virtual absl::StatusOr<std::unique_ptr<PendingQueue>> NewQueue() = 0;
  virtual absl::StatusOr<std::unique_ptr<Liveness>> NewLiveness() = 0;
  // Leases made by one backend share their state, like two replicas on one Redis.
  virtual absl::StatusOr<std::unique_ptr<LeaderLease>> NewLease() = 0;
  // The backing state loses everything, as Redis does on FLUSHALL or an empty restart.
  virtual void LoseEverything() = 0;
  // Lets `ms` of heartbeat time pass: a fake clock moves, or real time passes.
  virtual void AdvanceTime(int64_t ms) = 0;
};

struct CoordinationBackendParam {
  std::string name;
  std::function<std::unique_ptr<CoordinationBackend>()> make;
  friend void PrintTo(const CoordinationBackendParam& param, std::ostream* os) {
    *os << param.name;
  }
};

std::string CoordinationBackendName(const ::testing::TestParamInfo<CoordinationBackendParam>& info);

class CoordinationConformanceTest : public ::testing::TestWithParam<CoordinationBackendParam> {
 protected:
  void SetUp() override;

  CoordinationBackend& backend() { return *backend_; }
  PendingQueue& queue() { return *queue_; }
  Liveness& liveness() { return *liveness_; }

  std::unique_ptr<CoordinationBackend> backend_;
  std::unique_ptr<PendingQueue> queue_;
  std::unique_ptr<Liveness> liveness_;
};

}  // namespace ringmaster::scheduler::store_test

#endif  // RINGMASTER_TESTS_STORE_COORDINATION_CONFORMANCE_H_
