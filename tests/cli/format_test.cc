#include "format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// 2024-05-01T12:00:00Z.
constexpr int64_t kNoonMs = 1714564800000;

v1::Job PendingJob() {
  v1::Job job;
  job.set_id("j-3f9c2a41b7d0");
  job.set_state(v1::JOB_STATE_PENDING);
  job.set_pending_reason("needs 8 x t4, 4 free");
  job.set_created_at_ms(kNoonMs - 90 * 1000);
  v1::JobSpec* spec = job.mutable_spec();
  spec->set_name("resnet");
  spec->set_queue("vision");
  spec->set_priority(10);
  spec->set_replicas(4);
  spec->set_gpus_per_replica(2);
  spec->set_gpu_type("t4");
  spec->mutable_trainer()->set_model("mlp");
  return job;
}

v1::Job RunningJob() {
  v1::Job job;
  job.set_id("j-2");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_attempt(1);
  job.set_request_id("req-1");
  job.set_created_at_ms(kNoonMs - 3 * 3600 * 1000);
  job.set_started_at_ms(kNoonMs);
  job.set_message("restarted: rank 1 exited with code 3");
  v1::JobSpec* spec = job.mutable_spec();
  spec->set_name("sweep");
  spec->set_queue("default");
  spec->set_replicas(2);
  spec->set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
  spec->set_backoff_limit(3);
  (*spec->mutable_labels())["team"] = "infra";
  (*spec->mutable_labels())["a"] = "1";
  spec->mutable_command()->add_argv("python3");
  spec->mutable_command()->add_argv("train.py");
  v1::RankPlacement* r0 = job.add_placement();
  r0->set_rank(0);
  r0->set_worker_id("w1");
  r0->set_worker_address("10.0.0.1");
  v1::RankPlacement* r1 = job.add_placement();
  r1->set_rank(1);
  r1->set_worker_id("worker-two");
  r1->set_worker_address("10.0.0.2");
  return job;
}

TEST(FormatTest, RenderTableAlignsColumnsWithoutTrailingSpaces) {
  EXPECT_EQ(RenderTable({"A", "LONG HEADER", "C"}, {{"xxxx", "y", ""}, {"z", "w", "last"}}),
            "A      LONG HEADER   C\n"
            "xxxx   y\n"
            "z      w             last\n");
}

TEST(FormatTest, JobListShowsOneAlignedRowPerJob) {
  v1::ListJobsResponse response;
  *response.add_jobs() = PendingJob();
  *response.add_jobs() = RunningJob();
  EXPECT_EQ(FormatJobList(response, kNoonMs),
            "ID               NAME     QUEUE     STATE     PRIORITY   REPLICAS   GPUS     ATTEMPT"
            "   AGE   REASON\n"
            "j-3f9c2a41b7d0   resnet   vision    PENDING   10         4          8 x t4   0      "
            "   90s   needs 8 x t4, 4 free\n"
            "j-2              sweep    default   RUNNING   0          2          cpu      1      "
            "   3h    restarted: rank 1 exited with code 3\n");
}

