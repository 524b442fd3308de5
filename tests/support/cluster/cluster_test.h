// The fixture of a suite whose tests share one Cluster (starting and stopping one takes
// seconds): its SetUpTestSuite calls StartCluster, every test fails at once when the cluster
// did not start, and a failed test prints what the cluster's processes logged. A suite that
// needs a fresh cluster per test starts its own and prints the same with PrintLogsOnFailure.
// Not thread-safe: gtest runs one suite at a time, between its SetUpTestSuite and
// TearDownTestSuite.
#ifndef RINGMASTER_TESTS_SUPPORT_CLUSTER_CLUSTER_TEST_H_
#define RINGMASTER_TESTS_SUPPORT_CLUSTER_CLUSTER_TEST_H_

#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "support/cluster/cluster.h"

namespace ringmaster::test {

// Everything the cluster's processes printed, when the running test has failed.
inline void PrintLogsOnFailure(const Cluster* cluster) {
  if (cluster != nullptr && ::testing::Test::HasFailure()) std::cerr << cluster->Logs() << "\n";
}

class ClusterTest : public ::testing::Test {
 protected:
  // From SetUpTestSuite, inside ASSERT_NO_FATAL_FAILURE: the cluster with `scheduler_args`,
  // and the workers of `workers` READY.
  static void StartCluster(std::vector<std::string> scheduler_args, const WorkerSet& workers) {
    StartCluster(std::move(scheduler_args));
    if (cluster_ == nullptr) return;
    absl::Status ready = cluster_->AddWorkers(workers);
    ASSERT_TRUE(ready.ok()) << ready << "\n" << cluster_->Logs();
  }
  // The cluster without workers (the suite adds its own).
  static void StartCluster(std::vector<std::string> scheduler_args = {}) {
    auto cluster = Cluster::Start("", std::move(scheduler_args));
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
  }

  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(cluster_, nullptr) << "the cluster did not start"; }

  void TearDown() override { PrintLogsOnFailure(cluster_); }

  // Whatever a failed test left running must not hold the next one's slots.
  static void CancelLiveJobs() {
    for (const v1::Job& job : cluster_->LiveJobs()) (void)cluster_->Cancel(job.id());
  }

  static inline Cluster* cluster_ = nullptr;
};

// The fixture of a suite whose every test gets a cluster of its own, shared by two teams: two
// workers of 2 simulated t4 each and the queues team-a and team-b of cohort "lab", 2 t4 of
// nominal quota each, which reclaim from any borrower.
class TwoTeamsTest : public ::testing::Test {
 protected:
  // From SetUp, inside ASSERT_NO_FATAL_FAILURE; the workers' ids start with `worker_prefix`.
  void StartTwoTeams(std::vector<std::string> scheduler_args, const std::string& worker_prefix) {
    auto cluster = Cluster::Start("", std::move(scheduler_args));
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    absl::Status ready =
        cluster_->AddWorkers({.prefix = worker_prefix, .cpu_slots = 2, .simulated_gpus = 2});
    ASSERT_TRUE(ready.ok()) << ready << "\n" << cluster_->Logs();
    absl::Status queues = cluster_->CreateCohortQueues({"team-a", "team-b"}, "lab", "t4", 2);
    ASSERT_TRUE(queues.ok()) << queues;
  }

  void TearDown() override {
    if (cluster_ == nullptr) return;
    PrintLogsOnFailure(cluster_.get());
    for (const v1::Job& job : cluster_->LiveJobs()) (void)cluster_->Cancel(job.id());
  }

  std::string SubmitOk(const v1::JobSpec& spec) {
    auto id = cluster_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }

  // The job's checkpoint directory (RINGMASTER_CHECKPOINT_DIR), under the workers' default
  // --checkpoint-root, which all workers of the machine share.
  static std::string Dir(const std::string& job) { return "/tmp/ringmaster-checkpoints/" + job; }

  std::unique_ptr<Cluster> cluster_;
};

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_CLUSTER_CLUSTER_TEST_H_
