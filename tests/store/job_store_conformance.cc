#include "job_store_conformance.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "support/status_test_util.h"

namespace ringmaster::scheduler {

void PrintTo(const JobEvent& event, std::ostream* os) {
  *os << "JobEvent{" << event.job_id << " #" << event.seq << " " << JobStateName(event.state)
      << " attempt " << event.attempt << " '" << event.reason << "' exit " << event.exit_code
      << " t " << event.time_ms << "}";
}

void PrintTo(const RankPlacement& rank, std::ostream* os) {
  *os << "Rank{" << rank.rank << " on " << rank.worker_id << "@" << rank.worker_address << " gpus";
  for (int32_t gpu : rank.gpu_indices) *os << " " << gpu;
  *os << "}";
}

namespace store_test {
namespace {

using ::ringmaster::test::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr int64_t kT0 = 1'700'000'000'000;

std::vector<std::string> Ids(const std::vector<Job>& jobs) {
  std::vector<std::string> ids;
  for (const auto& job : jobs) ids.push_back(job.id);
  return ids;
}

JobEvent Event(const Job& job, int64_t seq, JobState state, const std::string& reason = "") {
  JobEvent event;
  event.job_id = job.id;
  event.seq = seq;
  event.state = state;
  event.attempt = job.attempt;
  event.reason = reason;
  event.time_ms = kT0 + seq;
  return event;
}

// `job` placed on two workers and STARTING, as the placement loop would write it.
Job Started(Job job) {
  job.state = JobState::kStarting;
  job.pending_reason.clear();
  job.placement = {RankPlacement{0, "w1", "127.0.0.2", {0, 1}},
                   RankPlacement{1, "w2", "127.0.0.3", {3}}};
  job.token = "tok-" + job.id;
  job.last_event_seq = 2;
  job.updated_at_ms = kT0 + 2;
  job.started_at_ms = kT0 + 2;
  return job;
}

Worker MakeWorker(const std::string& id, int gpus) {
  Worker worker;
  worker.id = id;
  worker.address = "127.0.0." + std::to_string(10 + gpus);
  worker.port = 7071 + gpus;
  for (int i = 0; i < gpus; ++i) {
    worker.gpus.push_back(Gpu{i, i % 2 == 0 ? "t4" : "v100", int64_t{16} << 30, i == 2});
  }
  worker.cpu_slots = 4;
  worker.registered_at_ms = kT0;
  worker.last_heartbeat_ms = kT0 + 500;
  return worker;
}

void ExpectSameWorker(const Worker& actual, const Worker& expected) {
  EXPECT_EQ(actual.id, expected.id);
  EXPECT_EQ(actual.address, expected.address);
  EXPECT_EQ(actual.port, expected.port);
  EXPECT_EQ(actual.gpus, expected.gpus) << "worker " << expected.id;
  EXPECT_EQ(actual.cpu_slots, expected.cpu_slots);
  EXPECT_EQ(actual.state, expected.state);
  EXPECT_EQ(actual.registered_at_ms, expected.registered_at_ms);
  EXPECT_EQ(actual.last_heartbeat_ms, expected.last_heartbeat_ms);
}

}  // namespace

std::string JobStoreBackendName(const ::testing::TestParamInfo<JobStoreBackendParam>& info) {
  return info.param.name;
}

void JobStoreConformanceTest::SetUp() {
  backend_ = GetParam().make();
  ASSERT_NE(backend_, nullptr);
  RM_ASSERT_OK_AND_ASSIGN(store_, backend_->NewStore());
}

Job MakeJob(const std::string& id, const std::string& queue, int32_t priority,
            const std::string& request_id) {
  Job job;
  job.id = id;
  job.request_id = request_id;
  job.spec.name = "train-" + id;
  job.spec.queue = queue;
  job.spec.priority = priority;
  job.spec.replicas = 2;
  job.spec.gpus_per_replica = 1;
  job.spec.gpu_type = "t4";
  job.spec.command = CommandWorkload{{"python3", "train.py", "--lr=0.1"},
                                     {{"NCCL_DEBUG", "INFO"}, {"QUOTE", "a \"b\" \\ c"}}};
  job.spec.restart_policy = RestartPolicy::kOnFailure;
  job.spec.backoff_limit = 3;
  job.spec.max_runtime_seconds = 3600;
  job.spec.labels = {{"team", "vision"}};
  job.state = JobState::kPending;
  job.pending_reason = "needs 2 x t4, 0 free";
  job.last_event_seq = 1;
  job.created_at_ms = kT0;
  job.updated_at_ms = kT0;
  return job;
}

JobEvent FirstEvent(const Job& job) { return Event(job, 1, JobState::kPending, "submitted"); }

void ExpectSameJob(const Job& actual, const Job& expected) {
  EXPECT_EQ(actual.id, expected.id);
  EXPECT_TRUE(actual.spec == expected.spec) << "spec of " << expected.id << " differs";
  EXPECT_EQ(actual.state, expected.state) << JobStateName(actual.state);
  EXPECT_EQ(actual.attempt, expected.attempt);
  EXPECT_EQ(actual.request_id, expected.request_id);
  EXPECT_EQ(actual.seq, expected.seq);
  EXPECT_EQ(actual.pending_reason, expected.pending_reason);
  EXPECT_EQ(actual.placement, expected.placement);
  EXPECT_EQ(actual.token, expected.token);
  EXPECT_EQ(actual.last_event_seq, expected.last_event_seq);
  EXPECT_EQ(actual.created_at_ms, expected.created_at_ms);
  EXPECT_EQ(actual.updated_at_ms, expected.updated_at_ms);
  EXPECT_EQ(actual.started_at_ms, expected.started_at_ms);
  EXPECT_EQ(actual.finished_at_ms, expected.finished_at_ms);
  EXPECT_EQ(actual.exit_code, expected.exit_code);
  EXPECT_EQ(actual.message, expected.message);
  EXPECT_EQ(actual.image_digest, expected.image_digest);
  EXPECT_EQ(actual.preemptions, expected.preemptions);
  EXPECT_EQ(actual.last_replicas, expected.last_replicas);
}

// --- Create and get ----------------------------------------------------------------------

TEST_P(JobStoreConformanceTest, CreateAssignsIncreasingSeqAndGetReturnsTheJob) {
  Job a = MakeJob("j-a", "default", 0, "req-a");
  Job b = MakeJob("j-b");
  b.spec.command.reset();
  b.spec.trainer = TrainerWorkload{"mlp", 64, 100, 10};
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult ca, store().CreateJob(a, FirstEvent(a)));
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult cb, store().CreateJob(b, FirstEvent(b)));
  EXPECT_FALSE(ca.existing);
  EXPECT_FALSE(cb.existing);
  EXPECT_GT(ca.job.seq, 0);
  EXPECT_GT(cb.job.seq, ca.job.seq);
  a.seq = ca.job.seq;
  b.seq = cb.job.seq;
  ExpectSameJob(ca.job, a);
  ExpectSameJob(cb.job, b);
  RM_ASSERT_OK_AND_ASSIGN(Job got_a, store().GetJob("j-a"));
  RM_ASSERT_OK_AND_ASSIGN(Job got_b, store().GetJob("j-b"));
  ExpectSameJob(got_a, a);
  ExpectSameJob(got_b, b);
}

TEST_P(JobStoreConformanceTest, CreateStoresTheFirstEvent) {
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 0));
  EXPECT_THAT(events, ElementsAre(FirstEvent(job)));
}

TEST_P(JobStoreConformanceTest, CreateFilesAnEventWithoutJobIdUnderTheJob) {
  Job job = MakeJob("j-1");
  JobEvent event = FirstEvent(job);
  event.job_id.clear();
  RM_ASSERT_OK(store().CreateJob(job, event));
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 0));
  EXPECT_THAT(events, ElementsAre(FirstEvent(job)));
}