TEST(FormatTest, AnElasticJobShowsItsSizeNowAndItsRange) {
  v1::Job job = RunningJob();  // two ranks placed
  job.mutable_spec()->set_replicas(4);
  job.mutable_spec()->set_min_replicas(2);
  job.mutable_spec()->set_max_replicas(8);
  v1::ListJobsResponse response;
  *response.add_jobs() = job;
  EXPECT_THAT(FormatJobList(response, kNoonMs), HasSubstr("   2 (2:8)    "));
  EXPECT_THAT(FormatJob(job), HasSubstr("Replicas:        4 (elastic: 2 to 8; running at 2)\n"));
  EXPECT_THAT(FormatJob(job), HasSubstr("Launch:          mpirun\n"));
  job.clear_placement();
  EXPECT_THAT(FormatJob(job), HasSubstr("Replicas:        4 (elastic: 2 to 8)\n"));
  job.mutable_spec()->set_sizes_divide(256);
  EXPECT_THAT(FormatJob(job),
              HasSubstr("Replicas:        4 (elastic: 2 to 8, sizes dividing 256)\n"));
  job.mutable_spec()->set_sizes_divide(0);
  v1::JobEvent* grown = job.add_resizes();
  grown->set_attempt(1);
  grown->set_time_ms(kNoonMs);
  grown->set_reason("grown from 2 to 4 replicas: 2 x t4 idle in cohort lab for 60 s");
  v1::JobEvent* shrunk = job.add_resizes();
  shrunk->set_attempt(2);
  shrunk->set_time_ms(kNoonMs);
  shrunk->set_reason("shrunk from 4 to 2: queue b reclaims its nominal quota");
  EXPECT_THAT(FormatJob(job),
              HasSubstr("Resizes:         2024-05-01T12:00:00Z attempt 1: grown from 2 to 4 "
                        "replicas: 2 x t4 idle in cohort lab for 60 s\n"
                        "                 2024-05-01T12:00:00Z attempt 2: shrunk from 4 to 2: "
                        "queue b reclaims its nominal quota\n"));
}

TEST(FormatTest, EmptyJobListSaysSo) {
  EXPECT_EQ(FormatJobList(v1::ListJobsResponse(), kNoonMs), "No jobs.\n");
}

TEST(FormatTest, JobShowsPendingReasonAndNoPlacement) {
  const std::string text = FormatJob(PendingJob());
  EXPECT_THAT(text, HasSubstr("ID:              j-3f9c2a41b7d0\n"));
  EXPECT_THAT(text, HasSubstr("State:           PENDING\n"));
  EXPECT_THAT(text, HasSubstr("Pending reason:  needs 8 x t4, 4 free\n"));
  EXPECT_THAT(text, HasSubstr("GPUs:            2 per replica, type t4\n"));
  EXPECT_THAT(text, HasSubstr("Workload:        trainer model=mlp batch_size=64 steps=100\n"));
  EXPECT_THAT(text, HasSubstr("Created:         2024-05-01T11:58:30Z\n"));
  v1::Job checkpointed = PendingJob();
  checkpointed.mutable_spec()->mutable_trainer()->set_checkpoint_every(0);
  EXPECT_THAT(FormatJob(checkpointed),
              HasSubstr("Workload:        trainer model=mlp batch_size=64 steps=100 "
                        "checkpoint_every=0\n"));
  EXPECT_THAT(text, HasSubstr("Started:         -\n"));
  EXPECT_THAT(text, HasSubstr("Placement:       none\n"));
}

TEST(FormatTest, JobShowsItsLastCheckpointOrADash) {
  EXPECT_THAT(FormatJob(PendingJob()), HasSubstr("Last checkpoint: -\n"));
  v1::Job job = RunningJob();
  job.set_last_checkpoint_step(1200);
  job.set_last_checkpoint_time_ms(kNoonMs);
  EXPECT_THAT(FormatJob(job), HasSubstr("Last checkpoint: step 1200 at 2024-05-01T12:00:00Z\n"));
}

