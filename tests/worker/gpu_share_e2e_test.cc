// End to end: jobs that ask for a share of one GPU (JobSpec.gpu_share) on two workers x 2
// simulated t4, shared by two teams through queues of one cohort (nominal 2 t4 each). Sixteen
// quarter-GPU jobs run at once on the four devices, each told its share; a whole-GPU job waits
// until a device has no share left and then runs there; the teams' quotas, borrowing and
// reclaim count shares. Real scheduler, Postgres, Redis and workers.
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/queue.grpc.pb.h"
#include "support/cluster/cluster_test.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using namespace std::chrono_literals;

// Says what it was told of its (simulated) GPU next to its checkpoints, then works until the test
// drops "finish" there; SIGTERM (a preemption) ends it.
constexpr const char* kShare =
    "d=$RINGMASTER_CHECKPOINT_DIR; "
    "echo \"$RINGMASTER_GPU_SHARE $RINGMASTER_SIMULATED_GPUS\" > \"$d/seen-$RINGMASTER_ATTEMPT\"; "
    "trap 'exit 143' TERM; while [ ! -f \"$d/finish\" ]; do sleep 0.2; done";

v1::JobSpec Spec(const std::string& name, const std::string& queue, int32_t share) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_queue(queue);
  spec.set_replicas(1);
  spec.set_gpus_per_replica(1);
  spec.set_gpu_type("t4");
  spec.set_gpu_share(share);
  for (const char* a : {"/bin/sh", "-c", kShare}) spec.mutable_command()->add_argv(a);
  return spec;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class GpuShareE2eTest : public TwoTeamsTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartTwoTeams({"--preemption-grace-ms", "2000"}, "s"));
  }

  std::vector<std::string> SubmitShares(int n, const std::string& queue, int32_t share) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i)
      ids.push_back(SubmitOk(Spec(absl::StrCat(queue, "-", i), queue, share)));
    return ids;
  }

  bool AllRunning(const std::vector<std::string>& ids, std::chrono::seconds timeout = 60s) {
    return WaitFor(
        [&] {
          for (const std::string& id : ids) {
            absl::StatusOr<v1::Job> j = cluster_->GetJob(id);
            if (!j.ok() || j->state() != v1::JOB_STATE_RUNNING) return false;
          }
          return true;
        },
        timeout);
  }

  void Finish(const std::string& id) { std::ofstream(Dir(id) + "/finish") << "\n"; }

  // (worker, GPU index) the job's one rank holds.
  std::pair<std::string, int32_t> DeviceOf(const std::string& id) {
    absl::StatusOr<v1::Job> j = cluster_->GetJob(id);
    if (!j.ok() || j->placement().empty() || j->placement(0).gpu_indices().empty()) return {};
    return {j->placement(0).worker_id(), j->placement(0).gpu_indices(0)};
  }

  v1::ListWorkersResponse Workers() {
    grpc::ClientContext ctx;
    v1::ListWorkersResponse out;
    grpc::Status s = cluster_->scheduler().cluster().ListWorkers(&ctx, {}, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  v1::ResourceStatus QueueT4(const std::string& name) {
    grpc::ClientContext ctx;
    v1::GetQueueRequest req;
    req.set_name(name);
    v1::QueueWithStatus out;
    grpc::Status s =
        v1::QueueService::NewStub(cluster_->scheduler().channel())->GetQueue(&ctx, req, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out.status().resources().count("t4") ? out.status().resources().at("t4")
                                                : v1::ResourceStatus();
  }
};

TEST_F(GpuShareE2eTest, SixteenQuartersShareFourDevicesAndAWholeJobWaitsForOneWithNoShares) {
  // The default queue has no quota: here only the devices decide.
  std::vector<std::string> all = SubmitShares(16, "default", 250);
  ASSERT_TRUE(AllRunning(all)) << cluster_->Logs();

  // Four to a device, and every rank told its share and its one device.
  std::map<std::pair<std::string, int32_t>, std::vector<std::string>> by_device;
  for (const std::string& id : all) by_device[DeviceOf(id)].push_back(id);
  ASSERT_EQ(by_device.size(), 4u);
  for (const auto& [device, ids] : by_device) EXPECT_EQ(ids.size(), 4u) << device.first;
  for (const std::string& id : all) {
    const std::string path = Dir(id) + "/seen-0";
    ASSERT_TRUE(WaitFor([&] { return !Read(path).empty(); }, 10s)) << id;
    EXPECT_EQ(Read(path), absl::StrCat("0.25 ", DeviceOf(id).second, "\n")) << id;
  }
  int shared_devices = 0;
  const v1::ListWorkersResponse listed = Workers();
  for (const v1::WorkerInfo& w : listed.workers()) {
    for (const v1::GpuUse& use : w.gpu_uses()) {
      EXPECT_FALSE(use.whole());
      EXPECT_EQ(use.share(), 1000);
      EXPECT_EQ(use.share_ranks(), 4);
      ++shared_devices;
    }
  }
  EXPECT_EQ(shared_devices, 4);
  EXPECT_EQ(QueueT4("default").in_use_thousandths(), 4000);

  // A whole-GPU job: the device that empties is the only place it may go, and only once its
  // last share ended.
  const std::string w = SubmitOk(Spec("whole", "default", 0));
  const auto device = DeviceOf(all.front());
  const std::vector<std::string>& on_device = by_device[device];
  for (size_t i = 0; i + 1 < on_device.size(); ++i) Finish(on_device[i]);
  for (size_t i = 0; i + 1 < on_device.size(); ++i) {
    EXPECT_EQ(cluster_->WaitState(on_device[i], v1::JOB_STATE_SUCCEEDED).state(),
              v1::JOB_STATE_SUCCEEDED);
  }
  std::this_thread::sleep_for(1s);
  absl::StatusOr<v1::Job> waiting = cluster_->GetJob(w);
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->state(), v1::JOB_STATE_PENDING) << "placed beside a share";
  Finish(on_device.back());
  ASSERT_EQ(cluster_->WaitState(w, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING)
      << cluster_->Logs();
  EXPECT_EQ(DeviceOf(w), device);
  bool whole_seen = false;
  const v1::ListWorkersResponse after = Workers();
  for (const v1::WorkerInfo& info : after.workers()) {
    for (const v1::GpuUse& use : info.gpu_uses()) {
      if (info.worker_id() == device.first && use.index() == device.second) {
        whole_seen = use.whole() && use.share() == 0;
      }
    }
  }
  EXPECT_TRUE(whole_seen);
  const std::string told = Dir(w) + "/seen-0";
  ASSERT_TRUE(WaitFor([&] { return !Read(told).empty(); }, 10s));
  EXPECT_EQ(Read(told), absl::StrCat(" ", device.second, "\n")) << "a whole rank is told no share";
  for (const std::string& id : all) Finish(id);
  Finish(w);
  EXPECT_EQ(cluster_->WaitState(w, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(GpuShareE2eTest, QuotasBorrowingAndReclaimCountShares) {
  // Team A: 8 quarters within its nominal 2, and 2 more borrowed from team B's idle nominal.
  std::vector<std::string> a = SubmitShares(10, "team-a", 250);
  ASSERT_TRUE(AllRunning(a)) << cluster_->Logs();
  v1::ResourceStatus used = QueueT4("team-a");
  EXPECT_EQ(used.in_use_thousandths(), 2500);
  EXPECT_EQ(used.borrowed_thousandths(), 500);
  EXPECT_EQ(used.in_use(), 3);  // rounded up
  EXPECT_EQ(QueueT4("team-b").lent_thousandths(), 500);

  // Team B comes for its nominal 2 in quarters: 6 fit what is left, and two of team A's
  // borrowed quarters are preempted for the last 2.
  std::vector<std::string> b = SubmitShares(8, "team-b", 250);
  ASSERT_TRUE(AllRunning(b)) << cluster_->Logs();
  int preempted = 0, running = 0;
  for (const std::string& id : a) {
    absl::StatusOr<v1::Job> j = cluster_->GetJob(id);
    ASSERT_TRUE(j.ok());
    preempted += j->attempt() > 0;  // a preempted job runs again as its next attempt
    running += j->state() == v1::JOB_STATE_RUNNING;
  }
  EXPECT_EQ(preempted, 2);
  EXPECT_EQ(running, 8);
  EXPECT_EQ(QueueT4("team-a").in_use_thousandths(), 2000);
  EXPECT_EQ(QueueT4("team-b").in_use_thousandths(), 2000);
  for (const std::string& id : a) Finish(id);
  for (const std::string& id : b) Finish(id);
}

TEST_F(GpuShareE2eTest, ATrainerPastItsMemoryLimitFailsAloneBesideItsNeighbour) {
  // Whole-GPU jobs hold three of the four devices: the neighbour's is the only one for shares.
  std::vector<std::string> wholes;
  for (int i = 0; i < 3; ++i)
    wholes.push_back(SubmitOk(Spec(absl::StrCat("whole-", i), "default", 0)));
  ASSERT_TRUE(AllRunning(wholes)) << cluster_->Logs();
  const std::string neighbour = SubmitOk(Spec("neighbour", "default", 500));
  ASSERT_EQ(cluster_->WaitState(neighbour, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  v1::JobSpec spec;
  spec.set_name("too-big");
  spec.set_replicas(1);
  spec.set_gpus_per_replica(1);
  spec.set_gpu_type("t4");
  spec.set_gpu_share(250);
  spec.set_gpu_memory(int64_t{1} << 20);  // 1 MiB: mlp-small needs more
  spec.mutable_trainer()->set_model("mlp-small");
  spec.mutable_trainer()->set_steps(20);
  const std::string trainer = SubmitOk(spec);
  const v1::Job failed = cluster_->WaitState(trainer, v1::JOB_STATE_FAILED);
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED) << cluster_->Logs();
  std::string log;
  for (const auto& w : cluster_->workers()) {
    absl::StatusOr<std::string> l = cluster_->RankLog(w->agent_addr(), trainer, 0);
    if (l.ok() && !l->empty()) log = *l;
  }
  EXPECT_THAT(log, ::testing::HasSubstr("bytes of GPU memory (model mlp-small"));
  EXPECT_THAT(log, ::testing::HasSubstr("RINGMASTER_GPU_MEMORY allows 1048576"));
  absl::StatusOr<v1::Job> still = cluster_->GetJob(neighbour);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->state(), v1::JOB_STATE_RUNNING);
  Finish(neighbour);
  for (const std::string& id : wholes) Finish(id);
  EXPECT_EQ(cluster_->WaitState(neighbour, v1::JOB_STATE_SUCCEEDED).state(),
            v1::JOB_STATE_SUCCEEDED);
}

}  // namespace
}  // namespace ringmaster::test
