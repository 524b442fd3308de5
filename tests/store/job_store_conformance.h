// The JobStore conformance suite: one set of tests that every JobStore implementation must
// pass (InMemoryJobStore in the unit binary, PostgresJobStore in the integration binary), like
// Ray's store_client_test_base.h. An implementation joins with
//   INSTANTIATE_TEST_SUITE_P(Name, JobStoreConformanceTest,
//                            ::testing::Values(JobStoreBackendParam{"Name", MakeBackend}),
//                            JobStoreBackendName);
#ifndef RINGMASTER_TESTS_STORE_JOB_STORE_CONFORMANCE_H_
#define RINGMASTER_TESTS_STORE_JOB_STORE_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "scheduler/store/job_store.h"

namespace ringmaster::scheduler {

// Readable failure messages for the core structs.
void PrintTo(const JobEvent& event, std::ostream* os);
void PrintTo(const RankPlacement& rank, std::ostream* os);

namespace store_test {

// Makes stores for one implementation. Created once per test.
class JobStoreBackend {
 public:
  virtual ~JobStoreBackend() = default;
  // A store over empty state. Several calls in one test return stores over the SAME state
  // (like scheduler replicas sharing one database).
  virtual absl::StatusOr<std::unique_ptr<JobStore>> NewStore() = 0;
};

struct JobStoreBackendParam {
  std::string name;
  std::function<std::unique_ptr<JobStoreBackend>()> make;
  friend void PrintTo(const JobStoreBackendParam& param, std::ostream* os) { *os << param.name; }
};

std::string JobStoreBackendName(const ::testing::TestParamInfo<JobStoreBackendParam>& info);

class JobStoreConformanceTest : public ::testing::TestWithParam<JobStoreBackendParam> {
 protected:
  void SetUp() override;

  JobStore& store() { return *store_; }
  JobStoreBackend& backend() { return *backend_; }

  std::unique_ptr<JobStoreBackend> backend_;
  std::unique_ptr<JobStore> store_;
};

// A PENDING job as the scheduler would create it.
Job MakeJob(const std::string& id, const std::string& queue = "default", int32_t priority = 0,
            const std::string& request_id = "");
// The event that goes with MakeJob: seq 1, PENDING.
JobEvent FirstEvent(const Job& job);
// Every field a store keeps, compared one by one.
void ExpectSameJob(const Job& actual, const Job& expected);

}  // namespace store_test
}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_TESTS_STORE_JOB_STORE_CONFORMANCE_H_