TEST_P(JobStoreConformanceTest, CreateWithASeenRequestIdReturnsTheEarlierJobAndWritesNothing) {
  Job first = MakeJob("j-1", "default", 0, "req-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(first, FirstEvent(first)));
  Job again = MakeJob("j-2", "other", 5, "req-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult repeated, store().CreateJob(again, FirstEvent(again)));
  EXPECT_TRUE(repeated.existing);
  ExpectSameJob(repeated.job, created.job);
  EXPECT_THAT(store().GetJob("j-2"), StatusIs(absl::StatusCode::kNotFound));
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, store().ListJobs({}));
  EXPECT_THAT(Ids(jobs), ElementsAre("j-1"));
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 0));
  EXPECT_THAT(events, SizeIs(1));
}

TEST_P(JobStoreConformanceTest, JobsWithoutRequestIdAreNeverDeduplicated) {
  Job a = MakeJob("j-1");
  Job b = MakeJob("j-2");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult ca, store().CreateJob(a, FirstEvent(a)));
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult cb, store().CreateJob(b, FirstEvent(b)));
  EXPECT_FALSE(ca.existing);
  EXPECT_FALSE(cb.existing);
  EXPECT_EQ(cb.job.request_id, "");
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-2"));
  EXPECT_EQ(got.request_id, "");
}

TEST_P(JobStoreConformanceTest, ConcurrentCreatesWithOneRequestIdMakeExactlyOneJob) {
  constexpr int kThreads = 16;
  std::vector<absl::StatusOr<CreateJobResult>> results(kThreads, absl::UnknownError("not run"));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      // Every call mints its own job id, as SubmitJob does; only the request id is shared.
      Job job = MakeJob(absl::StrCat("j-", i), "default", 0, "req-shared");
      while (!go.load()) std::this_thread::yield();
      results[i] = store().CreateJob(job, FirstEvent(job));
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  int created = 0;
  std::set<std::string> ids;
  for (const auto& result : results) {
    RM_ASSERT_OK(result);
    if (!result->existing) ++created;
    ids.insert(result->job.id);
  }
  EXPECT_EQ(created, 1);
  ASSERT_THAT(ids, SizeIs(1));
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, store().ListJobs({}));
  EXPECT_THAT(Ids(jobs), ElementsAre(*ids.begin()));
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents(*ids.begin(), 0));
  EXPECT_THAT(events, SizeIs(1));
}