TEST(FormatTest, JobShowsPlacementTable) {
  const std::string text = FormatJob(RunningJob());
  EXPECT_THAT(text, HasSubstr("Attempt:         1\n"));
  EXPECT_THAT(text, HasSubstr("Restart policy:  OnFailure (backoff limit 3)\n"));
  EXPECT_THAT(text, HasSubstr("Workload:        command python3 train.py\n"));
  EXPECT_THAT(text, HasSubstr("Labels:          a=1,team=infra\n"));
  EXPECT_THAT(text, HasSubstr("Started:         2024-05-01T12:00:00Z\n"));
  EXPECT_THAT(text, HasSubstr("Exit code:       0\n"));
  EXPECT_THAT(text, HasSubstr("Message:         restarted: rank 1 exited with code 3\n"));
  EXPECT_THAT(text, HasSubstr("Placement:\n"
                              "RANK   WORKER       ADDRESS    GPUS\n"
                              "0      w1           10.0.0.1   cpu\n"
                              "1      worker-two   10.0.0.2   cpu\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("Pending reason")));
}

TEST(FormatTest, JobPlacementListsGpuIndices) {
  v1::Job job = RunningJob();
  job.mutable_placement(0)->add_gpu_indices(0);
  job.mutable_placement(0)->add_gpu_indices(3);
  job.mutable_placement(0)->set_worker_port(7071);
  EXPECT_THAT(FormatJob(job), HasSubstr("0      w1           10.0.0.1:7071   0,3\n"));
}

TEST(FormatTest, UnsetBackoffLimitIsTheSchedulersDefault) {
  v1::Job job = RunningJob();
  job.mutable_spec()->clear_backoff_limit();
  EXPECT_THAT(FormatJob(job), HasSubstr("Restart policy:  OnFailure (default backoff limit)\n"));
  job.mutable_spec()->set_backoff_limit(0);
  EXPECT_THAT(FormatJob(job), HasSubstr("Restart policy:  OnFailure (backoff limit 0)\n"));
}

// An array of 1000 tasks, 50 at once, partway through.
v1::Job RunningArray() {
  v1::Job job;
  job.set_id("j-3f9c2a41b7d0");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_created_at_ms(kNoonMs - 60 * 1000);
  v1::JobSpec* spec = job.mutable_spec();
  spec->set_name("sweep");
  spec->set_queue("default");
  spec->set_replicas(1);
  spec->mutable_command()->add_argv("./task");
  spec->mutable_command()->add_argv("{index}");
  spec->mutable_array()->set_count(1000);
  spec->mutable_array()->set_parallelism(50);
  v1::ArrayStatus* status = job.mutable_array_status();
  status->set_count(1000);
  status->set_waiting(900);
  status->set_pending(40);
  status->set_running(10);
  status->set_succeeded(48);
  status->set_failed(2);
  status->add_failed_indices(4);
  status->add_failed_indices(17);
  return job;
}

TEST(FormatTest, ArrayShowsItsTasksStatesAndFailedIndices) {
  const std::string text = FormatJob(RunningArray());
  EXPECT_THAT(text, HasSubstr("State:           RUNNING\n"
                              "Tasks:           1000 (parallelism 50)\n"
                              "                 waiting 900  pending 40  running 10  succeeded 48"
                              "  failed 2  cancelled 0\n"
                              "Failed indices:  4, 17\n"
                              "Attempt:         0\n"));
  EXPECT_THAT(text, HasSubstr("Workload:        command ./task {index}\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("Array:")));
  EXPECT_THAT(text, HasSubstr("Placement:       none\n"));
}

TEST(FormatTest, ArraySaysWhenOnlyTheLowestFailedIndicesAreListed) {
  v1::Job job = RunningArray();
  job.mutable_spec()->mutable_array()->set_parallelism(0);
  v1::ArrayStatus* status = job.mutable_array_status();
  status->clear_failed_indices();
  for (int32_t i = 0; i < 100; ++i) status->add_failed_indices(i * 2);
  status->set_failed(250);
  const std::string text = FormatJob(job);
  EXPECT_THAT(text, HasSubstr("Tasks:           1000 (no parallelism limit)\n"));
  EXPECT_THAT(text, HasSubstr("Failed indices:  0, 2, 4, "));
  EXPECT_THAT(text, HasSubstr(", 196, 198 (the lowest 100 of 250)\n"));
  // All of them listed: no remark, even at 100.
  status->set_failed(100);
  EXPECT_THAT(FormatJob(job), HasSubstr(", 196, 198\n"));
  // None failed: no line.
  status->clear_failed_indices();
  status->set_failed(0);
  EXPECT_THAT(FormatJob(job), ::testing::Not(HasSubstr("Failed indices:")));
  // A scheduler that sent no status: the size alone.
  job.clear_array_status();
  EXPECT_THAT(FormatJob(job), HasSubstr("Tasks:           1000 (no parallelism limit)\n"
                                        "Attempt:"));
}

TEST(FormatTest, TaskNamesItsArrayAndIndex) {
  v1::Job task = RunningJob();
  task.set_id("j-3f9c2a41b7d0-17");
  task.set_array_id("j-3f9c2a41b7d0");
  task.set_array_index(17);
  EXPECT_THAT(FormatJob(task), HasSubstr("ID:              j-3f9c2a41b7d0-17\n"
                                         "Array:           j-3f9c2a41b7d0 index 17\n"
                                         "Name:            sweep\n"));
  EXPECT_THAT(FormatJob(RunningJob()), ::testing::Not(HasSubstr("Array:")));
}

TEST(FormatTest, JobListShowsATasksColumnOnlyWhenAnArrayIsListed) {
  v1::ListJobsResponse response;
  *response.add_jobs() = RunningArray();
  *response.add_jobs() = RunningJob();
  v1::Job ended = RunningArray();
  ended.set_id("j-4");
  ended.set_state(v1::JOB_STATE_CANCELLED);
  ended.set_message("cancelled by alice");
  ended.mutable_array_status()->set_waiting(0);
  ended.mutable_array_status()->set_pending(0);
  ended.mutable_array_status()->set_running(0);
  ended.mutable_array_status()->set_failed(0);
  ended.mutable_array_status()->set_cancelled(952);
  *response.add_jobs() = ended;
  EXPECT_EQ(FormatJobList(response, kNoonMs),
            "ID               NAME    QUEUE     STATE       TASKS                     PRIORITY   "
            "REPLICAS   GPUS   ATTEMPT   AGE   REASON\n"
            "j-3f9c2a41b7d0   sweep   default   RUNNING     50/1000 ended, 2 failed   0          "
            "1          cpu    0         60s\n"
            "j-2              sweep   default   RUNNING     -                         0          "
            "2          cpu    1         3h    restarted: rank 1 exited with code 3\n"
            "j-4              sweep   default   CANCELLED   1000/1000 ended           0          "
            "1          cpu    0         60s   cancelled by alice\n");
  // Without an array the table is as it always was.
  v1::ListJobsResponse plain;
  *plain.add_jobs() = RunningJob();
  EXPECT_THAT(FormatJobList(plain, kNoonMs), ::testing::StartsWith("ID    NAME    QUEUE     STATE"
                                                                   "     PRIORITY"));
}

TEST(FormatTest, ArrayJsonCarriesItsStatusAndATaskItsArray) {
  absl::StatusOr<std::string> json = ToJson(RunningArray(), /*pretty=*/false);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"array\":{\"count\":1000,\"parallelism\":50}"));
  EXPECT_THAT(*json, HasSubstr("\"array_status\":{\"count\":1000,\"waiting\":900,\"pending\":40,"
                               "\"running\":10,\"succeeded\":48,\"failed\":2,\"cancelled\":0,"
                               "\"failed_indices\":[4,17]}"));
  v1::Job task = RunningJob();
  task.set_array_id("j-3f9c2a41b7d0");
  task.set_array_index(17);
  json = ToJson(task, /*pretty=*/false);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"array_id\":\"j-3f9c2a41b7d0\",\"array_index\":17"));
}