TEST_P(JobStoreConformanceTest, CreateWithATakenJobIdIsAlreadyExists) {
  Job job = MakeJob("j-1", "default", 0, "req-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  Job same_id = MakeJob("j-1", "default", 0, "req-2");
  EXPECT_THAT(store().CreateJob(same_id, FirstEvent(same_id)),
              StatusIs(absl::StatusCode::kAlreadyExists));
}

TEST_P(JobStoreConformanceTest, CreateRejectsAJobWithoutIdOrAnEventOfAnotherJob) {
  Job no_id = MakeJob("");
  EXPECT_THAT(store().CreateJob(no_id, FirstEvent(no_id)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Job job = MakeJob("j-1");
  JobEvent other = FirstEvent(MakeJob("j-other"));
  EXPECT_THAT(store().CreateJob(job, other), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store().GetJob("j-1"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(JobStoreConformanceTest, UnknownJobsAreNotFound) {
  EXPECT_THAT(store().GetJob("j-missing"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().ListEvents("j-missing", 0), StatusIs(absl::StatusCode::kNotFound));
  Job ghost = MakeJob("j-missing");
  EXPECT_THAT(store().UpdateJob(ghost, std::nullopt), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().UpdateJob(ghost, Event(ghost, 2, JobState::kCancelled)),
              StatusIs(absl::StatusCode::kNotFound));
}

// --- Listing -----------------------------------------------------------------------------

TEST_P(JobStoreConformanceTest, ListJobsIsNewestFirstAndHonoursTheLimit) {
  for (int i = 0; i < 5; ++i) {
    Job job = MakeJob(absl::StrCat("j-", i));
    RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  }
  RM_ASSERT_OK_AND_ASSIGN(auto all, store().ListJobs({}));
  EXPECT_THAT(Ids(all), ElementsAre("j-4", "j-3", "j-2", "j-1", "j-0"));
  JobFilter two;
  two.limit = 2;
  RM_ASSERT_OK_AND_ASSIGN(auto newest, store().ListJobs(two));
  EXPECT_THAT(Ids(newest), ElementsAre("j-4", "j-3"));
}

TEST_P(JobStoreConformanceTest, ListJobsFiltersByStateAndQueue) {
  // j-0..j-5 alternate queues a/b; j-1 and j-4 are RUNNING.
  for (int i = 0; i < 6; ++i) {
    Job job = MakeJob(absl::StrCat("j-", i), i % 2 == 0 ? "a" : "b");
    RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
    if (i == 1 || i == 4) {
      Job running = Started(job);
      running.state = JobState::kRunning;
      RM_ASSERT_OK(store().UpdateJob(running, Event(job, 2, JobState::kRunning)));
    }
  }
  JobFilter running;
  running.state = JobState::kRunning;
  RM_ASSERT_OK_AND_ASSIGN(auto r, store().ListJobs(running));
  EXPECT_THAT(Ids(r), ElementsAre("j-4", "j-1"));
  JobFilter queue_a;
  queue_a.queue = "a";
  RM_ASSERT_OK_AND_ASSIGN(auto a, store().ListJobs(queue_a));
  EXPECT_THAT(Ids(a), ElementsAre("j-4", "j-2", "j-0"));
  JobFilter pending_b;
  pending_b.state = JobState::kPending;
  pending_b.queue = "b";
  RM_ASSERT_OK_AND_ASSIGN(auto pb, store().ListJobs(pending_b));
  EXPECT_THAT(Ids(pb), ElementsAre("j-5", "j-3"));
  JobFilter none;
  none.state = JobState::kFailed;
  RM_ASSERT_OK_AND_ASSIGN(auto n, store().ListJobs(none));
  EXPECT_THAT(n, IsEmpty());
}

TEST_P(JobStoreConformanceTest, ListJobsPagesByKeysetBelowASeq) {
  std::vector<int64_t> seqs;
  for (int i = 0; i < 5; ++i) {
    Job job = MakeJob(absl::StrCat("j-", i), i % 2 == 0 ? "a" : "b");
    RM_ASSERT_OK_AND_ASSIGN(auto created, store().CreateJob(job, FirstEvent(job)));
    seqs.push_back(created.job.seq);
  }
  JobFilter page;
  page.limit = 2;
  RM_ASSERT_OK_AND_ASSIGN(auto first, store().ListJobs(page));
  ASSERT_THAT(Ids(first), ElementsAre("j-4", "j-3"));
  EXPECT_EQ(first.back().seq, seqs[3]) << "listed jobs carry their seq, the paging key";
  page.before_seq = first.back().seq;
  RM_ASSERT_OK_AND_ASSIGN(auto second, store().ListJobs(page));
  EXPECT_THAT(Ids(second), ElementsAre("j-2", "j-1"));
  page.before_seq = second.back().seq;
  RM_ASSERT_OK_AND_ASSIGN(auto last, store().ListJobs(page));
  EXPECT_THAT(Ids(last), ElementsAre("j-0"));
  // A job submitted meanwhile is newer than every cursor: later pages do not shift.
  Job late = MakeJob("j-late");
  RM_ASSERT_OK(store().CreateJob(late, FirstEvent(late)));
  page.before_seq = first.back().seq;
  RM_ASSERT_OK_AND_ASSIGN(auto again, store().ListJobs(page));
  EXPECT_THAT(Ids(again), ElementsAre("j-2", "j-1"));
  // With a filter, the cursor skips to the matching jobs below it.
  JobFilter queue_a;
  queue_a.queue = "a";
  queue_a.before_seq = seqs[4];
  RM_ASSERT_OK_AND_ASSIGN(auto a, store().ListJobs(queue_a));
  EXPECT_THAT(Ids(a), ElementsAre("j-2", "j-0"));
  queue_a.before_seq = seqs[0];
  RM_ASSERT_OK_AND_ASSIGN(auto none, store().ListJobs(queue_a));
  EXPECT_THAT(none, IsEmpty());
}

TEST_P(JobStoreConformanceTest, ListJobsSelectsByLabels) {
  const std::vector<std::map<std::string, std::string>> labels = {
      {{"team", "vision"}, {"env", "prod"}},
      {{"team", "vision"}, {"env", "dev"}, {"gpu", "t4"}},
      {{"team", "speech"}},
      {},
  };
  for (size_t i = 0; i < labels.size(); ++i) {
    Job job = MakeJob(absl::StrCat("j-", i));
    job.spec.labels = labels[i];
    RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  }
  auto select = [&](const std::string& selector) -> std::vector<std::string> {
    JobFilter filter;
    auto parsed = ParseLabelSelector(selector);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (parsed.ok()) filter.labels = *parsed;
    auto jobs = store().ListJobs(filter);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    return jobs.ok() ? Ids(*jobs) : std::vector<std::string>{};
  };
  EXPECT_THAT(select("team=vision"), ElementsAre("j-1", "j-0"));
  EXPECT_THAT(select("team==vision,env=dev"), ElementsAre("j-1"));
  EXPECT_THAT(select("env!=prod"), ElementsAre("j-3", "j-2", "j-1"));
  EXPECT_THAT(select("gpu"), ElementsAre("j-1"));
  EXPECT_THAT(select("!team"), ElementsAre("j-3"));
  EXPECT_THAT(select("team=vision,!gpu"), ElementsAre("j-0"));
  EXPECT_THAT(select("team=nobody"), IsEmpty());
  // Values are compared as text, quotes and all (no SQL or JSON leaks through).
  EXPECT_THAT(select("team=vision' OR 'x"), IsEmpty());
}

// Arrays (core/array.h): a task's id names its array and index; a list without an array leaves
// tasks out, a list of one array has only its tasks, and the tally counts them by state.
TEST_P(JobStoreConformanceTest, ArraysAreListedAsOneJobAndTheirTasksTalliedApart) {
  Job array = MakeJob("j-0a");
  array.spec.array = ArraySpec{100, 4};
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult stored, store().CreateJob(array, FirstEvent(array)));
  EXPECT_TRUE(stored.job.spec == array.spec) << "the array spec round-trips";
  RM_ASSERT_OK_AND_ASSIGN(ArrayTally none, store().TallyArray("j-0a"));
  EXPECT_EQ(none, ArrayTally{});
  const JobState states[] = {JobState::kSucceeded, JobState::kFailed,  JobState::kCancelled,
                             JobState::kRunning,   JobState::kPending, JobState::kFailed};
  const int32_t indices[] = {0, 1, 2, 3, 4, 10};
  for (int i = 0; i < 6; ++i) {
    Job task = MakeJob(absl::StrCat("j-0a-", indices[i]));
    RM_ASSERT_OK(store().CreateJob(task, FirstEvent(task)).status());
    if (states[i] == JobState::kPending) continue;
    task.state = states[i];
    task.last_event_seq = 2;
    RM_ASSERT_OK(store().UpdateJob(task, Event(task, 2, states[i])));
  }
  Job other_task = MakeJob("j-0b-0");
  RM_ASSERT_OK(store().CreateJob(other_task, FirstEvent(other_task)).status());
  Job plain = MakeJob("j-0c");
  RM_ASSERT_OK(store().CreateJob(plain, FirstEvent(plain)).status());

  RM_ASSERT_OK_AND_ASSIGN(ArrayTally tally, store().TallyArray("j-0a"));
  EXPECT_EQ(tally, (ArrayTally{11, 1, 1, 1, 2, 1, {1, 10}}));
  RM_ASSERT_OK_AND_ASSIGN(auto listed, store().ListJobs(JobFilter{}));
  EXPECT_EQ(Ids(listed), (std::vector<std::string>{"j-0c", "j-0a"})) << "no tasks";
  JobFilter tasks;
  tasks.array_id = "j-0a";
  tasks.limit = 4;
  RM_ASSERT_OK_AND_ASSIGN(auto first, store().ListJobs(tasks));
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"j-0a-10", "j-0a-4", "j-0a-3", "j-0a-2"}));
  tasks.before_seq = first.back().seq;
  tasks.state = JobState::kFailed;
  RM_ASSERT_OK_AND_ASSIGN(auto rest, store().ListJobs(tasks));
  EXPECT_EQ(Ids(rest), (std::vector<std::string>{"j-0a-1"}));
}

TEST_P(JobStoreConformanceTest, ListJobsIncludesPlacements) {
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  Job started = Started(job);
  RM_ASSERT_OK(store().UpdateJob(started, Event(job, 2, JobState::kStarting)));
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, store().ListJobs({}));
  ASSERT_THAT(jobs, SizeIs(1));
  EXPECT_EQ(jobs[0].placement, started.placement);
}

TEST_P(JobStoreConformanceTest, AJobOfGpuSharesKeepsItsShareInItsSpecAndPlacement) {
  Job job = MakeJob("j-1");
  job.team = "vision";
  job.spec.gpus_per_replica = 1;
  job.spec.gpu_share = 250;
  job.spec.gpu_memory = int64_t{4} << 30;
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  Job started = job;
  started.state = JobState::kStarting;
  started.attempt = 1;
  RankPlacement rank{0, "w1", "127.0.0.2", {1}, 7071};
  rank.gpu_share = 250;
  rank.gpu_memory = int64_t{4} << 30;
  rank.team = "vision";  // a share's team is its job's (Worker::shares_one_team)
  started.placement = {rank};
  RM_ASSERT_OK(store().UpdateJob(started, Event(job, 2, JobState::kStarting)));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.spec.gpu_share, 250);
  EXPECT_EQ(got.spec.gpu_memory, int64_t{4} << 30);
  EXPECT_EQ(got.placement, started.placement);
  RM_ASSERT_OK_AND_ASSIGN(auto active, store().ListActiveJobs());
  ASSERT_THAT(active, SizeIs(1));
  EXPECT_EQ(active[0].placement, started.placement);
  // A job stored before shares existed reads as whole GPUs.
  Job whole = MakeJob("j-2");
  RM_ASSERT_OK(store().CreateJob(whole, FirstEvent(whole)));
  RM_ASSERT_OK_AND_ASSIGN(Job old, store().GetJob("j-2"));
  EXPECT_EQ(old.spec.gpu_share, 0);
  EXPECT_EQ(old.spec.gpu_memory, 0);
}

TEST_P(JobStoreConformanceTest, ListActiveJobsReturnsUnfinishedJobsInSeqOrderWithPlacements) {
  std::vector<Job> jobs;
  for (int i = 0; i < 5; ++i) {
    Job job = MakeJob(absl::StrCat("j-", i));
    RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
    jobs.push_back(created.job);
  }
  Job started = Started(jobs[1]);
  RM_ASSERT_OK(store().UpdateJob(started, Event(started, 2, JobState::kStarting)));
  for (int i : {2, 3}) {
    Job done = jobs[i];
    done.state = i == 2 ? JobState::kSucceeded : JobState::kCancelled;
    done.finished_at_ms = kT0 + 9;
    RM_ASSERT_OK(store().UpdateJob(done, Event(done, 2, done.state)));
  }
  RM_ASSERT_OK_AND_ASSIGN(auto active, store().ListActiveJobs());
  EXPECT_THAT(Ids(active), ElementsAre("j-0", "j-1", "j-4"));
  ASSERT_THAT(active, SizeIs(3));
  EXPECT_EQ(active[1].placement, started.placement);
  EXPECT_EQ(active[1].state, JobState::kStarting);
}

// --- Updates -----------------------------------------------------------------------------

TEST_P(JobStoreConformanceTest, UpdateJobWritesTheMutableFieldsAndAppendsTheEvent) {
  Job job = MakeJob("j-1", "default", 0, "req-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
  Job started = Started(created.job);
  // Fields the store does not change after creation, even when the caller does.
  Job update = started;
  update.spec.name = "renamed";
  update.request_id = "req-other";
  update.seq = 999;
  update.created_at_ms = 1;
  RM_ASSERT_OK(store().UpdateJob(update, Event(job, 2, JobState::kStarting, "placed")));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  ExpectSameJob(got, started);

  Job failed = started;
  failed.state = JobState::kFailed;
  failed.attempt = 1;
  failed.placement.clear();
  failed.exit_code = 3;
  failed.message = "rank 1 exited with code 3";
  failed.finished_at_ms = kT0 + 7;
  failed.updated_at_ms = kT0 + 7;
  failed.last_event_seq = 3;
  JobEvent failed_event = Event(failed, 3, JobState::kFailed, "rank 1 exited with code 3");
  failed_event.exit_code = 3;
  RM_ASSERT_OK(store().UpdateJob(failed, failed_event));
  RM_ASSERT_OK_AND_ASSIGN(got, store().GetJob("j-1"));
  ExpectSameJob(got, failed);

  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 0));
  EXPECT_THAT(events, ElementsAre(FirstEvent(job), Event(job, 2, JobState::kStarting, "placed"),
                                  failed_event));
  RM_ASSERT_OK_AND_ASSIGN(auto after_two, store().ListEvents("j-1", 2));
  EXPECT_THAT(after_two, ElementsAre(failed_event));
  RM_ASSERT_OK_AND_ASSIGN(auto after_all, store().ListEvents("j-1", 3));
  EXPECT_THAT(after_all, IsEmpty());
}