TEST(FormatTest, WorkersGroupGpusByTypeAndMarkSimulated) {
  v1::ListWorkersResponse response;
  v1::WorkerInfo* w1 = response.add_workers();
  w1->set_worker_id("w1");
  w1->set_address("10.0.0.1");
  w1->set_port(7071);
  w1->set_state("READY");
  w1->set_cpu_slots(8);
  w1->set_cpu_slots_used(2);
  w1->set_last_heartbeat_ms(kNoonMs - 3000);
  for (int i = 0; i < 4; ++i) {
    v1::Gpu* gpu = w1->add_gpus();
    gpu->set_index(i);
    gpu->set_type(i < 2 ? "v100" : "t4");
  }
  w1->add_allocated_gpus(0);
  w1->add_allocated_gpus(3);
  v1::WorkerInfo* w2 = response.add_workers();
  w2->set_worker_id("dev");
  w2->set_address("127.0.0.2");
  w2->set_port(7071);
  w2->set_state("READY");
  w2->set_cpu_slots(4);
  for (int i = 0; i < 2; ++i) {
    v1::Gpu* gpu = w2->add_gpus();
    gpu->set_index(i);
    gpu->set_type("t4");
    gpu->set_simulated(true);
  }
  w2->add_allocated_gpus(1);
  v1::WorkerInfo* lost = response.add_workers();
  lost->set_worker_id("gone");
  lost->set_address("10.0.0.9");
  lost->set_state("LOST");
  lost->add_gpus()->set_type("t4");
  lost->set_cpu_slots(16);

  EXPECT_EQ(FormatWorkers(response, kNoonMs),
            "WORKER   ADDRESS          STATE   GPUS (USED/TOTAL)   CPU SLOTS   HEARTBEAT\n"
            "w1       10.0.0.1:7071    READY   t4 1/2, v100 1/2    2/8         3s ago\n"
            "dev      127.0.0.2:7071   READY   t4(sim) 1/2         0/4         -\n"
            "gone     10.0.0.9         LOST    t4 0/1              0/16        -\n"
            "\n"
            "READY totals: GPUs t4 1/2, t4(sim) 1/2, v100 1/2; CPU slots 2/12\n");
}