TEST_P(JobStoreConformanceTest, UpdateJobReplacesThePlacement) {
  Job job = MakeJob("j-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
  Job started = Started(created.job);
  RM_ASSERT_OK(store().UpdateJob(started, std::nullopt));
  Job moved = started;
  moved.placement = {RankPlacement{0, "w9", "127.0.0.9", {7}}};
  RM_ASSERT_OK(store().UpdateJob(moved, std::nullopt));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_THAT(got.placement, ElementsAre(RankPlacement{0, "w9", "127.0.0.9", {7}}));
  Job requeued = moved;
  requeued.state = JobState::kPending;
  requeued.placement.clear();
  RM_ASSERT_OK(store().UpdateJob(requeued, std::nullopt));
  RM_ASSERT_OK_AND_ASSIGN(got, store().GetJob("j-1"));
  EXPECT_THAT(got.placement, IsEmpty());
}

TEST_P(JobStoreConformanceTest, PlacementComesBackInRankOrderAndCpuRanksHaveNoGpus) {
  Job job = MakeJob("j-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
  Job started = Started(created.job);
  started.placement = {RankPlacement{2, "w3", "h3", {}}, RankPlacement{0, "w1", "h1", {5, 4}},
                       RankPlacement{1, "w2", "h2", {0}}};
  RM_ASSERT_OK(store().UpdateJob(started, std::nullopt));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_THAT(got.placement,
              ElementsAre(RankPlacement{0, "w1", "h1", {5, 4}}, RankPlacement{1, "w2", "h2", {0}},
                          RankPlacement{2, "w3", "h3", {}}));
}

TEST_P(JobStoreConformanceTest, APlacementNamingARankTwiceIsInvalidArgument) {
  Job job = MakeJob("j-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
  Job started = Started(created.job);
  started.placement.push_back(RankPlacement{1, "w3", "h3", {0}});
  EXPECT_THAT(store().UpdateJob(started, std::nullopt),
              StatusIs(absl::StatusCode::kInvalidArgument));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.state, JobState::kPending);
}

TEST_P(JobStoreConformanceTest, UpdateJobWithoutEventAppendsNone) {
  Job job = MakeJob("j-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
  Job waiting = created.job;
  waiting.pending_reason = "needs 2 x t4, 1 free";
  RM_ASSERT_OK(store().UpdateJob(waiting, std::nullopt));
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 0));
  EXPECT_THAT(events, SizeIs(1));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.pending_reason, "needs 2 x t4, 1 free");
}

TEST_P(JobStoreConformanceTest, TerminalJobsRefuseUpdatesWithFailedPrecondition) {
  int n = 0;
  for (JobState terminal : {JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    Job job = MakeJob(absl::StrCat("j-", n++));
    RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
    Job done = created.job;
    done.state = terminal;
    done.message = "the end";
    RM_ASSERT_OK(store().UpdateJob(done, Event(done, 2, terminal)));

    Job revived = Started(done);
    revived.state = JobState::kPending;
    EXPECT_THAT(store().UpdateJob(revived, Event(done, 3, JobState::kPending)),
                StatusIs(absl::StatusCode::kFailedPrecondition))
        << JobStateName(terminal);
    Job again = done;
    again.message = "changed";
    EXPECT_THAT(store().UpdateJob(again, std::nullopt),
                StatusIs(absl::StatusCode::kFailedPrecondition))
        << JobStateName(terminal);
    RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob(job.id));
    ExpectSameJob(got, done);
    RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents(job.id, 0));
    EXPECT_THAT(events, SizeIs(2));
  }
}

TEST_P(JobStoreConformanceTest, AnEventSeqStoredBeforeIsAlreadyExistsAndChangesNothing) {
  Job job = MakeJob("j-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
  Job started = Started(created.job);
  // seq 1 is the creation event: the whole update must roll back, placement included.
  EXPECT_THAT(store().UpdateJob(started, Event(job, 1, JobState::kStarting)),
              StatusIs(absl::StatusCode::kAlreadyExists));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  ExpectSameJob(got, created.job);
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 0));
  EXPECT_THAT(events, ElementsAre(FirstEvent(job)));
}

TEST_P(JobStoreConformanceTest, UpdateRejectsAnEventOfAnotherJob) {
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  EXPECT_THAT(store().UpdateJob(job, Event(MakeJob("j-2"), 2, JobState::kRunning)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(JobStoreConformanceTest, ConcurrentUpdatesOfOneJobAllLand) {
  Job job = MakeJob("j-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
  constexpr int kThreads = 8;
  std::vector<absl::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Job update = created.job;
      update.pending_reason = absl::StrCat("try ", i);
      results[i] = store().UpdateJob(update, Event(job, 2 + i, JobState::kPending));
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& result : results) RM_EXPECT_OK(result);
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 0));
  ASSERT_THAT(events, SizeIs(kThreads + 1));
  for (int i = 0; i < kThreads + 1; ++i) EXPECT_EQ(events[i].seq, i + 1);
}

TEST_P(JobStoreConformanceTest, StoresShareState) {
  RM_ASSERT_OK_AND_ASSIGN(auto other, backend().NewStore());
  Job job = MakeJob("j-1", "default", 0, "req-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  RM_ASSERT_OK_AND_ASSIGN(Job got, other->GetJob("j-1"));
  EXPECT_EQ(got.request_id, "req-1");
  Job again = MakeJob("j-2", "default", 0, "req-1");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult repeated, other->CreateJob(again, FirstEvent(again)));
  EXPECT_TRUE(repeated.existing);
  EXPECT_EQ(repeated.job.id, "j-1");
}

// --- Workers -----------------------------------------------------------------------------

TEST_P(JobStoreConformanceTest, UpsertWorkerInsertsAndReplacesById) {
  Worker w2 = MakeWorker("w2", 3);
  Worker w1 = MakeWorker("w1", 0);
  w1.gpus.push_back(Gpu{0, "odd \"type\"\n", 1, false});
  RM_ASSERT_OK(store().UpsertWorker(w2));
  RM_ASSERT_OK(store().UpsertWorker(w1));
  RM_ASSERT_OK_AND_ASSIGN(auto workers, store().ListWorkers());
  ASSERT_THAT(workers, SizeIs(2));
  ExpectSameWorker(workers[0], w1);
  ExpectSameWorker(workers[1], w2);

  Worker lost = w2;
  lost.state = WorkerState::kLost;
  lost.gpus.resize(1);
  lost.address = "127.0.0.99";
  lost.last_heartbeat_ms = kT0 + 9000;
  RM_ASSERT_OK(store().UpsertWorker(lost));
  RM_ASSERT_OK_AND_ASSIGN(workers, store().ListWorkers());
  ASSERT_THAT(workers, SizeIs(2));
  ExpectSameWorker(workers[1], lost);
}

TEST_P(JobStoreConformanceTest, AWorkerWithoutGpusKeepsNone) {
  Worker cpu_only = MakeWorker("w-cpu", 0);
  RM_ASSERT_OK(store().UpsertWorker(cpu_only));
  RM_ASSERT_OK_AND_ASSIGN(auto workers, store().ListWorkers());
  ASSERT_THAT(workers, SizeIs(1));
  ExpectSameWorker(workers[0], cpu_only);
}

TEST_P(JobStoreConformanceTest, AWorkerKeepsItsUnhealthyReasonUntilCleared) {
  Worker w = MakeWorker("w-slow", 1);
  w.unhealthy_reason = "pre-run check of job j-1 attempt 0 failed: worker w-slow was last";
  RM_ASSERT_OK(store().UpsertWorker(w));
  RM_ASSERT_OK_AND_ASSIGN(auto workers, store().ListWorkers());
  ASSERT_THAT(workers, SizeIs(1));
  EXPECT_EQ(workers[0].unhealthy_reason, w.unhealthy_reason);
  w.unhealthy_reason.clear();
  RM_ASSERT_OK(store().UpsertWorker(w));
  RM_ASSERT_OK_AND_ASSIGN(workers, store().ListWorkers());
  EXPECT_EQ(workers[0].unhealthy_reason, "");
}

// --- Pre-run check baselines ---------------------------------------------------------------

TEST_P(JobStoreConformanceTest, CheckBaselinesAreStoredPerShapeAndReplaced) {
  RM_ASSERT_OK_AND_ASSIGN(auto none, store().ListCheckBaselines());
  EXPECT_THAT(none, IsEmpty());
  RM_ASSERT_OK(store().PutCheckBaseline({"2x1/cpu", 1.25, 1, kT0}));
  RM_ASSERT_OK(store().PutCheckBaseline({"1x4/cpu", 3.5, 2, kT0 + 1}));
  RM_ASSERT_OK(store().PutCheckBaseline({"2x1/cpu", 1.5, 2, kT0 + 2}));
  RM_ASSERT_OK_AND_ASSIGN(auto baselines, store().ListCheckBaselines());
  ASSERT_THAT(baselines, SizeIs(2));
  EXPECT_EQ(baselines[0], (CheckBaseline{"1x4/cpu", 3.5, 2, kT0 + 1}));
  EXPECT_EQ(baselines[1], (CheckBaseline{"2x1/cpu", 1.5, 2, kT0 + 2}));
  EXPECT_THAT(store().PutCheckBaseline({"", 1, 1, kT0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(JobStoreConformanceTest, AWorkerWithoutIdIsInvalidArgument) {
  EXPECT_THAT(store().UpsertWorker(MakeWorker("", 1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  RM_ASSERT_OK_AND_ASSIGN(auto workers, store().ListWorkers());
  EXPECT_THAT(workers, IsEmpty());
}

}  // namespace store_test
}  // namespace ringmaster::scheduler

namespace ringmaster::scheduler::store_test {
namespace {

JobWrite CreateWrite(const Job& job) {
  return {JobWrite::Kind::kCreate, job, FirstEvent(job), false, std::nullopt, std::nullopt};
}

JobWrite UpdateWrite(const Job& job, int64_t seq, const std::string& reason,
                     bool placement_changed) {
  Job next = job;
  next.last_event_seq = seq;
  return {JobWrite::Kind::kUpdate, next, Event(job, seq, job.state, reason), placement_changed,
          std::nullopt, std::nullopt};
}

}  // namespace

// --- Batches and fencing -----------------------------------------------------------------

TEST_P(JobStoreConformanceTest, EachTakenEpochIsNewerThanTheLast) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t first, store().TakeLeadership());
  RM_ASSERT_OK_AND_ASSIGN(auto other, backend().NewStore());
  RM_ASSERT_OK_AND_ASSIGN(int64_t second, other->TakeLeadership());
  EXPECT_GE(first, 1);
  EXPECT_GT(second, first);
}

TEST_P(JobStoreConformanceTest, ACommitStoresCreatesUpdatesEventsAndWorkersTogether) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job old = MakeJob("j-old");
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(old, FirstEvent(old)));
  Job started = Started(created.job);
  started.last_event_seq = 2;
  Worker worker;
  worker.id = "w1";
  worker.address = "127.0.0.2";
  worker.port = 7071;
  worker.cpu_slots = 4;
  worker.gpus = {Gpu{0, "t4", 16LL << 30, true}};

  WriteBatch batch;
  batch.jobs.push_back(CreateWrite(MakeJob("j-a", "default", 0, "req-a")));
  batch.jobs.push_back(UpdateWrite(started, 2, "placed", true));
  batch.jobs.push_back(CreateWrite(MakeJob("j-b")));
  batch.workers.push_back(worker);
  RM_ASSERT_OK_AND_ASSIGN(CommitResult result, store().Commit(batch, epoch));

  ASSERT_THAT(result.created, SizeIs(2));
  RM_ASSERT_OK(result.created[0].status());
  RM_ASSERT_OK(result.created[1].status());
  EXPECT_FALSE(result.created[0]->existing);
  EXPECT_EQ(result.created[0]->job.id, "j-a");
  EXPECT_GT(result.created[1]->job.seq, result.created[0]->job.seq);
  EXPECT_THAT(result.skipped, IsEmpty());
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-a"));
  EXPECT_EQ(got.seq, result.created[0]->job.seq);
  EXPECT_EQ(got.request_id, "req-a");
  RM_ASSERT_OK_AND_ASSIGN(got, store().GetJob("j-old"));
  ExpectSameJob(got, started);
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-old", 1));
  EXPECT_THAT(events, ElementsAre(Event(started, 2, started.state, "placed")));
  RM_ASSERT_OK_AND_ASSIGN(auto b_events, store().ListEvents("j-b", 0));
  EXPECT_THAT(b_events, SizeIs(1));
  RM_ASSERT_OK_AND_ASSIGN(auto workers, store().ListWorkers());
  ASSERT_THAT(workers, SizeIs(1));
  EXPECT_EQ(workers[0].gpus, worker.gpus);
}

TEST_P(JobStoreConformanceTest, ACommitWithARepeatedRequestIdMakesOneJob) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job earlier = MakeJob("j-1", "default", 0, "req-1");
  RM_ASSERT_OK(store().CreateJob(earlier, FirstEvent(earlier)));
  WriteBatch batch;
  batch.jobs.push_back(CreateWrite(MakeJob("j-2", "default", 0, "req-2")));
  batch.jobs.push_back(CreateWrite(MakeJob("j-3", "default", 0, "req-2")));
  batch.jobs.push_back(CreateWrite(MakeJob("j-4", "default", 0, "req-1")));
  batch.jobs.push_back(CreateWrite(MakeJob("j-1")));  // job id taken, no request id
  RM_ASSERT_OK_AND_ASSIGN(CommitResult result, store().Commit(batch, epoch));
  ASSERT_THAT(result.created, SizeIs(4));
  EXPECT_FALSE(result.created[0]->existing);
  EXPECT_TRUE(result.created[1]->existing);
  EXPECT_EQ(result.created[1]->job.id, "j-2");
  EXPECT_TRUE(result.created[2]->existing);
  EXPECT_EQ(result.created[2]->job.id, "j-1");
  EXPECT_THAT(result.created[3], StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(store().GetJob("j-3"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().GetJob("j-4"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(JobStoreConformanceTest, ACommitUnderAnOlderEpochIsFencedAndWritesNothing) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t old_epoch, store().TakeLeadership());
  RM_ASSERT_OK_AND_ASSIGN(auto successor, backend().NewStore());
  RM_ASSERT_OK_AND_ASSIGN(int64_t new_epoch, successor->TakeLeadership());
  WriteBatch batch;
  batch.jobs.push_back(CreateWrite(MakeJob("j-1")));
  Worker worker;
  worker.id = "w1";
  worker.address = "127.0.0.2";
  batch.workers.push_back(worker);
  auto stale = store().Commit(batch, old_epoch);
  EXPECT_THAT(stale, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(IsFenced(stale.status()));
  EXPECT_THAT(store().GetJob("j-1"), StatusIs(absl::StatusCode::kNotFound));
  RM_ASSERT_OK_AND_ASSIGN(auto workers, store().ListWorkers());
  EXPECT_THAT(workers, IsEmpty());
  RM_ASSERT_OK(successor->Commit(batch, new_epoch));
  RM_ASSERT_OK(store().GetJob("j-1"));
}

// The writer retries a batch whose commit answer was lost (the connection broke after the
// commit): its own jobs come back as created, once, not as repeats or taken ids.
TEST_P(JobStoreConformanceTest, ABatchRetriedAfterItsAnswerWasLostGetsItsOwnJobsAsCreated) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  WriteBatch batch;
  batch.jobs.push_back(CreateWrite(MakeJob("j-1", "default", 0, "req-1")));
  batch.jobs.push_back(CreateWrite(MakeJob("j-2")));
  RM_ASSERT_OK_AND_ASSIGN(CommitResult first, store().Commit(batch, epoch));
  RM_ASSERT_OK_AND_ASSIGN(CommitResult again, store().Commit(batch, epoch));
  ASSERT_THAT(again.created, SizeIs(2));
  for (size_t i = 0; i < 2; ++i) {
    RM_ASSERT_OK(again.created[i].status());
    EXPECT_FALSE(again.created[i]->existing) << i;
    EXPECT_EQ(again.created[i]->job.id, first.created[i]->job.id);
    EXPECT_EQ(again.created[i]->job.seq, first.created[i]->job.seq);
  }
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-2", 0));
  EXPECT_THAT(events, SizeIs(1));
  // Another job under a taken id or request id is still not its own.
  Job other = MakeJob("j-2");
  other.created_at_ms += 1;
  other.updated_at_ms = other.created_at_ms;
  Job repeat = MakeJob("j-3", "default", 0, "req-1");
  WriteBatch others;
  others.jobs.push_back(CreateWrite(other));
  others.jobs.push_back(CreateWrite(repeat));
  auto third = store().Commit(others, epoch);
  ASSERT_TRUE(third.ok()) << third.status();
  ASSERT_THAT(third->created, SizeIs(2));
  EXPECT_THAT(third->created[0], StatusIs(absl::StatusCode::kAborted));
  RM_ASSERT_OK(third->created[1].status());
  EXPECT_TRUE(third->created[1]->existing);
  EXPECT_EQ(third->created[1]->job.id, "j-1");
}

// A batch of new jobs alone is what the submit writers store (one statement in Postgres).
TEST_P(JobStoreConformanceTest, ABatchOfNewJobsUnderAnOlderEpochIsFencedAndWritesNothing) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t old_epoch, store().TakeLeadership());
  RM_ASSERT_OK_AND_ASSIGN(auto successor, backend().NewStore());
  RM_ASSERT_OK_AND_ASSIGN(int64_t new_epoch, successor->TakeLeadership());
  WriteBatch batch;
  batch.jobs.push_back(CreateWrite(MakeJob("j-1", "default", 0, "req-1")));
  batch.jobs.push_back(CreateWrite(MakeJob("j-2")));
  auto stale = store().Commit(batch, old_epoch);
  EXPECT_TRUE(IsFenced(stale.status())) << stale.status();
  EXPECT_THAT(store().GetJob("j-1"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().GetJob("j-2"), StatusIs(absl::StatusCode::kNotFound));
  RM_ASSERT_OK_AND_ASSIGN(CommitResult stored, successor->Commit(batch, new_epoch));
  ASSERT_THAT(stored.created, SizeIs(2));
  RM_ASSERT_OK(stored.created[0].status());
  EXPECT_FALSE(stored.created[0]->existing);
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-2", 0));
  EXPECT_THAT(events, SizeIs(1));
}

TEST_P(JobStoreConformanceTest, ACommitWithoutAnEpochIsInvalidArgument) {
  WriteBatch batch;
  batch.jobs.push_back(CreateWrite(MakeJob("j-1")));
  EXPECT_THAT(store().Commit(batch, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  batch.jobs[0].job.id.clear();
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  EXPECT_THAT(store().Commit(batch, epoch), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(JobStoreConformanceTest, UpdatesOfAnEndedJobAreSkippedAndTheRestLands) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job ended = MakeJob("j-ended");
  Job live = MakeJob("j-live");
  RM_ASSERT_OK(store().CreateJob(ended, FirstEvent(ended)));
  RM_ASSERT_OK(store().CreateJob(live, FirstEvent(live)));
  Job cancelled = ended;
  cancelled.state = JobState::kCancelled;
  cancelled.last_event_seq = 2;
  RM_ASSERT_OK(store().UpdateJob(cancelled, Event(ended, 2, JobState::kCancelled, "cancelled")));
  WriteBatch batch;
  Job restarted = ended;
  restarted.attempt = 1;
  batch.jobs.push_back(UpdateWrite(restarted, 3, "restarted", false));
  Job started = Started(live);
  batch.jobs.push_back(UpdateWrite(started, 2, "placed", true));
  RM_ASSERT_OK_AND_ASSIGN(CommitResult result, store().Commit(batch, epoch));
  EXPECT_THAT(result.skipped, ElementsAre("j-ended"));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-ended"));
  EXPECT_EQ(got.state, JobState::kCancelled);
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-ended", 2));
  EXPECT_THAT(events, IsEmpty());
  RM_ASSERT_OK_AND_ASSIGN(got, store().GetJob("j-live"));
  EXPECT_EQ(got.placement, started.placement);
}

TEST_P(JobStoreConformanceTest, CommitAddsUsageOfStoredUpdatesPerQueueAndResource) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job a = MakeJob("j-a", "vision");
  Job b = MakeJob("j-b", "vision");
  RM_ASSERT_OK(store().CreateJob(a, FirstEvent(a)));
  RM_ASSERT_OK(store().CreateJob(b, FirstEvent(b)));
  WriteBatch batch;
  batch.jobs.push_back(UpdateWrite(Started(a), 2, "placed", true));
  batch.jobs.back().usage = QueueUsage{"vision", "t4", 5'000};
  batch.jobs.push_back(UpdateWrite(Started(b), 2, "placed", true));
  batch.jobs.back().usage = QueueUsage{"vision", "t4", 3'000};
  RM_ASSERT_OK(store().Commit(batch, epoch));
  WriteBatch more;
  Job again = Started(a);
  again.attempt = 1;
  more.jobs.push_back(UpdateWrite(again, 3, "restarted", false));
  more.jobs.back().usage = QueueUsage{"vision", "cpu", 250};
  RM_ASSERT_OK(store().Commit(more, epoch));
  RM_ASSERT_OK_AND_ASSIGN(auto usage, store().ListQueueUsage());
  EXPECT_THAT(usage,
              ElementsAre(QueueUsage{"vision", "cpu", 250}, QueueUsage{"vision", "t4", 8'000}));
}

// The outbox writer retries a batch whose commit answer was lost: it meets its own events,
// and is taken as stored, with nothing written twice (usage above all).
TEST_P(JobStoreConformanceTest, ABatchOfUpdatesRetriedAfterItsAnswerWasLostIsTakenAsStored) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job a = MakeJob("j-a", "vision");
  Job b = MakeJob("j-b", "vision");
  RM_ASSERT_OK(store().CreateJob(a, FirstEvent(a)));
  RM_ASSERT_OK(store().CreateJob(b, FirstEvent(b)));
  Job ended = b;
  ended.state = JobState::kCancelled;
  ended.finished_at_ms = kT0 + 1;
  WriteBatch cancel;
  cancel.jobs.push_back(UpdateWrite(ended, 2, "cancelled", false));
  RM_ASSERT_OK(store().Commit(cancel, epoch));
  WriteBatch batch;
  batch.jobs.push_back(UpdateWrite(Started(a), 2, "placed", true));
  batch.jobs.back().usage = QueueUsage{"vision", "t4", 5'000};
  batch.jobs.push_back(UpdateWrite(Started(b), 3, "placed", true));  // ended: skipped
  RM_ASSERT_OK_AND_ASSIGN(CommitResult first, store().Commit(batch, epoch));
  EXPECT_THAT(first.skipped, ElementsAre("j-b"));
  RM_ASSERT_OK_AND_ASSIGN(CommitResult again, store().Commit(batch, epoch));
  EXPECT_THAT(again.skipped, ElementsAre("j-b"));
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-a", 0));
  EXPECT_THAT(events, SizeIs(2));
  RM_ASSERT_OK_AND_ASSIGN(auto usage, store().ListQueueUsage());
  EXPECT_THAT(usage, ElementsAre(QueueUsage{"vision", "t4", 5'000}));
  // The same seq with other content is still a conflict, and writes nothing.
  WriteBatch other;
  other.jobs.push_back(UpdateWrite(Started(a), 2, "placed elsewhere", true));
  other.jobs.back().usage = QueueUsage{"vision", "t4", 1'000};
  EXPECT_THAT(store().Commit(other, epoch), StatusIs(absl::StatusCode::kAlreadyExists));
  RM_ASSERT_OK_AND_ASSIGN(usage, store().ListQueueUsage());
  EXPECT_THAT(usage, ElementsAre(QueueUsage{"vision", "t4", 5'000}));
}

TEST_P(JobStoreConformanceTest, UsageOfASkippedUpdateIsNotAdded) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job job = MakeJob("j-1", "vision");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  Job cancelled = job;
  cancelled.state = JobState::kCancelled;
  cancelled.last_event_seq = 2;
  RM_ASSERT_OK(store().UpdateJob(cancelled, Event(job, 2, JobState::kCancelled, "cancelled")));
  WriteBatch batch;
  batch.jobs.push_back(UpdateWrite(Started(job), 3, "placed", true));
  batch.jobs.back().usage = QueueUsage{"vision", "t4", 5'000};
  RM_ASSERT_OK_AND_ASSIGN(CommitResult result, store().Commit(batch, epoch));
  EXPECT_THAT(result.skipped, ElementsAre("j-1"));
  RM_ASSERT_OK_AND_ASSIGN(auto usage, store().ListQueueUsage());
  EXPECT_THAT(usage, IsEmpty());
}

TEST_P(JobStoreConformanceTest, MalformedUsageRefusesTheWholeBatch) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job job = MakeJob("j-1", "vision");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  for (const QueueUsage& bad : {QueueUsage{"vision", "t4", -1}, QueueUsage{"", "t4", 1},
                                QueueUsage{"vision", "", 1}}) {
    WriteBatch batch;
    batch.jobs.push_back(UpdateWrite(Started(job), 2, "placed", true));
    batch.jobs.back().usage = bad;
    EXPECT_THAT(store().Commit(batch, epoch), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.state, JobState::kPending);
  RM_ASSERT_OK_AND_ASSIGN(auto usage, store().ListQueueUsage());
  EXPECT_THAT(usage, IsEmpty());
}

TEST_P(JobStoreConformanceTest, SeveralUpdatesOfOneJobInABatchKeepEveryEventAndTheLastRow) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  // A 64-rank placement, then RUNNING without touching it.
  Job placed = job;
  placed.state = JobState::kStarting;
  for (int r = 0; r < 64; ++r) {
    placed.placement.push_back(RankPlacement{r, "w" + std::to_string(r / 8),
                                             "127.0.0." + std::to_string(2 + r / 8), {r % 8}, 7071});
  }
  Job running = placed;
  running.state = JobState::kRunning;
  running.started_at_ms = kT0 + 5;
  WriteBatch batch;
  batch.jobs.push_back(UpdateWrite(placed, 2, "placed", true));
  batch.jobs.push_back(UpdateWrite(running, 3, "all 64 ranks started", false));
  RM_ASSERT_OK(store().Commit(batch, epoch));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.state, JobState::kRunning);
  EXPECT_EQ(got.last_event_seq, 3);
  EXPECT_EQ(got.placement, placed.placement);
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 1));
  EXPECT_THAT(events, SizeIs(2));

  // A state change that leaves the placement as it is keeps its rows.
  Job succeeded = running;
  succeeded.state = JobState::kSucceeded;
  WriteBatch end;
  end.jobs.push_back(UpdateWrite(succeeded, 4, "all 64 ranks exited 0", false));
  RM_ASSERT_OK(store().Commit(end, epoch));
  RM_ASSERT_OK_AND_ASSIGN(got, store().GetJob("j-1"));
  EXPECT_EQ(got.placement, placed.placement);
}

namespace {
JobWrite CheckpointWrite(Job job, int64_t step, int64_t time_ms) {
  JobWrite w;
  w.kind = JobWrite::Kind::kCheckpoint;
  job.last_checkpoint_step = step;
  job.last_checkpoint_time_ms = time_ms;
  w.job = std::move(job);
  return w;
}
}  // namespace

TEST_P(JobStoreConformanceTest, ACheckpointIsKeptUnlessTheStoredOneIsNewerAndAddsNoEvent) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  Job running = Started(job);
  WriteBatch batch;
  batch.jobs.push_back(UpdateWrite(running, 2, "placed", true));
  // Two in one batch: the newer wins whatever the order.
  batch.jobs.push_back(CheckpointWrite(running, 200, kT0 + 20));
  batch.jobs.push_back(CheckpointWrite(running, 100, kT0 + 10));
  RM_ASSERT_OK(store().Commit(batch, epoch));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.last_checkpoint_step, 200);
  EXPECT_EQ(got.last_checkpoint_time_ms, kT0 + 20);
  EXPECT_EQ(got.state, JobState::kStarting);
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 0));
  EXPECT_THAT(events, SizeIs(2));

  // An older one later (a preempted attempt's, late) changes nothing; a state change, whose
  // copy of the job has no checkpoint, does not clear it.
  WriteBatch later;
  later.jobs.push_back(CheckpointWrite(running, 150, kT0 + 15));
  Job failed = running;
  failed.state = JobState::kFailed;
  later.jobs.push_back(UpdateWrite(failed, 3, "rank 0 exited with code 1", false));
  RM_ASSERT_OK(store().Commit(later, epoch));
  RM_ASSERT_OK_AND_ASSIGN(got, store().GetJob("j-1"));
  EXPECT_EQ(got.state, JobState::kFailed);
  EXPECT_EQ(got.last_checkpoint_step, 200);

  // An ended job still takes a newer one (the checkpoint its SIGTERM made), and the active
  // list carries checkpoints to a new leader.
  WriteBatch after;
  after.jobs.push_back(CheckpointWrite(failed, 300, kT0 + 30));
  RM_ASSERT_OK(store().Commit(after, epoch));
  RM_ASSERT_OK_AND_ASSIGN(got, store().GetJob("j-1"));
  EXPECT_EQ(got.last_checkpoint_step, 300);
  EXPECT_EQ(got.last_checkpoint_time_ms, kT0 + 30);
  Job other = MakeJob("j-2");
  RM_ASSERT_OK(store().CreateJob(other, FirstEvent(other)));
  WriteBatch live;
  live.jobs.push_back(CheckpointWrite(other, 7, kT0 + 7));
  RM_ASSERT_OK(store().Commit(live, epoch));
  RM_ASSERT_OK_AND_ASSIGN(auto active, store().ListActiveJobs());
  ASSERT_THAT(active, SizeIs(1));
  EXPECT_EQ(active[0].last_checkpoint_step, 7);
}

TEST_P(JobStoreConformanceTest, AMalformedCheckpointRefusesTheWholeBatch) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  for (auto [step, time_ms] : {std::pair<int64_t, int64_t>{-1, kT0}, {5, 0}}) {
    WriteBatch batch;
    batch.jobs.push_back(UpdateWrite(Started(job), 2, "placed", true));
    batch.jobs.push_back(CheckpointWrite(job, step, time_ms));
    EXPECT_THAT(store().Commit(batch, epoch), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.state, JobState::kPending);
  EXPECT_EQ(got.last_checkpoint_step, 0);
}

namespace {
JobWrite DigestWrite(Job job, const std::string& digest) {
  JobWrite w;
  w.kind = JobWrite::Kind::kImageDigest;
  job.image_digest = digest;
  w.job = std::move(job);
  return w;
}
}  // namespace

// What a job waits for (JobSpec.after) and how it starts are part of its spec: stored with it,
// and loaded with it by a new leader, whose first pass judges them again.
TEST_P(JobStoreConformanceTest, DependenciesAndTheLaunchChoiceAreStoredWithTheSpec) {
  RM_ASSERT_OK(store().TakeLeadership().status());
  Job job = MakeJob("j-2");
  job.spec.after = {{"j-1", AfterCondition::kSucceeded},
                    {"j-0", AfterCondition::kEnded},
                    {"j-3", AfterCondition::kFailed}};
  job.spec.use_mpirun = true;
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-2"));
  EXPECT_TRUE(got.spec == job.spec);
  RM_ASSERT_OK_AND_ASSIGN(auto active, store().ListActiveJobs());
  ASSERT_THAT(active, SizeIs(1));
  EXPECT_EQ(active[0].spec.after, job.spec.after);
  EXPECT_TRUE(active[0].spec.use_mpirun);
}

// An elastic job's sizes_divide is stored with its spec, and the size it last ran at
// (Job::last_replicas) with its row, by UpdateJob and by Commit alike.
TEST_P(JobStoreConformanceTest, AnElasticJobKeepsItsSizesDivideAndTheSizeItLastRanAt) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job job = MakeJob("j-e");
  job.spec.replicas = 2;
  job.spec.min_replicas = 2;
  job.spec.max_replicas = 8;
  job.spec.sizes_divide = 256;
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, store().CreateJob(job, FirstEvent(job)));
  EXPECT_EQ(created.job.last_replicas, 0);
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-e"));
  EXPECT_EQ(got.spec.sizes_divide, 256);
  EXPECT_EQ(got.last_replicas, 0);
  Job started = Started(created.job);
  started.last_replicas = 2;
  RM_ASSERT_OK(store().UpdateJob(started, Event(started, 2, JobState::kStarting)));
  RM_ASSERT_OK_AND_ASSIGN(got, store().GetJob("j-e"));
  ExpectSameJob(got, started);
  // A growth to 4 (a resize: PENDING, counted with preemptions) in a batch.
  Job grown = started;
  grown.state = JobState::kPending;
  grown.attempt = 1;
  grown.preemptions = 1;
  grown.placement.clear();
  grown.token.clear();
  grown.last_replicas = 4;
  WriteBatch batch;
  batch.jobs.push_back(UpdateWrite(grown, 3, "grown from 2 to 4 replicas", true));
  RM_ASSERT_OK(store().Commit(batch, epoch).status());
  grown.last_event_seq = 3;
  RM_ASSERT_OK_AND_ASSIGN(got, store().GetJob("j-e"));
  ExpectSameJob(got, grown);
  RM_ASSERT_OK_AND_ASSIGN(auto active, store().ListActiveJobs());
  ASSERT_THAT(active, SizeIs(1));
  EXPECT_EQ(active[0].last_replicas, 4);
  EXPECT_EQ(active[0].spec.sizes_divide, 256);
}

TEST_P(JobStoreConformanceTest, TheFirstImageDigestIsPinnedAndKeptThroughUpdatesAndRestarts) {
  const std::string first = "sha256:" + std::string(64, 'a');
  const std::string second = "sha256:" + std::string(64, 'b');
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job job = MakeJob("j-1");
  job.spec.image = "registry.example.com/team/train:v1";
  job.spec.mounts = {{"imagenet", "/data", true}};
  job.spec.shm_size_bytes = 8LL << 30;
  job.spec.workdir = "/workspace";
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  RM_ASSERT_OK_AND_ASSIGN(Job created, store().GetJob("j-1"));
  EXPECT_TRUE(created.spec == job.spec) << "the environment fields are part of the spec";
  EXPECT_EQ(created.image_digest, "");

  Job running = Started(job);
  WriteBatch batch;
  batch.jobs.push_back(UpdateWrite(running, 2, "placed", true));
  batch.jobs.push_back(DigestWrite(running, first));
  batch.jobs.push_back(DigestWrite(running, second));  // the first in a batch wins
  RM_ASSERT_OK(store().Commit(batch, epoch));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.image_digest, first);
  RM_ASSERT_OK_AND_ASSIGN(auto events, store().ListEvents("j-1", 0));
  EXPECT_THAT(events, SizeIs(2));  // no event of its own

  // A later report does not move it, a state change (whose copy has none) does not clear it,
  // and the active list carries it to a new leader.
  WriteBatch later;
  Job pending = running;
  pending.state = JobState::kPending;
  pending.placement.clear();
  later.jobs.push_back(UpdateWrite(pending, 3, "restarting", true));
  later.jobs.push_back(DigestWrite(running, second));
  RM_ASSERT_OK(store().Commit(later, epoch));
  RM_ASSERT_OK_AND_ASSIGN(auto active, store().ListActiveJobs());
  ASSERT_THAT(active, SizeIs(1));
  EXPECT_EQ(active[0].image_digest, first);
  EXPECT_EQ(active[0].state, JobState::kPending);
}

TEST_P(JobStoreConformanceTest, AnEmptyImageDigestRefusesTheWholeBatch) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  WriteBatch batch;
  batch.jobs.push_back(UpdateWrite(Started(job), 2, "placed", true));
  batch.jobs.push_back(DigestWrite(job, ""));
  EXPECT_THAT(store().Commit(batch, epoch), StatusIs(absl::StatusCode::kInvalidArgument));
  RM_ASSERT_OK_AND_ASSIGN(Job got, store().GetJob("j-1"));
  EXPECT_EQ(got.state, JobState::kPending);
}

TEST_P(JobStoreConformanceTest, ACommitNamingAnUnknownJobOrARepeatedEventWritesNothing) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  Job job = MakeJob("j-1");
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  WriteBatch unknown;
  unknown.jobs.push_back(CreateWrite(MakeJob("j-2")));
  unknown.jobs.push_back(UpdateWrite(MakeJob("j-nobody"), 2, "placed", false));
  EXPECT_THAT(store().Commit(unknown, epoch), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().GetJob("j-2"), StatusIs(absl::StatusCode::kNotFound));
  WriteBatch repeated;
  repeated.jobs.push_back(CreateWrite(MakeJob("j-3")));
  repeated.jobs.push_back(UpdateWrite(job, 1, "again", false));
  EXPECT_THAT(store().Commit(repeated, epoch), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(store().GetJob("j-3"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace ringmaster::scheduler::store_test