TEST(FormatTest, EventLinesKeepFixedColumns) {
  v1::JobEvent event;
  event.set_job_id("j-1");
  event.set_seq(3);
  event.set_state(v1::JOB_STATE_FAILED);
  event.set_attempt(2);
  event.set_reason("rank 2 exited\nbadly");
  event.set_exit_code(3);
  event.set_time_ms(kNoonMs);
  EXPECT_EQ(WatchHeader(), "TIME                  SEQ  STATE      ATTEMPT  REASON\n");
  EXPECT_EQ(FormatEvent(event),
            "2024-05-01T12:00:00Z  3    FAILED     2        rank 2 exited badly (exit code 3)\n");
  event.set_reason("rank 2 on w1 exited with code 3");
  EXPECT_EQ(FormatEvent(event),
            "2024-05-01T12:00:00Z  3    FAILED     2        rank 2 on w1 exited with code 3\n");
}

TEST(FormatTest, NamesAndAges) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_CANCELLED), "CANCELLED");
  EXPECT_EQ(RestartPolicyName(v1::RESTART_POLICY_UNSPECIFIED), "Never");
  EXPECT_EQ(FormatAge(0, kNoonMs), "-");
  EXPECT_EQ(FormatAge(kNoonMs - 5 * 60 * 1000, kNoonMs), "5m");
  EXPECT_EQ(FormatAge(kNoonMs - 3 * 86400 * 1000LL, kNoonMs), "3d");
  EXPECT_EQ(FormatTimeMs(0), "-");
}

TEST(FormatTest, JsonUsesProtoFieldNamesAndPrintsZeros) {
  v1::SubmitJobResponse response;
  *response.mutable_job() = PendingJob();
  absl::StatusOr<std::string> json = ToJson(response, /*pretty=*/true);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"id\": \"j-3f9c2a41b7d0\""));
  EXPECT_THAT(*json, HasSubstr("\"state\": \"JOB_STATE_PENDING\""));
  EXPECT_THAT(*json, HasSubstr("\"pending_reason\": \"needs 8 x t4, 4 free\""));
  EXPECT_THAT(*json, HasSubstr("\"existing\": false"));
  EXPECT_THAT(*json, HasSubstr("\"gpus_per_replica\": 2"));
  EXPECT_EQ(json->back(), '\n');

  v1::JobEvent event;
  event.set_job_id("j-1");
  event.set_seq(1);
  absl::StatusOr<std::string> line = ToJson(event, /*pretty=*/false);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(*line,
            "{\"job_id\":\"j-1\",\"seq\":\"1\",\"state\":\"JOB_STATE_UNSPECIFIED\",\"attempt\":0,"
            "\"reason\":\"\",\"exit_code\":0,\"time_ms\":\"0\"}\n");
}

TEST(FormatTest, SharedGpusAreListedUnderTheWorkers) {
  v1::ListWorkersResponse response;
  v1::WorkerInfo* w = response.add_workers();
  w->set_worker_id("w2");
  w->set_address("127.0.0.2");
  w->set_state("READY");
  for (int i = 0; i < 2; ++i) {
    v1::Gpu* gpu = w->add_gpus();
    gpu->set_index(i);
    gpu->set_type("t4");
    gpu->set_memory_bytes(16LL << 30);
  }
  w->add_allocated_gpus(0);
  w->add_allocated_gpus(1);
  v1::GpuUse* shared = w->add_gpu_uses();
  shared->set_index(0);
  shared->set_share(750);
  shared->set_share_ranks(3);
  shared->set_memory(4LL << 30);
  v1::GpuUse* whole = w->add_gpu_uses();
  whole->set_index(1);
  whole->set_whole(true);
  const std::string out = FormatWorkers(response, 0);
  EXPECT_THAT(out, HasSubstr("t4 2/2"));
  EXPECT_THAT(out, HasSubstr("Shared GPUs:\n"));
  EXPECT_THAT(out, HasSubstr("w2       0     0.75/1        3       4294967296/17179869184"));
  EXPECT_THAT(out, Not(HasSubstr("w2       1     ")));

  v1::JobSpec spec;
  spec.set_replicas(4);
  spec.set_gpus_per_replica(1);
  spec.set_gpu_type("t4");
  spec.set_gpu_share(125);
  EXPECT_EQ(FormatGpuRequest(spec), "4 x 0.125 t4");
}

TEST(FormatTest, AWorkerOnProbationSaysSoAndStaysOutOfTheTotals) {
  v1::ListWorkersResponse response;
  v1::WorkerInfo* w = response.add_workers();
  w->set_worker_id("w4");
  w->set_address("127.0.0.4");
  w->set_state("READY");
  w->set_cpu_slots(2);
  w->set_unhealthy_reason("failed a pre-run allreduce check (an admin sees why)");
  w->set_on_probation(true);
  const std::string out = FormatWorkers(response, 0);
  EXPECT_THAT(out, HasSubstr("w4       127.0.0.4   PROBATION"));
  EXPECT_THAT(out, HasSubstr("READY totals: GPUs -; CPU slots 0/0\n"));
  EXPECT_THAT(out, HasSubstr("  w4: failed a pre-run allreduce check (an admin sees why) (on "
                             "probation: the first pre-run check it passes clears it)\n"));
  w->set_state("LOST");
  EXPECT_THAT(FormatWorkers(response, 0), HasSubstr("w4       127.0.0.4   LOST"));
}

}  // namespace
}  // namespace ringmaster::cli

namespace ringmaster::cli {
namespace {

TEST(FormatTest, UnhealthyWorkersShowTheirStateAndReasonAndLeaveTheTotals) {
  v1::ListWorkersResponse response;
  v1::WorkerInfo* ok = response.add_workers();
  ok->set_worker_id("w1");
  ok->set_address("127.0.0.2");
  ok->set_state("READY");
  ok->set_cpu_slots(2);
  v1::WorkerInfo* slow = response.add_workers();
  slow->set_worker_id("w4");
  slow->set_address("127.0.0.4");
  slow->set_state("READY");
  slow->set_cpu_slots(2);
  slow->set_unhealthy_reason("pre-run check of job j-1 attempt 0 failed: w4 was last");
  const std::string out = FormatWorkers(response, 0);
  EXPECT_THAT(out, HasSubstr("w4       127.0.0.4   UNHEALTHY"));
  EXPECT_THAT(out, HasSubstr("READY totals: GPUs -; CPU slots 0/2\n"));
  EXPECT_THAT(out, HasSubstr("\nUnhealthy (ringctl workers clear WORKER):\n"
                             "  w4: pre-run check of job j-1 attempt 0 failed: w4 was last\n"));
}

}  // namespace
}  // namespace ringmaster::cli
