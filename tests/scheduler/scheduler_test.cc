// Unit tests of Scheduler on the in-memory stores, a FakeClock and a FaultInjectingJobStore:
// heartbeat expiry, runtime limits and retries on simulated time, and what happens while the
// store is slow, failing or hung, without a real Postgres or any sleep-and-hope.
#include "scheduler/scheduler.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "scheduler/core/array.h"
#include "scheduler/core/clock.h"
#include "scheduler/store/in_memory_coordination.h"
#include "scheduler/store/in_memory_job_store.h"
#include "store/fault_injecting_job_store.h"
#include "support/status_test_util.h"
#include "support/wait_for.h"

namespace ringmaster::scheduler {
namespace {

using Call = FaultInjectingJobStore::Call;
using test::StatusIs;
using test::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

constexpr int64_t kHeartbeatTimeoutMs = 10'000;

// Records what the scheduler sends to one worker.
class RecordingLink : public WorkerLink {
 public:
  void SendAssignment(const Job& job) override {
    std::lock_guard<std::mutex> lock(mu_);
    assignments_.push_back(job);
    plans_.emplace_back();
  }
  // Through SendAssignment, which subclasses slow down; one thread sends to a link.
  void SendAssignmentWithCheck(const Job& job, const CheckPlan& plan) override {
    SendAssignment(job);
    std::lock_guard<std::mutex> lock(mu_);
    plans_.back() = plan;
  }
  void SendLaunch(const Job& job, const CheckPlan& plan,
                  const std::vector<ResolvedMount>& mounts) override {
    SendAssignmentWithCheck(job, plan);
    std::lock_guard<std::mutex> lock(mu_);
    mounts_.push_back(mounts);
  }
  void SendLaunchWithAuth(const Job& job, const CheckPlan& plan,
                          const std::vector<ResolvedMount>& mounts,
                          const std::optional<RegistryCredential>& registry_auth) override {
    SendLaunch(job, plan, mounts);
    std::lock_guard<std::mutex> lock(mu_);
    auths_.push_back(registry_auth);
  }
  // The registry credential of each of assignments(), in the same order.
  std::vector<std::optional<RegistryCredential>> auths() {
    std::lock_guard<std::mutex> lock(mu_);
    return auths_;
  }
  // The mounts of each of assignments(), in the same order.
  std::vector<std::vector<ResolvedMount>> mounts() {
    std::lock_guard<std::mutex> lock(mu_);
    return mounts_;
  }
  // The check plan of each of assignments(), in the same order.
  std::vector<CheckPlan> plans() {
    std::lock_guard<std::mutex> lock(mu_);
    return plans_;
  }
  void SendStop(const std::string& job_id, int32_t attempt, const std::string&,
                int64_t grace_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    stops_.emplace_back(job_id, attempt);
    graces_.push_back(grace_ms);
  }
  std::vector<int64_t> graces() {
    std::lock_guard<std::mutex> lock(mu_);
    return graces_;
  }
  void Close() override { closed_ = true; }
  std::vector<Job> assignments() {
    std::lock_guard<std::mutex> lock(mu_);
    return assignments_;
  }
  std::vector<std::pair<std::string, int32_t>> stops() {
    std::lock_guard<std::mutex> lock(mu_);
    return stops_;
  }
  bool closed() const { return closed_; }

 private:
  std::mutex mu_;
  std::vector<Job> assignments_;
  std::vector<CheckPlan> plans_;
  std::vector<std::vector<ResolvedMount>> mounts_;
  std::vector<std::optional<RegistryCredential>> auths_;
  std::vector<std::pair<std::string, int32_t>> stops_;
  std::vector<int64_t> graces_;
  std::atomic<bool> closed_{false};
};

// A link whose assignments wait until the test lets them go: a worker slow to take one.
class SlowLink : public RecordingLink {
 public:
  void SendAssignment(const Job& job) override {
    {
      std::unique_lock<std::mutex> lock(slow_mu_);
      sending_ = true;
      slow_cv_.notify_all();
      // Bounded, so that a scheduler that sends under its lock fails the test instead of
      // hanging it.
      slow_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return released_; });
    }
    RecordingLink::SendAssignment(job);
  }
  bool WaitSending() {
    std::unique_lock<std::mutex> lock(slow_mu_);
    return slow_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return sending_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(slow_mu_);
    released_ = true;
    slow_cv_.notify_all();
  }

 private:
  std::mutex slow_mu_;
  std::condition_variable slow_cv_;
  bool sending_ = false;
  bool released_ = false;
};

Worker CpuWorker(const std::string& id, int slots) {
  Worker w;
  w.id = id;
  w.address = "127.0.0.2";
  w.port = 7071;
  w.cpu_slots = slots;
  return w;
}

// A secrets key of 32 `fill` bytes: the same fill, the same key.
std::shared_ptr<const SecretBox> TestSecrets(char fill) {
  return std::make_shared<const SecretBox>(*SecretBox::FromKey(std::string(kSecretKeyBytes, fill)));
}

JobSpec CommandSpec(int replicas, int64_t max_runtime_seconds = 0) {
  JobSpec spec;
  spec.name = "job";
  spec.queue = "default";
  spec.replicas = replicas;
  spec.command = CommandWorkload{{"true"}, {}};
  spec.restart_policy = RestartPolicy::kOnFailure;
  spec.backoff_limit = 2;
  spec.max_runtime_seconds = max_runtime_seconds;
  return spec;
}

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : store_(&memory_), liveness_(&clock_) {}

  void SetUp() override { Start(); }

  // Stops the scheduler (if it runs) and starts it with the test keys `current` and, unless 0,
  // `previous` (--previous-secrets-key-file).
  void RestartWithKeys(char current, char previous = 0) {
    scheduler_.reset();
    SchedulerOptions options;
    options.secrets = TestSecrets(current);
    if (previous != 0) options.previous_secrets = TestSecrets(previous);
    Start(options);
  }

  void Start(SchedulerOptions options = {}, prometheus::Registry* registry = nullptr) {
    if (!options.secrets) options.secrets = TestSecrets('k');
    options.heartbeat_timeout_ms = kHeartbeatTimeoutMs;
    options.write_wait_ms = 2'000;
    options.retry_min_ms = 5;
    options.retry_max_ms = 20;
    options.on_fenced = [this](const absl::Status&) { fenced_ = true; };
    scheduler_ = std::make_unique<Scheduler>(&store_, &queue_, &liveness_, &clock_, options,
                                             registry);
    const int rebuilds = queue_.rebuilds();
    RM_ASSERT_OK(scheduler_->Start());
    // The mirror's first rebuild renews the liveness of the workers connected by then. Landing
    // after a test has moved the clock, it would keep a silent worker alive (a flake).
    ASSERT_TRUE(WaitFor([&] { return queue_.rebuilds() > rebuilds; }, std::chrono::seconds(5)));
  }

  // Passes run only when the test calls RunPass: a test that hangs the store between a submit
  // and the pass meant to place it knows no other pass placed it first.
  void StartWithoutBackgroundPasses() {
    scheduler_.reset();
    SchedulerOptions options;
    options.background_passes = false;
    Start(options);
  }

  // Registers a worker, and waits until its registration is stored.
  std::shared_ptr<RecordingLink> Register(const Worker& worker) {
    auto link = std::make_shared<RecordingLink>();
    EXPECT_TRUE(scheduler_->RegisterWorker(worker, {}, link).ok());
    EXPECT_TRUE(scheduler_->Flush(5'000).ok());
    // The registration's liveness key is written on a thread aside. Landing after the test has
    // moved the clock on, it would outlive the timeout the test counts from (a CI flake).
    EXPECT_TRUE(WaitFor(
        [&] {
          auto alive = liveness_.Alive({worker.id});
          return alive.ok() && alive->count(worker.id) > 0;
        },
        std::chrono::seconds(5)));
    return link;
  }

  // Submits, runs a pass, waits until the placement is stored and sent.
  std::string SubmitAndPlace(const JobSpec& spec) {
    auto created = scheduler_->Submit(spec, "");
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return "";
    scheduler_->RunPass();
    EXPECT_TRUE(scheduler_->Flush(5'000).ok());
    return created->job.id;
  }

  JobState StoredState(const std::string& id) {
    auto job = memory_.GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->state : JobState::kPending;
  }

  void Report(const std::string& worker, const Job& job, int rank, RankReport::Kind kind,
              int exit_code = 0) {
    scheduler_->ReportRank(worker, {job.id, job.attempt, rank, kind, exit_code, 0, "", 0, 0, {}});
  }

  // Rank 0 of one-rank `job` started, then exited with `exit_code`.
  void RunToEnd(const std::string& worker, const Job& job, int exit_code = 0) {
    Report(worker, job, 0, RankReport::Kind::kStarted);
    Report(worker, job, 0, RankReport::Kind::kExited, exit_code);
  }

  FakeClock clock_;
  InMemoryJobStore memory_;
  FaultInjectingJobStore store_;
  InMemoryPendingQueue queue_;
  InMemoryLiveness liveness_;
  std::atomic<bool> fenced_{false};
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, ASubmittedJobIsStoredBeforeSubmitReturns) {
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, scheduler_->Submit(CommandSpec(1), "req-1"));
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(created.job.id));
  EXPECT_EQ(stored.state, JobState::kPending);
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult again, scheduler_->Submit(CommandSpec(1), "req-1"));
  EXPECT_TRUE(again.existing);
  EXPECT_EQ(again.job.id, created.job.id);
}

TEST_F(SchedulerTest, SubmitAsyncIsAnsweredOnceAfterTheCommitWithoutTheCallerWaiting) {
  store_.Hang(Call::kCommit);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<absl::StatusOr<CreateJobResult>> answers;
  std::thread::id answered_on;
  scheduler_->SubmitAsync(CommandSpec(1), "async-1", "vision", std::nullopt,
                          [&](absl::StatusOr<CreateJobResult> result) {
                            std::lock_guard<std::mutex> lock(mu);
                            answers.push_back(std::move(result));
                            answered_on = std::this_thread::get_id();
                            cv.notify_all();
                          });
  // Handed over and returned while its commit hangs: nothing answered yet.
  ASSERT_TRUE(WaitFor([&] { return store_.hung() >= 1; }, std::chrono::seconds(10)));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_THAT(answers, SizeIs(0));
  }
  store_.Heal();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return !answers.empty(); }));
  }
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_THAT(answers, SizeIs(1));
  RM_ASSERT_OK(answers[0].status());
  EXPECT_NE(answered_on, std::this_thread::get_id());
  EXPECT_EQ(answers[0]->job.team, "vision");
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(answers[0]->job.id));
  EXPECT_EQ(stored.state, JobState::kPending);
}

TEST_F(SchedulerTest, ASubmitWhoseWriteIsLateIsAnsweredOnceAndItsJobStillLands) {
  store_.Hang(Call::kCommit);
  std::atomic<int> answers{0};
  std::atomic<int> unavailable{0};
  const auto begun = std::chrono::steady_clock::now();
  scheduler_->SubmitAsync(CommandSpec(1), "late-1", "", std::nullopt,
                          [&](absl::StatusOr<CreateJobResult> result) {
                            ++answers;
                            unavailable += result.status().code() == absl::StatusCode::kUnavailable;
                          });
  // write_wait_ms is 2 s here: the deadline thread answers, the writer does not again.
  ASSERT_TRUE(WaitFor([&] { return answers == 1; }, std::chrono::seconds(10)));
  EXPECT_GE(std::chrono::steady_clock::now() - begun, std::chrono::milliseconds(1'900));
  EXPECT_EQ(unavailable, 1);
  store_.Heal();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, memory_.ListActiveJobs());
  EXPECT_THAT(jobs, SizeIs(1));
  EXPECT_EQ(answers, 1);
}

TEST_F(SchedulerTest, ACancelWhoseWriteIsLateIsAnsweredOnceAndTheJobStillEndsCancelled) {
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, scheduler_->Submit(CommandSpec(1), "to-cancel"));
  store_.Hang(Call::kCommit);
  std::atomic<int> answers{0};
  std::atomic<int> unavailable{0};
  const auto begun = std::chrono::steady_clock::now();
  scheduler_->CancelAsync(
      created.job.id, "late",
      [&](absl::StatusOr<Job> result) {
        ++answers;
        unavailable += result.status().code() == absl::StatusCode::kUnavailable;
      },
      [](std::function<void()> task) { task(); });
  // write_wait_ms is 2 s here: the deadline thread answers, the writer does not again.
  ASSERT_TRUE(WaitFor([&] { return answers == 1; }, std::chrono::seconds(10)));
  EXPECT_GE(std::chrono::steady_clock::now() - begun, std::chrono::milliseconds(1'900));
  EXPECT_EQ(unavailable, 1);
  store_.Heal();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(created.job.id));
  EXPECT_EQ(stored.state, JobState::kCancelled);
  EXPECT_EQ(answers, 1);
}

TEST_F(SchedulerTest, ASubmitToAStoppedSchedulerIsUnavailableAtOnce) {
  scheduler_->Stop();
  const auto begun = std::chrono::steady_clock::now();
  EXPECT_THAT(scheduler_->Submit(CommandSpec(1), "after-stop"),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(1));
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, memory_.ListActiveJobs());
  EXPECT_THAT(jobs, SizeIs(0));
}

TEST_F(SchedulerTest, ABurstOfSubmitsSharesTransactions) {
  // While the first commits hang (an fsync that takes its time), 64 more submits arrive: they
  // must be stored together, not in 64 transactions.
  store_.Hang(Call::kCommit);
  const int before = store_.calls(Call::kCommit);
  std::vector<std::thread> clients;
  std::atomic<int> started{0};
  std::atomic<int> ok{0};
  for (int i = 0; i < 64; ++i) {
    clients.emplace_back([&, i] {
      ++started;
      if (scheduler_->Submit(CommandSpec(1), "burst-" + std::to_string(i)).ok()) ++ok;
    });
  }
  ASSERT_TRUE(WaitFor([&] { return started == 64 && store_.hung() >= 1; }, std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the last ones enqueue
  store_.Heal();
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok, 64);
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, memory_.ListActiveJobs());
  EXPECT_THAT(jobs, SizeIs(64));
  // At most one hung commit per submit writer, then the rest in a batch or a few.
  EXPECT_LE(store_.calls(Call::kCommit) - before, 8);
}

TEST_F(SchedulerTest, AClientRetryingAfterAnOutageEndsTheSubmitWritersBackoff) {
  // One submit writer whose backoff has grown to seconds while Postgres was away: a client
  // retrying once it is back gets in at once, not after the backoff.
  scheduler_.reset();  // Start's backoff is the fast one of the other tests
  SchedulerOptions options;
  options.submit_writers = 1;
  options.heartbeat_timeout_ms = kHeartbeatTimeoutMs;
  options.write_wait_ms = 30'000;
  options.retry_min_ms = 50;
  options.retry_max_ms = 20'000;
  scheduler_ =
      std::make_unique<Scheduler>(&store_, &queue_, &liveness_, &clock_, options, nullptr);
  RM_ASSERT_OK(scheduler_->Start());

  store_.Fail(Call::kCommit, absl::UnavailableError("postgres is away"));
  std::thread first([&] { EXPECT_TRUE(scheduler_->Submit(CommandSpec(1), "first").ok()); });
  // Tries at about 0, 50, 150, 350, 750, 1550 and 3150 ms: the next backoff is 6.4 s.
  ASSERT_TRUE(WaitFor([&] { return store_.calls(Call::kCommit) >= 7; }, std::chrono::seconds(10)));
  store_.Heal();
  // A client retrying every 100 ms, as after an UNAVAILABLE: turned away while the scheduler
  // still believes Postgres down, each of its tries ends the writer's backoff.
  const auto start = std::chrono::steady_clock::now();
  int refused = 0;
  while (!scheduler_->Submit(CommandSpec(1), "second").ok()) {
    ++refused;
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  first.join();
  // Without the nudge it waits out the rest of the 6.4 s backoff (3.2 s measured).
  EXPECT_LT(waited, std::chrono::seconds(1)) << refused << " tries refused";
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, memory_.ListActiveJobs());
  EXPECT_THAT(jobs, SizeIs(2));
}

TEST_F(SchedulerTest, AssignmentsAreSentOnlyAfterThePlacementIsStored) {
  StartWithoutBackgroundPasses();
  auto link = Register(CpuWorker("w1", 4));
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, scheduler_->Submit(CommandSpec(2), ""));
  store_.Hang(Call::kCommit);
  scheduler_->RunPass();
  ASSERT_TRUE(WaitFor([&] { return store_.hung() == 1; }, std::chrono::seconds(5)));
  EXPECT_THAT(link->assignments(), IsEmpty());
  EXPECT_EQ(StoredState(created.job.id), JobState::kPending);
  // Readers see what is stored, not what is decided.
  RM_ASSERT_OK_AND_ASSIGN(Job seen, scheduler_->GetJob(created.job.id));
  EXPECT_EQ(seen.state, JobState::kPending);
  store_.Heal();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(link->assignments(), SizeIs(1));
  EXPECT_EQ(link->assignments()[0].id, created.job.id);
  EXPECT_EQ(StoredState(created.job.id), JobState::kStarting);
}

TEST_F(SchedulerTest, EveryReadAndHeartbeatAnswersWhileAWriteHangs) {
  StartWithoutBackgroundPasses();
  auto link = Register(CpuWorker("w1", 4));
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, scheduler_->Submit(CommandSpec(1), ""));
  store_.Hang(Call::kCommit);
  scheduler_->RunPass();  // the placement's write now hangs
  ASSERT_TRUE(WaitFor([&] { return store_.hung() == 1; }, std::chrono::seconds(5)));
  const auto start = std::chrono::steady_clock::now();
  scheduler_->Heartbeat("w1");
  RM_ASSERT_OK(scheduler_->GetJob(created.job.id));
  RM_ASSERT_OK(scheduler_->ListJobs({}));
  EXPECT_THAT(scheduler_->ListWorkers(), SizeIs(1));
  RM_ASSERT_OK(scheduler_->RegisterWorker(CpuWorker("w2", 4), {}, std::make_shared<RecordingLink>()));
  scheduler_->RunPass();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  // A submit cannot be stored meanwhile: it says so instead of hanging.
  EXPECT_THAT(scheduler_->Submit(CommandSpec(1), "late"), StatusIs(absl::StatusCode::kUnavailable));
  store_.Heal();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(created.job.id), JobState::kStarting);
}

// What the workers hear of a commit is sent with the scheduler's lock free: a send costs a
// message's serialisation and a syscall on the writer's thread, and must not hold up the pass,
// the workers' reports or the readers.
TEST_F(SchedulerTest, AnAssignmentSlowToSendHoldsUpNoOtherCall) {
  StartWithoutBackgroundPasses();
  auto slow = std::make_shared<SlowLink>();
  RM_ASSERT_OK(scheduler_->RegisterWorker(CpuWorker("w1", 4), {}, slow));
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, scheduler_->Submit(CommandSpec(1), ""));
  scheduler_->RunPass();
  ASSERT_TRUE(slow->WaitSending());
  const auto start = std::chrono::steady_clock::now();
  scheduler_->Heartbeat("w1");
  RM_ASSERT_OK(scheduler_->GetJob(created.job.id));
  EXPECT_THAT(scheduler_->ListWorkers(), SizeIs(1));
  RM_ASSERT_OK(
      scheduler_->RegisterWorker(CpuWorker("w2", 4), {}, std::make_shared<RecordingLink>()));
  scheduler_->RunPass();
  const auto took = std::chrono::steady_clock::now() - start;
  slow->Release();
  EXPECT_LT(took, std::chrono::milliseconds(1'000));
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(slow->assignments(), SizeIs(1));
  EXPECT_EQ(slow->assignments()[0].id, created.job.id);
  EXPECT_EQ(StoredState(created.job.id), JobState::kStarting);
}

// Regression: a rank report whose commit failed updated the rank tracker and was only logged,
// so the job stayed RUNNING and held its GPUs forever.
TEST_F(SchedulerTest, ARankExitThatCannotBeStoredIsRetriedUntilItIs) {
  auto link = Register(CpuWorker("w1", 4));
  const std::string id = SubmitAndPlace(CommandSpec(2));
  Job job = link->assignments().at(0);
  Report("w1", job, 0, RankReport::Kind::kStarted);
  Report("w1", job, 1, RankReport::Kind::kStarted);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_EQ(StoredState(id), JobState::kRunning);

  store_.Fail(Call::kCommit, absl::UnavailableError("postgres restarting"));
  Report("w1", job, 0, RankReport::Kind::kExited);
  Report("w1", job, 1, RankReport::Kind::kExited);
  ASSERT_TRUE(WaitFor([&] { return store_.calls(Call::kCommit) > 5; }, std::chrono::seconds(5)));
  EXPECT_EQ(StoredState(id), JobState::kRunning);
  // While Postgres is known to be down, new submits fail at once.
  EXPECT_THAT(scheduler_->Submit(CommandSpec(1), ""), StatusIs(absl::StatusCode::kUnavailable));

  store_.Heal();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kSucceeded);
  EXPECT_THAT(scheduler_->ListWorkers().at(0).cpu_slots_used, 0);
  RM_ASSERT_OK(scheduler_->Submit(CommandSpec(1), ""));
}

// The scheduler is killed after storing a placement and before sending it: the worker comes
// back to the next scheduler holding nothing of the attempt. The job is placed again, not
// failed, and not counted against backoff_limit (before, it failed: "rank 0 is gone").
TEST_F(SchedulerTest, AnAssignmentLostWithTheSchedulerIsPlacedAgainNotFailed) {
  Register(CpuWorker("w1", 2));
  JobSpec spec = CommandSpec(1);
  spec.restart_policy = RestartPolicy::kNever;
  spec.command->argv = {"true"};
  spec.health_check = false;
  const std::string id = SubmitAndPlace(spec);
  ASSERT_EQ(StoredState(id), JobState::kStarting);
  // A new scheduler on the same store; the worker never heard of the attempt.
  scheduler_.reset();
  Start();
  auto link = std::make_shared<RecordingLink>();
  RM_ASSERT_OK(scheduler_->RegisterWorker(CpuWorker("w1", 2), {}, link));
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  auto events = memory_.ListEvents(id, 0);
  ASSERT_TRUE(events.ok()) << events.status();
  // The background pass may have placed it again already: its event is not the last.
  EXPECT_THAT(*events,
              ::testing::Contains(::testing::Field(
                  &JobEvent::reason, HasSubstr("worker w1 re-registered without attempt 0"))));
  // Placed again at once, on the same worker, and run to its end.
  ASSERT_TRUE(WaitFor([&] { return !link->assignments().empty(); }, std::chrono::seconds(5)));
  const Job again = link->assignments().back();
  EXPECT_EQ(again.id, id);
  EXPECT_EQ(again.attempt, 1);
  RunToEnd("w1", again);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kSucceeded);
}

TEST_F(SchedulerTest, AWorkerSilentPastTheTimeoutIsLostAndItsJobRestarts) {
  // A background pass that read liveness before the clock moved and judged after would
  // re-beat the worker (a CI flake): only the passes below run.
  StartWithoutBackgroundPasses();
  auto link = Register(CpuWorker("w1", 4));
  const std::string id = SubmitAndPlace(CommandSpec(1));
  ASSERT_EQ(StoredState(id), JobState::kStarting);
  clock_.Advance(kHeartbeatTimeoutMs - 1);
  scheduler_->RunPass();
  EXPECT_EQ(scheduler_->ListWorkers().at(0).worker.state, WorkerState::kReady);
  clock_.Advance(2);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(scheduler_->ListWorkers().at(0).worker.state, WorkerState::kLost);
  EXPECT_TRUE(link->closed());
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(id));
  EXPECT_EQ(stored.state, JobState::kPending);
  EXPECT_EQ(stored.attempt, 1);
  RM_ASSERT_OK_AND_ASSIGN(auto workers, memory_.ListWorkers());
  EXPECT_EQ(workers.at(0).state, WorkerState::kLost);
}

TEST_F(SchedulerTest, HeartbeatsKeepAWorkerWhilePostgresIsDown) {
  Register(CpuWorker("w1", 4));
  store_.Fail(Call::kCommit, absl::UnavailableError("postgres gone"));
  store_.Fail(Call::kListJobs, absl::UnavailableError("postgres gone"));
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(kHeartbeatTimeoutMs / 2);
    scheduler_->Heartbeat("w1");
    scheduler_->RunPass();
  }
  EXPECT_EQ(scheduler_->ListWorkers().at(0).worker.state, WorkerState::kReady);
  EXPECT_THAT(scheduler_->ListJobs({}), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(SchedulerTest, ARuntimeLimitEndsTheJobOnSimulatedTime) {
  auto link = Register(CpuWorker("w1", 4));
  const std::string id = SubmitAndPlace(CommandSpec(1, /*max_runtime_seconds=*/60));
  Job job = link->assignments().at(0);
  Report("w1", job, 0, RankReport::Kind::kStarted);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  clock_.Advance(59'000);
  scheduler_->Heartbeat("w1");
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kRunning);
  clock_.Advance(2'000);
  scheduler_->Heartbeat("w1");
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kFailed);
  EXPECT_THAT(link->stops(), SizeIs(1));
}

TEST_F(SchedulerTest, AHungRingFailsOnSimulatedTimeNamingTheRankTheOthersWaitFor) {
  auto link = Register(CpuWorker("w1", 4));
  JobSpec spec = CommandSpec(2);
  spec.progress_timeout_seconds = 30;
  spec.restart_policy = RestartPolicy::kNever;  // so the attempt's end is the job's
  const std::string id = SubmitAndPlace(spec);
  Job job = link->assignments().at(0);
  for (int rank = 0; rank < 2; ++rank) Report("w1", job, rank, RankReport::Kind::kStarted);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  auto progress = [&](int rank, uint64_t entered, uint64_t completed) {
    RankReport r{job.id, job.attempt, rank, RankReport::Kind::kProgress, 0, 0, "", 0, 0, {}};
    r.activity.collectives_entered = entered;
    r.activity.collectives_completed = completed;
    scheduler_->ReportRank("w1", r);
  };
  progress(0, 5, 4);  // rank 0 waits in its fifth collective
  progress(1, 4, 4);  // rank 1 never joined it
  clock_.Advance(29'000);
  scheduler_->Heartbeat("w1");
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kRunning);
  clock_.Advance(1'000);
  scheduler_->Heartbeat("w1");
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  auto stored = memory_.GetJob(id);
  RM_ASSERT_OK(stored.status());
  EXPECT_EQ(stored->state, JobState::kFailed);
  EXPECT_THAT(stored->message, HasSubstr("waiting for rank 1 (entered 4 collectives"));
  EXPECT_THAT(link->stops(), SizeIs(1));
}

// Lets `ms` of simulated time pass, the workers heartbeating as they do.
void Elapse(Scheduler& scheduler, FakeClock& clock, const std::vector<std::string>& workers,
            int64_t ms) {
  for (int64_t left = ms; left > 0; left -= 1'000) {
    clock.Advance(std::min<int64_t>(left, 1'000));
    for (const std::string& worker : workers) scheduler.Heartbeat(worker);
  }
}

// A check run inside the job's MPI_Init reports after the ranks started: the job is RUNNING.
// Its result is written by the job's own processes, so a named culprit is not believed: the job
// is re-placed (not counted against backoff) and its next attempt is checked by ringmaster-check,
// whose blame marks the worker.
TEST_F(SchedulerTest, AnInSessionCheckThatNamesAWorkerIsVerifiedBeforeTheWorkerIsMarked) {
  // The job goes back to pending on workers that can take it again at once: a background pass
  // could place it before the test reads it as pending (a CI flake under TSan).
  StartWithoutBackgroundPasses();
  auto l1 = Register(CpuWorker("w1", 2));
  auto l2 = Register(CpuWorker("w2", 2));
  const std::string id = SubmitAndPlace(CommandSpec(4));
  Job job = l1->assignments().at(0);
  for (const RankPlacement& r : job.placement) {
    Report(r.worker_id, job, r.rank, RankReport::Kind::kStarted);
  }
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_EQ(StoredState(id), JobState::kRunning);
  scheduler_->ReportCheck(job.placement.at(0).worker_id, {id, job.attempt, true, false, 0.01, 0.05,
                                                          "cpu", "w2", "w2 was last", true});
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(id));
  EXPECT_EQ(stored.state, JobState::kPending);
  EXPECT_EQ(stored.attempt, 1);
  EXPECT_EQ(stored.preemptions, 1);
  RM_ASSERT_OK_AND_ASSIGN(auto events, memory_.ListEvents(id, 0));
  std::string text;
  for (const JobEvent& e : events) absl::StrAppend(&text, e.reason, "\n");
  EXPECT_THAT(text, HasSubstr("pre-run check failed: busbw 0.010 GB/s (no baseline yet, shape "
                              "2x2/cpu/mpi_init) in 0.050 s inside the job's MPI_Init: w2 was "
                              "last"));
  EXPECT_THAT(text, HasSubstr("re-placing to verify the blame of worker w2 with "
                              "ringmaster-check before any worker is marked (not counted against "
                              "backoff_limit): w2 was last"));
  auto unhealthy = [&](const std::string& worker) {
    for (const WorkerView& v : scheduler_->ListWorkers()) {
      if (v.worker.id == worker) return !v.worker.unhealthy_reason.empty();
    }
    return false;
  };
  EXPECT_FALSE(unhealthy("w2")) << "the job's own processes wrote that verdict";
  EXPECT_FALSE(l1->plans().at(0).separately);
  EXPECT_TRUE(scheduler_->CheckBaselines().empty()) << "a check that blames a worker is no sample";

  // The next attempt is checked by ringmaster-check on every worker; its blame is believed.
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  job = l1->assignments().back();
  ASSERT_EQ(job.attempt, 1);
  EXPECT_TRUE(l1->plans().back().run);
  EXPECT_TRUE(l1->plans().back().separately);
  EXPECT_TRUE(l2->plans().back().separately);
  scheduler_->ReportCheck(job.placement.at(0).worker_id, {id, job.attempt, true, false, 0.01, 0.5,
                                                          "cpu", "w2", "w2 was last", false});
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_TRUE(unhealthy("w2"));
  RM_ASSERT_OK_AND_ASSIGN(events, memory_.ListEvents(id, 0));
  EXPECT_THAT(events.back().reason, HasSubstr("re-placing without unhealthy worker w2"));

  // The attempt after that is checked in its MPI_Init again. A check of a job that has ended
  // is too late to decide anything.
  auto l3 = Register(CpuWorker("w3", 2));
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  job = l1->assignments().back();
  ASSERT_EQ(job.attempt, 2);
  EXPECT_FALSE(l1->plans().back().separately);
  for (const RankPlacement& r : job.placement) {
    Report(r.worker_id, job, r.rank, RankReport::Kind::kStarted);
  }
  for (const RankPlacement& r : job.placement) {
    Report(r.worker_id, job, r.rank, RankReport::Kind::kExited);
  }
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_EQ(StoredState(id), JobState::kSucceeded);
  scheduler_->ReportCheck(job.placement.at(0).worker_id,
                          {id, job.attempt, true, false, 0.01, 0.05, "cpu", "w3", "late", true});
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kSucceeded);
  EXPECT_FALSE(unhealthy("w3"));
}

// A one-rank job starts without mpirun, so nothing checks a ring for it; its events say so.
TEST_F(SchedulerTest, AOneRankJobIsPlacedWithoutACheckUnlessItAsksForMpirun) {
  auto l1 = Register(CpuWorker("w1", 2));
  const std::string id = SubmitAndPlace(CommandSpec(1));
  EXPECT_FALSE(l1->plans().back().run);
  EXPECT_TRUE(l1->plans().back().token.empty());
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(auto events, memory_.ListEvents(id, 0));
  EXPECT_THAT(events.back().reason,
              HasSubstr("; one rank, started without mpirun: no pre-run check"));

  JobSpec under_mpirun = CommandSpec(1);
  under_mpirun.use_mpirun = true;
  const std::string checked = SubmitAndPlace(under_mpirun);
  EXPECT_TRUE(l1->plans().back().run);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(events, memory_.ListEvents(checked, 0));
  EXPECT_THAT(events.back().reason, Not(HasSubstr("without mpirun")));
}

// Dependencies (JobSpec.after): a job waits, saying for what, runs once what it names ended as
// it asks, and is cancelled at once when that can no longer happen.
TEST_F(SchedulerTest, AJobAfterAnotherWaitsForItsSuccessAndIsCancelledAtOnceWhenItFails) {
  auto l1 = Register(CpuWorker("w1", 4));
  JobSpec first = CommandSpec(1);
  first.restart_policy = RestartPolicy::kNever;
  const std::string a = SubmitAndPlace(first);
  const std::string b = SubmitAndPlace(first);
  JobSpec after_a = CommandSpec(1);
  after_a.after = {{a, AfterCondition::kSucceeded}};
  JobSpec after_both = CommandSpec(1);
  after_both.after = {{a, AfterCondition::kSucceeded}, {b, AfterCondition::kSucceeded}};
  JobSpec after_b_fails = CommandSpec(1);
  after_b_fails.after = {{b, AfterCondition::kFailed}};
  const std::string c = SubmitAndPlace(after_a);
  const std::string d = SubmitAndPlace(after_both);
  const std::string e = SubmitAndPlace(after_b_fails);
  EXPECT_EQ(StoredState(c), JobState::kPending) << "one free slot is not what it waits for";
  RM_ASSERT_OK_AND_ASSIGN(Job waiting, scheduler_->GetJob(d));
  EXPECT_EQ(waiting.pending_reason, absl::StrCat("waiting for ", a, " to succeed (2 of 2 left)"));

  auto finish = [&](const std::string& id, int exit_code) {
    RM_ASSERT_OK_AND_ASSIGN(Job job, scheduler_->GetJob(id));
    Report("w1", job, 0, RankReport::Kind::kStarted);
    Report("w1", job, 0, RankReport::Kind::kExited, exit_code);
  };
  finish(a, 0);
  ASSERT_TRUE(
      WaitFor([&] { return StoredState(c) == JobState::kStarting; }, std::chrono::seconds(5)));
  RM_ASSERT_OK_AND_ASSIGN(waiting, scheduler_->GetJob(d));
  EXPECT_EQ(waiting.pending_reason, absl::StrCat("waiting for ", b, " to succeed"));
  EXPECT_EQ(StoredState(e), JobState::kPending);

  finish(b, 3);  // FAILED: d can never run, e can
  ASSERT_TRUE(
      WaitFor([&] { return StoredState(d) == JobState::kCancelled; }, std::chrono::seconds(5)));
  RM_ASSERT_OK_AND_ASSIGN(Job cancelled, memory_.GetJob(d));
  EXPECT_EQ(cancelled.message, absl::StrCat("dependency never satisfied: ", b,
                                            " ended FAILED, and this job waits for it to succeed"));
  EXPECT_TRUE(
      WaitFor([&] { return StoredState(e) == JobState::kStarting; }, std::chrono::seconds(5)));
}

TEST_F(SchedulerTest, OnlyExistingJobsOfTheSubmittersTeamCanBeNamed) {
  Register(CpuWorker("w1", 4));
  JobSpec spec = CommandSpec(1);
  RM_ASSERT_OK_AND_ASSIGN(auto theirs, scheduler_->Submit(spec, "", "team-b"));
  spec.after = {{"j-0123456789ab", AfterCondition::kSucceeded}};
  EXPECT_EQ(scheduler_->Submit(spec, "", "team-a").status().code(), absl::StatusCode::kNotFound);
  spec.after = {{theirs.job.id, AfterCondition::kEnded}};
  absl::Status live = scheduler_->Submit(spec, "", "team-a").status();
  EXPECT_EQ(live.code(), absl::StatusCode::kNotFound) << live;
  EXPECT_THAT(live.message(), HasSubstr("only your team's jobs can be named"));
  // An admin names anyone's; the owner its own.
  RM_EXPECT_OK(scheduler_->Submit(spec, "", "", std::nullopt, /*admin=*/true).status());
  RM_EXPECT_OK(scheduler_->Submit(spec, "", "team-b").status());
  // Ended: Postgres answers for it.
  RM_ASSERT_OK(scheduler_->Cancel(theirs.job.id, "done with it").status());
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(scheduler_->Submit(spec, "", "team-a").status().code(), absl::StatusCode::kNotFound);
  RM_ASSERT_OK_AND_ASSIGN(auto after_end, scheduler_->Submit(spec, "", "team-b"));
  EXPECT_TRUE(WaitFor([&] { return StoredState(after_end.job.id) != JobState::kPending; },
                      std::chrono::seconds(5)))
      << "its dependency has ended: it runs";
}

TEST_F(SchedulerTest, DependenciesOnJobsThatEndedSurviveARestart) {
  Register(CpuWorker("w1", 2));
  JobSpec spec = CommandSpec(1);
  RM_ASSERT_OK_AND_ASSIGN(auto first, scheduler_->Submit(spec, ""));
  spec.after = {{first.job.id, AfterCondition::kFailed}};
  RM_ASSERT_OK_AND_ASSIGN(auto waits_for_failure, scheduler_->Submit(spec, ""));
  spec.after = {{first.job.id, AfterCondition::kSucceeded}};
  RM_ASSERT_OK_AND_ASSIGN(auto waits_for_success, scheduler_->Submit(spec, ""));
  // The scheduler goes away before anything runs; the first job is cancelled meanwhile (a write
  // straight to the store, as another leader would have done).
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  scheduler_.reset();
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(first.job.id));
  stored.state = JobState::kCancelled;
  JobEvent event{stored.id, stored.last_event_seq + 1, JobState::kCancelled, 0, "gone", 0, 0};
  stored.last_event_seq = event.seq;
  RM_ASSERT_OK(memory_.UpdateJob(stored, event));
  Start();
  Register(CpuWorker("w1", 2));
  EXPECT_TRUE(WaitFor([&] { return StoredState(waits_for_success.job.id) == JobState::kCancelled; },
                      std::chrono::seconds(5)));
  EXPECT_TRUE(WaitFor([&] { return StoredState(waits_for_failure.job.id) == JobState::kStarting; },
                      std::chrono::seconds(5)));
}

// Arrays (scheduler.h, "Arrays"): tasks are created as the parallelism lets them run, each is a
// job of its own told its index, and the last end ends the array.
JobSpec ArrayOf(int32_t count, int32_t parallelism) {
  JobSpec spec = CommandSpec(1);
  spec.restart_policy = RestartPolicy::kNever;
  spec.command->argv = {"echo", "{index}"};
  spec.array = ArraySpec{count, parallelism};
  return spec;
}

TEST_F(SchedulerTest, AnArrayRunsEveryTaskOnceWithinItsParallelismAndSucceeds) {
  auto link = Register(CpuWorker("w1", 8));
  RM_ASSERT_OK_AND_ASSIGN(auto array, scheduler_->Submit(ArrayOf(10, 3), ""));
  const std::string id = array.job.id;
  std::set<std::string> done;
  std::set<int32_t> seen;
  for (int round = 0; round < 50 && done.size() < 10; ++round) {
    ASSERT_TRUE(
        WaitFor([&] { return link->assignments().size() > done.size(); }, std::chrono::seconds(5)));
    RM_ASSERT_OK(scheduler_->Flush(5'000));
    const std::vector<Job> sent = link->assignments();
    EXPECT_LE(sent.size() - done.size(), 3u) << "at most 3 tasks at once";
    RM_ASSERT_OK_AND_ASSIGN(Job now, scheduler_->GetJob(id));
    ASSERT_TRUE(now.array_status.has_value());
    EXPECT_LE(now.array_status->running + now.array_status->pending, 3);
    for (const Job& task : sent) {
      if (done.count(task.id)) continue;
      auto parsed = ParseTaskId(task.id);
      ASSERT_TRUE(parsed.has_value()) << task.id;
      EXPECT_EQ(parsed->first, id);
      EXPECT_TRUE(seen.insert(parsed->second).second) << "task " << parsed->second << " twice";
      EXPECT_EQ(task.spec.command->argv,
                (std::vector<std::string>{"echo", absl::StrCat(parsed->second)}));
      EXPECT_EQ(task.spec.command->env.at("RINGMASTER_ARRAY_INDEX"), absl::StrCat(parsed->second));
      RunToEnd("w1", task);
      done.insert(task.id);
    }
  }
  ASSERT_EQ(seen.size(), 10u);
  EXPECT_EQ(*seen.rbegin(), 9);
  ASSERT_TRUE(
      WaitFor([&] { return StoredState(id) == JobState::kSucceeded; }, std::chrono::seconds(5)));
  RM_ASSERT_OK_AND_ASSIGN(Job ended, scheduler_->GetJob(id));
  EXPECT_EQ(ended.message, "all 10 tasks succeeded");
  ASSERT_TRUE(ended.array_status.has_value());
  EXPECT_EQ(*ended.array_status, (ArrayStatus{10, 0, 0, 0, 10, 0, 0, {}}));
  RM_ASSERT_OK_AND_ASSIGN(auto events, memory_.ListEvents(id, 0));
  ASSERT_EQ(events.size(), 3u) << "submitted, a task started, the end";
  EXPECT_EQ(events[1].state, JobState::kRunning);
  // Listed: the array is one line, its tasks apart.
  RM_ASSERT_OK_AND_ASSIGN(JobPage all, scheduler_->ListJobs({}));
  ASSERT_EQ(all.jobs.size(), 1u);
  EXPECT_EQ(all.jobs[0].id, id);
  JobListQuery tasks;
  tasks.array_id = id;
  tasks.page_size = 4;
  RM_ASSERT_OK_AND_ASSIGN(JobPage first, scheduler_->ListJobs(tasks));
  EXPECT_EQ(first.jobs.size(), 4u);
  EXPECT_EQ(first.jobs[0].id, absl::StrCat(id, "-9")) << "newest first";
  EXPECT_FALSE(first.next_page_token.empty());
}

TEST_F(SchedulerTest, AJobAfterAnArrayIsCancelledAtOnceWhenATaskFails) {
  auto link = Register(CpuWorker("w1", 8));
  RM_ASSERT_OK_AND_ASSIGN(auto array, scheduler_->Submit(ArrayOf(4, 1), ""));
  const std::string id = array.job.id;
  JobSpec after = CommandSpec(1);
  after.after = {{id, AfterCondition::kSucceeded}};
  RM_ASSERT_OK_AND_ASSIGN(auto waits_for_success, scheduler_->Submit(after, ""));
  after.after = {{id, AfterCondition::kEnded}};
  RM_ASSERT_OK_AND_ASSIGN(auto waits_for_end, scheduler_->Submit(after, ""));
  ASSERT_TRUE(WaitFor([&] { return link->assignments().size() == 1; }, std::chrono::seconds(5)));
  RM_ASSERT_OK_AND_ASSIGN(Job waiting, scheduler_->GetJob(waits_for_success.job.id));
  EXPECT_EQ(waiting.pending_reason,
            absl::StrCat("waiting for ", id, " to succeed (4 of 4 tasks of the array left)"));
  Job task0 = link->assignments()[0];
  RunToEnd("w1", task0, 3);  // task 0 fails
  ASSERT_TRUE(WaitFor([&] { return StoredState(waits_for_success.job.id) == JobState::kCancelled; },
                      std::chrono::seconds(5)))
      << "cancelled at once, three tasks before the array ends";
  RM_ASSERT_OK_AND_ASSIGN(Job cancelled, memory_.GetJob(waits_for_success.job.id));
  EXPECT_THAT(cancelled.message,
              HasSubstr(absl::StrCat("array ", id, " cannot succeed (failed: 1, cancelled: 0)")));
  EXPECT_EQ(StoredState(waits_for_end.job.id), JobState::kPending);
  EXPECT_EQ(StoredState(id), JobState::kRunning);
  // The rest run; the array ends FAILED, and what waited for its end runs.
  for (int i = 1; i < 4; ++i) {
    ASSERT_TRUE(WaitFor([&] { return link->assignments().size() == static_cast<size_t>(i + 1); },
                        std::chrono::seconds(5)));
    Job task = link->assignments()[i];
    EXPECT_EQ(task.id, absl::StrCat(id, "-", i));
    RunToEnd("w1", task);
  }
  ASSERT_TRUE(
      WaitFor([&] { return StoredState(id) == JobState::kFailed; }, std::chrono::seconds(5)));
  RM_ASSERT_OK_AND_ASSIGN(Job failed, scheduler_->GetJob(id));
  EXPECT_EQ(failed.array_status->failed_indices, std::vector<int32_t>{0});
  EXPECT_EQ(failed.array_status->succeeded, 3);
  EXPECT_TRUE(WaitFor([&] { return StoredState(waits_for_end.job.id) == JobState::kStarting; },
                      std::chrono::seconds(5)));
}

// A job after an array's failure runs once every task ended and one failed; one after its
// success is cancelled then. Both survive a restart while they wait.
TEST_F(SchedulerTest, AJobAfterAnArraysFailureRunsWhenItEndsAndWaitsAcrossARestart) {
  auto link = Register(CpuWorker("w1", 4));
  RM_ASSERT_OK_AND_ASSIGN(auto array, scheduler_->Submit(ArrayOf(3, 1), ""));
  const std::string id = array.job.id;
  JobSpec after = CommandSpec(1);
  after.after = {{id, AfterCondition::kFailed}};
  RM_ASSERT_OK_AND_ASSIGN(auto on_failure, scheduler_->Submit(after, ""));
  ASSERT_TRUE(WaitFor([&] { return link->assignments().size() == 1; }, std::chrono::seconds(5)));
  Job task0 = link->assignments()[0];
  RunToEnd("w1", task0, 1);  // a failure: the array cannot succeed
  ASSERT_TRUE(WaitFor([&] { return link->assignments().size() == 2; }, std::chrono::seconds(5)));
  EXPECT_EQ(StoredState(on_failure.job.id), JobState::kPending) << "two tasks still to run";
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  scheduler_.reset();
  Start();
  auto again = std::make_shared<RecordingLink>();
  std::vector<HeldRank> held(1);
  held[0].job_id = absl::StrCat(id, "-1");
  RM_ASSERT_OK(scheduler_->RegisterWorker(CpuWorker("w1", 4), held, again));
  RM_ASSERT_OK_AND_ASSIGN(Job task1, scheduler_->GetJob(absl::StrCat(id, "-1")));
  RunToEnd("w1", task1);
  ASSERT_TRUE(WaitFor([&] { return !again->assignments().empty(); }, std::chrono::seconds(5)));
  Job task2 = again->assignments()[0];
  EXPECT_EQ(task2.id, absl::StrCat(id, "-2"));
  EXPECT_EQ(StoredState(on_failure.job.id), JobState::kPending);
  RunToEnd("w1", task2);
  ASSERT_TRUE(
      WaitFor([&] { return StoredState(id) == JobState::kFailed; }, std::chrono::seconds(5)));
  EXPECT_TRUE(WaitFor([&] { return StoredState(on_failure.job.id) == JobState::kStarting; },
                      std::chrono::seconds(5)));
  RM_ASSERT_OK_AND_ASSIGN(Job ended, scheduler_->GetJob(id));
  EXPECT_EQ(*ended.array_status, (ArrayStatus{3, 0, 0, 0, 2, 1, 0, {0}}))
      << "counts read back from the store after the restart";
}

TEST_F(SchedulerTest, CancellingAHundredThousandTaskArrayCancelsItsLiveTasksAndCreatesNoMore) {
  auto link = Register(CpuWorker("w1", 2));
  RM_ASSERT_OK_AND_ASSIGN(auto array, scheduler_->Submit(ArrayOf(kMaxArrayCount, 0), ""));
  const std::string id = array.job.id;
  ASSERT_TRUE(WaitFor([&] { return link->assignments().size() == 2; }, std::chrono::seconds(10)));
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(Job running, scheduler_->GetJob(id));
  EXPECT_EQ(running.array_status->pending + running.array_status->running, kArrayWindow)
      << "the window, not 100,000 jobs in memory";
  EXPECT_EQ(running.array_status->waiting, kMaxArrayCount - kArrayWindow);
  RM_ASSERT_OK_AND_ASSIGN(Job cancelled, scheduler_->Cancel(id, "enough"));
  EXPECT_EQ(cancelled.state, JobState::kCancelled);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(absl::StrCat(id, "-0")), JobState::kCancelled);
  EXPECT_EQ(StoredState(absl::StrCat(id, "-4095")), JobState::kCancelled);
  EXPECT_EQ(link->stops().size(), 2u) << "the two running tasks are stopped";
  RM_ASSERT_OK_AND_ASSIGN(Job ended, scheduler_->GetJob(id));
  EXPECT_EQ(ended.array_status->cancelled, kMaxArrayCount);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_FALSE(memory_.GetJob(absl::StrCat(id, "-4096")).ok()) << "no task created after";
}

TEST_F(SchedulerTest, AnArraysTasksCountAgainstTheLiveJobBound) {
  scheduler_.reset();
  SchedulerOptions options;
  options.max_live_jobs = 10;
  Start(options);
  RM_ASSERT_OK_AND_ASSIGN(auto array, scheduler_->Submit(ArrayOf(100, 0), ""));
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  scheduler_->RunPass();
  RM_ASSERT_OK_AND_ASSIGN(Job waiting, scheduler_->GetJob(array.job.id));
  EXPECT_EQ(waiting.array_status->pending, 9) << "the array and 9 tasks: 10 live jobs";
  EXPECT_THAT(waiting.pending_reason, HasSubstr("no room for more live jobs"));
  EXPECT_EQ(scheduler_->Submit(CommandSpec(1), "").status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(SchedulerTest, AnArraySurvivesARestartWithoutLosingOrRepeatingATask) {
  auto link = Register(CpuWorker("w1", 4));
  RM_ASSERT_OK_AND_ASSIGN(auto array, scheduler_->Submit(ArrayOf(6, 2), ""));
  const std::string id = array.job.id;
  std::map<int32_t, int> runs;
  auto run = [&](RecordingLink& l, size_t from) {
    const std::vector<Job> sent = l.assignments();
    for (size_t i = from; i < sent.size(); ++i) {
      ++runs[ParseTaskId(sent[i].id)->second];
      RunToEnd("w1", sent[i]);
    }
    return sent.size();
  };
  ASSERT_TRUE(WaitFor([&] { return link->assignments().size() == 2; }, std::chrono::seconds(5)));
  run(*link, 0);
  ASSERT_TRUE(WaitFor([&] { return link->assignments().size() == 4; }, std::chrono::seconds(5)));
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  scheduler_.reset();  // tasks 2 and 3 are placed; 4 and 5 not created
  Start();
  auto again = std::make_shared<RecordingLink>();
  // The worker comes back holding tasks 2 and 3, which then finish.
  std::vector<HeldRank> held(2);
  held[0].job_id = absl::StrCat(id, "-2");
  held[1].job_id = absl::StrCat(id, "-3");
  RM_ASSERT_OK(scheduler_->RegisterWorker(CpuWorker("w1", 4), held, again));
  for (int i : {2, 3}) {
    RM_ASSERT_OK_AND_ASSIGN(Job task, scheduler_->GetJob(absl::StrCat(id, "-", i)));
    ++runs[i];
    RunToEnd("w1", task);
  }
  ASSERT_TRUE(WaitFor([&] { return again->assignments().size() == 2; }, std::chrono::seconds(5)));
  run(*again, 0);
  ASSERT_TRUE(
      WaitFor([&] { return StoredState(id) == JobState::kSucceeded; }, std::chrono::seconds(5)));
  EXPECT_EQ(runs, (std::map<int32_t, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
}

// ringmaster-check and a check inside MPI_Init time different things: each kind of check is
// sent the baseline its own kind learned.
TEST_F(SchedulerTest, EachKindOfCheckIsSentTheBaselineOfItsOwnKind) {
  auto l1 = Register(CpuWorker("w1", 2));
  auto l2 = Register(CpuWorker("w2", 2));
  auto run_to_the_end = [&](const std::string& id, bool in_session, double busbw) {
    Job job = l1->assignments().back();
    EXPECT_EQ(job.id, id);
    scheduler_->ReportCheck(job.placement.at(0).worker_id,
                            {id, job.attempt, true, true, busbw, 0.5, "cpu", "", "", in_session});
    for (const RankPlacement& r : job.placement) {
      Report(r.worker_id, job, r.rank, RankReport::Kind::kStarted);
      Report(r.worker_id, job, r.rank, RankReport::Kind::kExited);
    }
    RM_ASSERT_OK(scheduler_->Flush(5'000));
    EXPECT_EQ(StoredState(id), JobState::kSucceeded);
  };
  JobSpec trainer = CommandSpec(4);
  trainer.command.reset();
  trainer.trainer = TrainerWorkload{"mlp-small", 32, 10, std::nullopt};

  run_to_the_end(SubmitAndPlace(CommandSpec(4)), false, 1.4);
  EXPECT_DOUBLE_EQ(l1->plans().back().baseline_gbps, 0);
  const std::string first_trainer = SubmitAndPlace(trainer);
  EXPECT_DOUBLE_EQ(l1->plans().back().baseline_gbps, 0) << "none inside MPI_Init yet";
  run_to_the_end(first_trainer, true, 0.6);
  SubmitAndPlace(trainer);
  EXPECT_DOUBLE_EQ(l1->plans().back().baseline_gbps, 0.6);
  EXPECT_DOUBLE_EQ(scheduler_->CheckBaselines().at("2x2/cpu").busbw_gbps, 1.4);
  EXPECT_DOUBLE_EQ(scheduler_->CheckBaselines().at("2x2/cpu/mpi_init").busbw_gbps, 0.6);
}

TEST_F(SchedulerTest, AWorkerAFailedCheckNamedIsClearedOnProbationByTheNextCheckItPasses) {
  scheduler_.reset();
  SchedulerOptions options;
  options.unhealthy_recheck_ms = 60'000;
  Start(options);
  auto l1 = Register(CpuWorker("w1", 2));
  auto l2 = Register(CpuWorker("w2", 2));
  auto beat = [&](int64_t ms) { Elapse(*scheduler_, clock_, {"w1", "w2"}, ms); };
  const std::string id = SubmitAndPlace(CommandSpec(4));  // two ranks on each worker
  ASSERT_EQ(StoredState(id), JobState::kStarting);
  Job job = l1->assignments().at(0);
  const std::string launcher = job.placement.at(0).worker_id;
  scheduler_->ReportCheck(launcher, {id, job.attempt, true, false, 0.01, 0.5, "cpu", "w2",
                                     "w2's ranks made the ring wait", false});
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kPending);
  auto unhealthy = [&](const std::string& worker) {
    for (const WorkerView& v : scheduler_->ListWorkers()) {
      if (v.worker.id == worker) return !v.worker.unhealthy_reason.empty();
    }
    return false;
  };
  ASSERT_TRUE(unhealthy("w2"));
  for (const WorkerView& v : scheduler_->ListWorkers()) EXPECT_FALSE(v.on_probation) << v.worker.id;

  // A job that runs no check never goes to a worker on probation.
  JobSpec unchecked = CommandSpec(4);
  unchecked.health_check = false;
  unchecked.priority = 10;  // considered first
  auto plain = scheduler_->Submit(unchecked, "");
  RM_ASSERT_OK(plain.status());

  beat(59'000);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kPending) << "still waiting out the recheck time";

  beat(1'000);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(plain->job.id), JobState::kPending);
  ASSERT_EQ(StoredState(id), JobState::kStarting) << "on probation: taken by the checked job";
  job = l1->assignments().back();
  ASSERT_EQ(job.id, id);
  ASSERT_EQ(job.attempt, 1);
  EXPECT_TRUE(unhealthy("w2")) << "until its check passes";
  for (const WorkerView& v : scheduler_->ListWorkers()) {
    EXPECT_EQ(v.on_probation, v.worker.id == "w2") << v.worker.id;
  }
  EXPECT_TRUE(l1->plans().back().separately) << "only ringmaster-check may clear it";
  EXPECT_TRUE(l2->plans().back().separately);

  // A passing result from inside the job's MPI_Init (which the job could have written) does
  // not clear it.
  scheduler_->ReportCheck(job.placement.at(0).worker_id,
                          {id, job.attempt, true, true, 1.0, 0.5, "cpu", "", "passed", true});
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_TRUE(unhealthy("w2"));

  scheduler_->ReportCheck(job.placement.at(0).worker_id,
                          {id, job.attempt, true, true, 1.0, 0.5, "cpu", "", "passed", false});
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_FALSE(unhealthy("w2"));
  for (const WorkerView& v : scheduler_->ListWorkers()) EXPECT_FALSE(v.on_probation) << v.worker.id;
  RM_ASSERT_OK_AND_ASSIGN(auto stored_workers, memory_.ListWorkers());
  for (const Worker& w : stored_workers) EXPECT_EQ(w.unhealthy_reason, "") << w.id;
  RM_ASSERT_OK_AND_ASSIGN(auto events, memory_.ListEvents(id, 0));
  EXPECT_THAT(events.back().reason, HasSubstr("worker w2 passed it on probation"));
  EXPECT_EQ(scheduler_->CheckBaselines().count("2x2/cpu"), 1u);
}

TEST_F(SchedulerTest, AWorkerNamedAgainOnProbationWaitsAgain) {
  scheduler_.reset();
  SchedulerOptions options;
  options.unhealthy_recheck_ms = 60'000;
  Start(options);
  auto l1 = Register(CpuWorker("w1", 2));
  auto l2 = Register(CpuWorker("w2", 2));
  auto beat = [&](int64_t ms) { Elapse(*scheduler_, clock_, {"w1", "w2"}, ms); };
  const std::string id = SubmitAndPlace(CommandSpec(4));
  for (int attempt = 0; attempt < 2; ++attempt) {
    Job job = l1->assignments().back();
    ASSERT_EQ(job.attempt, attempt);
    scheduler_->ReportCheck(job.placement.at(0).worker_id,
                            {id, job.attempt, true, false, 0.01, 0.5, "cpu", "w2", "slow", false});
    RM_ASSERT_OK(scheduler_->Flush(5'000));
    ASSERT_EQ(StoredState(id), JobState::kPending);
    beat(60'000);
    scheduler_->RunPass();
    RM_ASSERT_OK(scheduler_->Flush(5'000));
    ASSERT_EQ(StoredState(id), JobState::kStarting);
  }
  // Named a second time on probation: off probation, and the wait starts over.
  Job job = l1->assignments().back();
  scheduler_->ReportCheck(job.placement.at(0).worker_id,
                          {id, job.attempt, true, false, 0.01, 0.5, "cpu", "w2", "slow", false});
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  beat(30'000);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kPending);
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(id));
  EXPECT_EQ(stored.attempt, 3) << "check failures are not counted against backoff_limit";
}

TEST_F(SchedulerTest, AFencedLeaderWritesNothingMore) {
  auto link = Register(CpuWorker("w1", 4));
  // A second scheduler takes over the same store: a newer epoch.
  InMemoryPendingQueue queue;
  SchedulerOptions options;
  options.on_fenced = [](const absl::Status&) {};
  Scheduler successor(&store_, &queue, &liveness_, &clock_, options, nullptr);
  RM_ASSERT_OK(successor.Start());

  EXPECT_THAT(scheduler_->Submit(CommandSpec(1), "from-old"),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(fenced_);
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, memory_.ListActiveJobs());
  EXPECT_THAT(jobs, IsEmpty());
  // Its later decisions reach neither the store nor the workers.
  EXPECT_THAT(scheduler_->Submit(CommandSpec(1), "again"), StatusIs(absl::StatusCode::kUnavailable));
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, successor.Submit(CommandSpec(1), "from-new"));
  EXPECT_FALSE(created.existing);
  successor.Stop();
}

TEST_F(SchedulerTest, AnIdleWatcherCostsNoStoreRoundTrip) {
  auto link = Register(CpuWorker("w1", 4));
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, scheduler_->Submit(CommandSpec(1), ""));
  std::vector<JobEvent> seen;
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    (void)scheduler_->Watch(
        created.job.id,
        [&](const JobEvent& e) {
          std::lock_guard<std::mutex> lock(mu);
          seen.push_back(e);
          return true;
        },
        [&] { return stop.load(); });
  });
  // Joined however the test ends, so a failed assertion cannot leave it running.
  struct Joiner {
    std::thread& t;
    std::atomic<bool>& stop;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } joiner{watcher, stop};
  // The loop may place the job at once (a worker is there): the STARTING event can be in too.
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !seen.empty();
  }, std::chrono::seconds(5)));
  const int reads = store_.calls(Call::kListEvents);
  std::this_thread::sleep_for(std::chrono::milliseconds(2'500));  // idle: the watcher waits
  EXPECT_EQ(store_.calls(Call::kListEvents), reads);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  Report("w1", link->assignments().at(0), 0, RankReport::Kind::kStarted);
  Report("w1", link->assignments().at(0), 0, RankReport::Kind::kExited);
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size() == 4;
  }, std::chrono::seconds(5)));
  watcher.join();  // the job ended: Watch returns by itself
  EXPECT_EQ(store_.calls(Call::kListEvents), reads);
  EXPECT_EQ(seen.back().state, JobState::kSucceeded);
}

TEST_F(SchedulerTest, WatchesBeyondTheBoundAreRefusedUntilOneEnds) {
  scheduler_.reset();
  SchedulerOptions options;
  options.max_watchers = 2;
  Start(options);
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created, scheduler_->Submit(CommandSpec(1), ""));
  const std::string id = created.job.id;
  std::atomic<int> sent{0};
  std::atomic<bool> stop_first{false}, stop_all{false};
  auto watch = [&](std::atomic<bool>* stop) {
    return scheduler_->Watch(
        id,
        [&](const JobEvent&) {
          ++sent;
          return true;
        },
        [&, stop] { return stop->load() || stop_all.load(); });
  };
  std::vector<std::thread> watchers;
  struct Joiner {
    std::vector<std::thread>& threads;
    std::atomic<bool>& stop;
    ~Joiner() {
      stop = true;
      for (std::thread& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{watchers, stop_all};
  watchers.emplace_back([&] { (void)watch(&stop_first); });
  watchers.emplace_back([&] { (void)watch(&stop_all); });
  // Both are in once each has sent the job's stored event.
  ASSERT_TRUE(WaitFor([&] { return sent.load() == 2; }, std::chrono::seconds(5)));
  absl::Status third = watch(&stop_all);
  EXPECT_THAT(third, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(third.message(), HasSubstr("--max-watchers"));
  EXPECT_EQ(sent.load(), 2) << "a refused watch sends nothing";
  // One ends (its caller went away): its place is free again.
  stop_first = true;
  watchers.front().join();
  std::thread again([&] { (void)watch(&stop_all); });
  watchers.push_back(std::move(again));
  EXPECT_TRUE(WaitFor([&] { return sent.load() == 3; }, std::chrono::seconds(5)));
}

TEST_F(SchedulerTest, CancelReturnsTheStoredCancelledJobAndStopsItsRanks) {
  auto link = Register(CpuWorker("w1", 4));
  const std::string id = SubmitAndPlace(CommandSpec(2));
  RM_ASSERT_OK_AND_ASSIGN(Job cancelled, scheduler_->Cancel(id, "changed my mind"));
  EXPECT_EQ(cancelled.state, JobState::kCancelled);
  EXPECT_EQ(StoredState(id), JobState::kCancelled);
  EXPECT_THAT(link->stops(), SizeIs(1));
  EXPECT_THAT(scheduler_->Cancel(id, ""), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(scheduler_->Cancel("j-000000000000", ""), StatusIs(absl::StatusCode::kNotFound));
}

Queue TeamQueue(const std::string& name) {
  Queue queue;
  queue.name = name;
  queue.cohort = "research";
  queue.weight = 2;
  queue.quotas["t4"] = ResourceQuota{8, 4, std::nullopt};
  return queue;
}

JobSpec InQueue(JobSpec spec, const std::string& queue) {
  spec.queue = queue;
  return spec;
}

TEST_F(SchedulerTest, TheDefaultQueueIsThereFromTheStart) {
  RM_ASSERT_OK_AND_ASSIGN(QueueView view, scheduler_->GetQueue("default"));
  EXPECT_TRUE(view.queue.unlimited());
  EXPECT_EQ(view.status, QueueStatus{});
  EXPECT_THAT(scheduler_->QueuesSnapshot(), SizeIs(1));
  // An empty queue field means default.
  RM_EXPECT_OK(scheduler_->Submit(InQueue(CommandSpec(1), ""), "").status());
}

TEST_F(SchedulerTest, SubmitToAQueueThatDoesNotExistIsNotFoundNamingIt) {
  auto refused = scheduler_->Submit(InQueue(CommandSpec(1), "vision"), "");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("'vision'"));
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, memory_.ListActiveJobs());
  EXPECT_THAT(jobs, IsEmpty());
  RM_ASSERT_OK(scheduler_->CreateQueue(TeamQueue("vision")).status());
  RM_EXPECT_OK(scheduler_->Submit(InQueue(CommandSpec(1), "vision"), "").status());
}

TEST_F(SchedulerTest, QueueChangesAreStoredThenKeptInMemory) {
  clock_.Advance(1'000);
  RM_ASSERT_OK_AND_ASSIGN(QueueView created, scheduler_->CreateQueue(TeamQueue("vision")));
  EXPECT_EQ(created.queue.created_at_ms, clock_.NowMs());
  RM_ASSERT_OK_AND_ASSIGN(Queue stored, memory_.GetQueue("vision"));
  EXPECT_EQ(stored, created.queue);
  EXPECT_EQ(scheduler_->QueuesSnapshot().at("vision"), stored);
  EXPECT_THAT(scheduler_->CreateQueue(TeamQueue("vision")),
              StatusIs(absl::StatusCode::kAlreadyExists));

  clock_.Advance(1'000);
  Queue next = TeamQueue("vision");
  next.weight = 5;
  next.quotas.clear();
  RM_ASSERT_OK_AND_ASSIGN(QueueView updated, scheduler_->UpdateQueue(next));
  EXPECT_EQ(updated.queue.weight, 5);
  EXPECT_EQ(updated.queue.created_at_ms, created.queue.created_at_ms);
  EXPECT_EQ(updated.queue.updated_at_ms, clock_.NowMs());
  RM_ASSERT_OK_AND_ASSIGN(stored, memory_.GetQueue("vision"));
  EXPECT_EQ(stored, updated.queue);
  EXPECT_EQ(scheduler_->QueuesSnapshot().at("vision"), stored);
  std::vector<std::string> names;
  for (const QueueView& view : scheduler_->ListQueues()) names.push_back(view.queue.name);
  EXPECT_THAT(names, ::testing::ElementsAre("default", "vision"));

  RM_ASSERT_OK(scheduler_->DeleteQueue("vision"));
  EXPECT_THAT(memory_.GetQueue("vision"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(scheduler_->GetQueue("vision"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(scheduler_->UpdateQueue(next), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(scheduler_->DeleteQueue("vision"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(SchedulerTest, QueueRequestsAreValidated) {
  Queue bad = TeamQueue("vision");
  bad.weight = 1001;
  EXPECT_THAT(scheduler_->CreateQueue(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(scheduler_->UpdateQueue(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(scheduler_->GetQueue("Bad Name"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(scheduler_->DeleteQueue(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(store_.calls(Call::kCreateQueue), 0);
}

TEST_F(SchedulerTest, AQueueWriteTheStoreRefusedChangesNothingInMemory) {
  store_.Fail(Call::kCreateQueue, absl::UnavailableError("postgres away"), 1);
  EXPECT_THAT(scheduler_->CreateQueue(TeamQueue("vision")),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(scheduler_->QueuesSnapshot().contains("vision"));
  RM_ASSERT_OK(scheduler_->CreateQueue(TeamQueue("vision")).status());
  store_.Fail(Call::kDeleteQueue, absl::UnavailableError("postgres away"), 1);
  EXPECT_THAT(scheduler_->DeleteQueue("vision"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(scheduler_->QueuesSnapshot().contains("vision"));
}

TEST_F(SchedulerTest, TheDefaultQueueCannotBeDeleted) {
  EXPECT_THAT(scheduler_->DeleteQueue("default"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(scheduler_->QueuesSnapshot().contains("default"));
}

TEST_F(SchedulerTest, AQueueWithALiveJobCannotBeDeletedUntilTheJobEnds) {
  RM_ASSERT_OK(scheduler_->CreateQueue(TeamQueue("vision")).status());
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created,
                          scheduler_->Submit(InQueue(CommandSpec(1), "vision"), ""));
  auto refused = scheduler_->DeleteQueue("vision");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("1 live jobs"));
  RM_ASSERT_OK(scheduler_->Cancel(created.job.id, "").status());
  RM_EXPECT_OK(scheduler_->DeleteQueue("vision"));
}

TEST_F(SchedulerTest, AQueueIsNotDeletedUnderAJobWhoseSubmitGaveUpWaitingForTheStore) {
  RM_ASSERT_OK(scheduler_->CreateQueue(TeamQueue("vision")).status());
  store_.Hang(Call::kCommit);
  // write_wait_ms is 2 s here: the submit gives up while its write is still on its way.
  EXPECT_THAT(scheduler_->Submit(InQueue(CommandSpec(1), "vision"), "late"),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(scheduler_->DeleteQueue("vision"), StatusIs(absl::StatusCode::kFailedPrecondition));
  store_.Heal();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(auto jobs, memory_.ListActiveJobs());
  ASSERT_THAT(jobs, SizeIs(1));
  EXPECT_EQ(jobs[0].spec.queue, "vision");
  EXPECT_THAT(scheduler_->DeleteQueue("vision"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(scheduler_->QueuesSnapshot().contains("vision"));
}

TEST_F(SchedulerTest, QueuesAreLoadedAgainAfterARestart) {
  RM_ASSERT_OK_AND_ASSIGN(QueueView created, scheduler_->CreateQueue(TeamQueue("vision")));
  scheduler_->Stop();
  scheduler_.reset();
  Start();
  EXPECT_EQ(scheduler_->QueuesSnapshot().at("vision"), created.queue);
  RM_EXPECT_OK(scheduler_->Submit(InQueue(CommandSpec(1), "vision"), "").status());
}

TEST_F(SchedulerTest, AFencedLeaderChangesNoQueue) {
  InMemoryPendingQueue queue;
  SchedulerOptions options;
  options.on_fenced = [](const absl::Status&) {};
  Scheduler successor(&store_, &queue, &liveness_, &clock_, options, nullptr);
  RM_ASSERT_OK(successor.Start());
  EXPECT_THAT(scheduler_->CreateQueue(TeamQueue("vision")),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(memory_.GetQueue("vision"), StatusIs(absl::StatusCode::kNotFound));
  RM_EXPECT_OK(successor.CreateQueue(TeamQueue("vision")).status());
  successor.Stop();
}

// Two teams share one worker's 4 CPU slots; each is promised 2.
// The value of counter `name` with label queue=`queue`, resource=`resource`; -1 when absent.
double CounterValue(prometheus::Registry& registry, const std::string& name,
                    const std::string& queue, const std::string& resource) {
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& l : metric.label) labels[l.name] = l.value;
      if (labels["queue"] == queue && labels["resource"] == resource) {
        return metric.counter.value;
      }
    }
  }
  return -1;
}


TEST_F(SchedulerTest, AQueueIsChargedForRunningTimeAndTheChargeSurvivesARestart) {
  scheduler_.reset();
  prometheus::Registry registry;
  Start({}, &registry);
  Register(CpuWorker("w1", 4));
  const std::string id = SubmitAndPlace(CommandSpec(2));
  RM_ASSERT_OK_AND_ASSIGN(Job job, scheduler_->GetJob(id));
  // Placed but not running yet: nothing is charged.
  Elapse(*scheduler_, clock_, {"w1"}, 3'000);
  RM_ASSERT_OK_AND_ASSIGN(QueueView view, scheduler_->GetQueue("default"));
  EXPECT_EQ(view.status.resources["cpu"].used_seconds, 0);
  for (int rank = 0; rank < 2; ++rank) Report("w1", job, rank, RankReport::Kind::kStarted);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  // Running: 2 slots for 10 s so far.
  Elapse(*scheduler_, clock_, {"w1"}, 10'000);
  RM_ASSERT_OK_AND_ASSIGN(view, scheduler_->GetQueue("default"));
  EXPECT_EQ(view.status.resources["cpu"].used_seconds, 20);
  scheduler_->RunPass();  // the gauges and counters follow the passes
  EXPECT_EQ(CounterValue(registry, "ringmaster_queue_resource_seconds_total", "default", "cpu"),
            20);
  for (int rank = 0; rank < 2; ++rank) Report("w1", job, rank, RankReport::Kind::kExited, 0);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_EQ(StoredState(id), JobState::kSucceeded);
  // Ended: stored with the end, and it no longer grows.
  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListQueueUsage());
  EXPECT_THAT(stored, ElementsAre(QueueUsage{"default", "cpu", 20'000}));
  Elapse(*scheduler_, clock_, {"w1"}, 60'000);
  scheduler_->RunPass();
  EXPECT_EQ(CounterValue(registry, "ringmaster_queue_resource_seconds_total", "default", "cpu"),
            20);
  // A new leader reads it back.
  scheduler_->Stop();
  scheduler_.reset();
  prometheus::Registry after;
  Start({}, &after);
  RM_ASSERT_OK_AND_ASSIGN(view, scheduler_->GetQueue("default"));
  EXPECT_EQ(view.status.resources["cpu"].used_seconds, 20);
  scheduler_->RunPass();
  EXPECT_EQ(CounterValue(after, "ringmaster_queue_resource_seconds_total", "default", "cpu"), 20);
  scheduler_.reset();  // before the registry it reports to
}

TEST_F(SchedulerTest, AnAttemptThatFailsOrRestartsIsChargedUntilItStopsRunning) {
  Register(CpuWorker("w1", 4));
  JobSpec spec = CommandSpec(1);
  spec.restart_policy = RestartPolicy::kOnFailure;
  spec.backoff_limit = 3;
  const std::string id = SubmitAndPlace(spec);
  RM_ASSERT_OK_AND_ASSIGN(Job job, scheduler_->GetJob(id));
  Report("w1", job, 0, RankReport::Kind::kStarted);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  Elapse(*scheduler_, clock_, {"w1"}, 4'000);
  Report("w1", job, 0, RankReport::Kind::kExited, 1);  // fails: back to PENDING
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  Elapse(*scheduler_, clock_, {"w1"}, 30'000);  // waiting is not charged
  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListQueueUsage());
  EXPECT_THAT(stored, ElementsAre(QueueUsage{"default", "cpu", 4'000}));
  RM_ASSERT_OK_AND_ASSIGN(QueueView view, scheduler_->GetQueue("default"));
  EXPECT_EQ(view.status.resources["cpu"].used_seconds, 4);
}

// A failed rank's message from its worker reaches the job's message, cut to whole characters
// (PostgreSQL refuses a statement with a cut one).
TEST_F(SchedulerTest, AFailedRanksMessageFromItsWorkerEndsTheJobsMessage) {
  Register(CpuWorker("w1", 4));
  JobSpec spec = CommandSpec(1);
  spec.restart_policy = RestartPolicy::kNever;
  const std::string id = SubmitAndPlace(spec);
  RM_ASSERT_OK_AND_ASSIGN(Job job, scheduler_->GetJob(id));
  Report("w1", job, 0, RankReport::Kind::kStarted);
  std::string message = "cannot run ./train: No such file or directory ";
  while (message.size() < 600) message += "\xe8\xae\xad";  // a 3-byte character, past 512
  scheduler_->ReportRank(
      "w1", {job.id, job.attempt, 0, RankReport::Kind::kExited, 127, 0, message, 0, 0, {}});
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(Job failed, scheduler_->GetJob(id));
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_THAT(failed.message,
              HasSubstr("rank 0 on w1 exited with code 127: cannot run ./train: No such file"));
  EXPECT_EQ(Utf8Prefix(failed.message, failed.message.size()), failed.message)
      << "a character was cut";
}

class PreemptionTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerOptions options;
    options.preemption_grace_ms = 30'000;
    Start(options);
    link_ = Register(CpuWorker("w1", 4));
    for (const char* name : {"team-a", "team-b"}) {
      Queue q;
      q.name = name;
      q.cohort = "lab";
      q.quotas[kCpuResource] = ResourceQuota{2, std::nullopt, std::nullopt};
      q.reclaim_within_cohort = ReclaimWithinCohort::kAny;
      RM_ASSERT_OK(scheduler_->CreateQueue(q).status());
    }
    a1_ = Run(InQueue(CommandSpec(2), "team-a"));
    a2_ = Run(InQueue(CommandSpec(2), "team-a"));  // borrows team-b's share
    RM_ASSERT_OK_AND_ASSIGN(CreateJobResult b,
                            scheduler_->Submit(InQueue(CommandSpec(2), "team-b"), ""));
    b1_ = b.job.id;
    scheduler_->RunPass();
    RM_ASSERT_OK(scheduler_->Flush(5'000));
  }

  // Submits, places and marks every rank started.
  std::string Run(const JobSpec& spec) {
    const std::string id = SubmitAndPlace(spec);
    auto job = scheduler_->GetJob(id);
    EXPECT_TRUE(job.ok());
    for (int rank = 0; rank < spec.replicas; ++rank) {
      Report("w1", *job, rank, RankReport::Kind::kStarted);
    }
    EXPECT_TRUE(scheduler_->Flush(5'000).ok());
    return id;
  }

  bool Assigned(const std::string& id) {
    for (const Job& j : link_->assignments()) {
      if (j.id == id) return true;
    }
    return false;
  }

  std::shared_ptr<RecordingLink> link_;
  std::string a1_, a2_, b1_;
};

TEST_F(PreemptionTest, TheBorrowerIsStoppedWithTheGraceAndItsSlotsWaitForItsRanks) {
  RM_ASSERT_OK_AND_ASSIGN(Job a2, memory_.GetJob(a2_));
  EXPECT_EQ(a2.state, JobState::kPending);
  EXPECT_EQ(a2.attempt, 1);
  EXPECT_EQ(a2.preemptions, 1);
  EXPECT_THAT(a2.message, HasSubstr("preempted by " + b1_));
  ASSERT_THAT(link_->stops(), SizeIs(1));
  EXPECT_EQ(link_->stops()[0], std::make_pair(a2_, 0));
  EXPECT_EQ(link_->graces()[0], 30'000);
  EXPECT_EQ(StoredState(a1_), JobState::kRunning);  // within team-a's nominal: untouched
  // The preempted ranks still hold their slots: team-b waits for them, nobody else takes them.
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_FALSE(Assigned(b1_));
  RM_ASSERT_OK_AND_ASSIGN(Job b, scheduler_->GetJob(b1_));
  EXPECT_EQ(b.state, JobState::kPending);
  // Both ranks of the old attempt exit: the slots are free, team-b starts on them.
  Job old = a2;
  old.attempt = 0;
  Report("w1", old, 0, RankReport::Kind::kExited, 143);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_FALSE(Assigned(b1_));
  Report("w1", old, 1, RankReport::Kind::kExited, 143);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_TRUE(Assigned(b1_));
  EXPECT_EQ(StoredState(b1_), JobState::kStarting);
  EXPECT_EQ(StoredState(a2_), JobState::kPending);  // it would borrow team-b's share again
}

TEST_F(PreemptionTest, ARestartDuringTheGraceKeepsTheStoppingRanksSlotsHeld) {
  // The scheduler dies while a2's ranks are still checkpointing; a new one starts.
  scheduler_.reset();
  SchedulerOptions options;
  options.preemption_grace_ms = 30'000;
  Start(options);
  // w1 comes back holding a1 (running) and a2's first attempt, told to stop and still exiting.
  link_ = std::make_shared<RecordingLink>();
  const std::vector<HeldRank> held = {
      {a1_, 0, 0, false, 0, false, {}},
      {a1_, 0, 1, false, 0, false, {}},
      {a2_, 0, 0, false, 0, true, {}},
      {a2_, 0, 1, false, 0, true, {}},
  };
  RM_ASSERT_OK(scheduler_->RegisterWorker(CpuWorker("w1", 4), held, link_));
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  // Team B waits: the slots are a2's until its ranks are gone, as before the restart.
  EXPECT_FALSE(Assigned(b1_));
  EXPECT_EQ(StoredState(b1_), JobState::kPending);
  Job old;
  old.id = a2_;
  old.attempt = 0;
  Report("w1", old, 0, RankReport::Kind::kExited, 143);
  Report("w1", old, 1, RankReport::Kind::kExited, 143);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_TRUE(Assigned(b1_));
  EXPECT_EQ(StoredState(a1_), JobState::kRunning);
}

TEST_F(PreemptionTest, RanksThatNeverReportGiveBackTheirSlotsAfterTheGrace) {
  for (int i = 0; i < 6; ++i) {  // 30 s, the worker's heartbeats going on
    clock_.Advance(5'000);
    scheduler_->Heartbeat("w1");
  }
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_FALSE(Assigned(b1_));
  clock_.Advance(5'001);
  scheduler_->Heartbeat("w1");
  scheduler_->RunPass();  // releases the slots
  scheduler_->RunPass();  // places team-b on them
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  EXPECT_TRUE(Assigned(b1_));
}

// An elastic job in the running service: it starts smaller, grows into GPUs idle for the delay
// and shrinks when another team reclaims, each resize a stop with the grace and a start at the
// new size that counts against nothing.
class ElasticServiceTest : public SchedulerTest {
 protected:
  static SchedulerOptions Options() {
    SchedulerOptions options;
    options.preemption_grace_ms = 30'000;
    options.elastic.idle_delay_ms = 60'000;
    options.elastic.restart_cost_ms = 0;
    return options;
  }
  static Worker GpuWorker() {
    Worker w = CpuWorker("w1", 4);
    for (int g = 0; g < 4; ++g) w.gpus.push_back(Gpu{g, "t4", 16LL << 30, false});
    return w;
  }

  void SetUp() override {
    Start(Options());
    link_ = Register(GpuWorker());
    for (const char* name : {"team-a", "team-b"}) {
      Queue q;
      q.name = name;
      q.cohort = "lab";
      q.quotas["t4"] = ResourceQuota{2, std::nullopt, std::nullopt};
      q.reclaim_within_cohort = ReclaimWithinCohort::kAny;
      RM_ASSERT_OK(scheduler_->CreateQueue(q).status());
    }
  }

  static JobSpec GpuSpec(const char* queue, int replicas) {
    JobSpec spec = InQueue(CommandSpec(replicas, 3600), queue);
    spec.gpus_per_replica = 1;
    spec.gpu_type = "t4";
    return spec;
  }

  // The job's newest assignment, once every rank of it reported started.
  Job Started(const std::string& id) {
    Job last;
    for (const Job& j : link_->assignments()) {
      if (j.id == id) last = j;
    }
    for (const RankPlacement& r : last.placement) {
      Report("w1", last, r.rank, RankReport::Kind::kStarted);
    }
    EXPECT_TRUE(scheduler_->Flush(5'000).ok());
    return last;
  }

  void Exited(const Job& attempt, int exit_code) {
    for (const RankPlacement& r : attempt.placement) {
      Report("w1", attempt, r.rank, RankReport::Kind::kExited, exit_code);
    }
    scheduler_->RunPass();
    ASSERT_TRUE(scheduler_->Flush(5'000).ok());
  }

  // Time passes with the worker's heartbeats and passes going on.
  void Wait(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 5'000) {
      clock_.Advance(5'000);
      scheduler_->Heartbeat("w1");
      scheduler_->RunPass();
    }
    ASSERT_TRUE(scheduler_->Flush(5'000).ok());
  }

  // Team B runs a job on 2 of the 4 GPUs (its id in *other); then team A's elastic job (2:4)
  // is submitted and placed. Returns the elastic job's id.
  std::string ElasticBesideAnother(std::string* other) {
    *other = SubmitAndPlace(GpuSpec("team-b", 2));
    Started(*other);
    JobSpec spec = GpuSpec("team-a", 4);
    spec.min_replicas = 2;
    spec.max_replicas = 4;
    return SubmitAndPlace(spec);
  }

  // A scheduler allowed one resize an hour (its options in *options): the elastic job of
  // ElasticBesideAnother (its id in *elastic) grows from 2 to 4 once the other job has ended,
  // which is its one resize. Returns its attempt running at 4.
  Job GrownToTheLimit(SchedulerOptions* options, std::string* elastic) {
    *options = Options();
    options->elastic.max_resizes_per_hour = 1;
    scheduler_.reset();
    Start(*options);
    link_ = Register(GpuWorker());
    std::string other;
    *elastic = ElasticBesideAnother(&other);
    Job first = Started(*elastic);
    auto other_job = scheduler_->GetJob(other);
    EXPECT_TRUE(other_job.ok()) << other_job.status();
    Exited(*other_job, 0);
    Wait(65'000);
    auto growing = memory_.GetJob(*elastic);
    EXPECT_TRUE(growing.ok()) << growing.status();
    EXPECT_EQ(growing->state, JobState::kPending);
    EXPECT_THAT(growing->message, ::testing::StartsWith("grown from 2 to 4"));
    Exited(first, 143);
    Job second = Started(*elastic);
    EXPECT_EQ(second.placement.size(), 4u);
    return second;
  }

  // Team B runs a job on 2 of the 4 GPUs until it ends; team A's elastic job asks for 2 and
  // may run at up to 4 (2:4, replicas 2, sizes_divide 4, OnFailure): it starts at 2 and, once
  // team B's GPUs stayed idle for the delay, grows to 4 beyond its replicas (nobody waits for
  // them). Returns its id, with its attempt at 2 (whose ranks are stopping) in *first.
  std::string GrowingBeyondItsReplicas(Job* first) {
    const std::string other = SubmitAndPlace(GpuSpec("team-b", 2));
    Started(other);
    JobSpec spec = GpuSpec("team-a", 2);
    spec.min_replicas = 2;
    spec.max_replicas = 4;
    spec.sizes_divide = 4;
    const std::string elastic = SubmitAndPlace(spec);
    *first = Started(elastic);
    EXPECT_EQ(first->placement.size(), 2u);
    auto other_job = scheduler_->GetJob(other);
    EXPECT_TRUE(other_job.ok()) << other_job.status();
    Exited(*other_job, 0);
    Wait(65'000);
    auto growing = memory_.GetJob(elastic);
    EXPECT_TRUE(growing.ok()) << growing.status();
    EXPECT_THAT(growing->message, ::testing::StartsWith("grown from 2 to 4"));
    EXPECT_EQ(growing->last_replicas, 4) << "stored with the resize";
    return elastic;
  }

  // A new scheduler (with `options`) starts, and the worker comes back to it holding `ranks`
  // of attempt `attempt` of `job_id` (`stopping`: told to stop before the restart).
  void RestartHolding(const SchedulerOptions& options, const std::string& job_id, int32_t attempt,
                      const std::vector<RankPlacement>& ranks, bool stopping) {
    scheduler_.reset();
    Start(options);
    link_ = std::make_shared<RecordingLink>();
    std::vector<HeldRank> held;
    for (const RankPlacement& r : ranks) {
      held.push_back({job_id, attempt, r.rank, false, 0, stopping, {}});
    }
    RM_ASSERT_OK(scheduler_->RegisterWorker(GpuWorker(), held, link_));
    scheduler_->RunPass();
    RM_ASSERT_OK(scheduler_->Flush(5'000));
  }

  std::shared_ptr<RecordingLink> link_;
};

TEST_F(ElasticServiceTest, StartsSmallerGrowsIntoIdleGpusAndShrinksWhenAnotherTeamReclaims) {
  std::string other;
  const std::string elastic = ElasticBesideAnother(&other);
  // Two of the four GPUs are taken: it starts at 2 rather than waiting for 4.
  Job first = Started(elastic);
  EXPECT_EQ(first.placement.size(), 2u);
  EXPECT_EQ(StoredState(elastic), JobState::kRunning);

  // The other job ends; its GPUs stay idle for the delay, and then the elastic job grows.
  RM_ASSERT_OK_AND_ASSIGN(Job other_job, scheduler_->GetJob(other));
  Exited(other_job, 0);
  Wait(55'000);
  RM_ASSERT_OK_AND_ASSIGN(Job before, memory_.GetJob(elastic));
  EXPECT_EQ(before.state, JobState::kRunning) << "grew before the GPUs were idle for 60 s";
  Wait(10'000);
  RM_ASSERT_OK_AND_ASSIGN(Job growing, memory_.GetJob(elastic));
  EXPECT_EQ(growing.state, JobState::kPending);
  EXPECT_EQ(growing.message, "grown from 2 to 4 replicas: 2 x t4 idle in cohort lab for 60 s");
  EXPECT_EQ(growing.preemptions, 1);  // not a failure: counts against no backoff_limit
  EXPECT_THAT(link_->stops(), ::testing::Contains(std::make_pair(elastic, 0)));
  EXPECT_EQ(link_->graces().back(), 30'000);
  // Its ranks checkpoint and exit; it starts again at 4 on the GPUs it held and the idle ones.
  Exited(first, 143);
  Job second = Started(elastic);
  EXPECT_EQ(second.attempt, 1);
  ASSERT_EQ(second.placement.size(), 4u);
  EXPECT_EQ(StoredState(elastic), JobState::kRunning);

  // Team B comes back for its nominal 2: the elastic job shrinks to 2 instead of stopping whole.
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult b, scheduler_->Submit(GpuSpec("team-b", 2), ""));
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(Job shrinking, memory_.GetJob(elastic));
  EXPECT_EQ(shrinking.state, JobState::kPending);
  EXPECT_EQ(shrinking.message, "shrunk from 4 to 2: queue team-b reclaims its nominal quota");
  EXPECT_EQ(StoredState(b.job.id), JobState::kPending);  // waits for the ranks to stop
  Exited(second, 143);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  Job third = Started(elastic);
  EXPECT_EQ(third.attempt, 2);
  EXPECT_EQ(third.placement.size(), 2u);
  Started(b.job.id);
  EXPECT_EQ(StoredState(b.job.id), JobState::kRunning);
  // The stored events say why each attempt ended, and it ends SUCCEEDED after two resizes.
  Exited(third, 0);
  RM_ASSERT_OK_AND_ASSIGN(Job done, memory_.GetJob(elastic));
  EXPECT_EQ(done.state, JobState::kSucceeded);
  EXPECT_EQ(done.preemptions, 2);
  // GetJob lists the resizes, from the stored events.
  RM_ASSERT_OK_AND_ASSIGN(Job read, scheduler_->GetJob(elastic));
  ASSERT_THAT(read.resizes, SizeIs(2));
  EXPECT_EQ(read.resizes[0].reason, growing.message);
  EXPECT_EQ(read.resizes[0].attempt, 1);
  EXPECT_EQ(read.resizes[1].reason, shrinking.message);
}

TEST_F(ElasticServiceTest, AResizeInTheMiddleOfASchedulerRestartLosesNothing) {
  std::string other;
  const std::string elastic = ElasticBesideAnother(&other);
  Job first = Started(elastic);
  RM_ASSERT_OK_AND_ASSIGN(Job other_job, scheduler_->GetJob(other));
  Exited(other_job, 0);
  Wait(65'000);
  ASSERT_EQ(StoredState(elastic), JobState::kPending);  // growing: its ranks are stopping

  // The scheduler dies before they exit; a new one starts and the worker comes back holding
  // them, told to stop.
  ASSERT_NO_FATAL_FAILURE(
      RestartHolding(Options(), elastic, 0, first.placement, /*stopping=*/true));
  EXPECT_TRUE(link_->assignments().empty()) << "placed on GPUs its old ranks still hold";
  // They exit: the job starts again, at 4 now that all four GPUs are free, once.
  Exited(first, 143);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(link_->assignments(), SizeIs(1));
  Job second = Started(elastic);
  EXPECT_EQ(second.attempt, 1);
  EXPECT_EQ(second.placement.size(), 4u);
  Exited(second, 0);
  EXPECT_EQ(StoredState(elastic), JobState::kSucceeded);
}

// A rank failure under OnFailure restarts an elastic job that had grown beyond its replicas at
// the size it had grown to (all four GPUs are free), not back at its replicas.
TEST_F(ElasticServiceTest, ARankFailureRestartsAGrownJobAtTheSizeItHadGrownTo) {
  Job first;
  const std::string elastic = GrowingBeyondItsReplicas(&first);
  Exited(first, 143);
  Job second = Started(elastic);
  ASSERT_EQ(second.placement.size(), 4u);
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(elastic));
  EXPECT_EQ(stored.last_replicas, 4);
  // A rank fails: OnFailure restarts it (a failure, not a resize), at 4 again.
  Report("w1", second, 3, RankReport::Kind::kExited, 1);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  Job third = Started(elastic);
  EXPECT_EQ(third.attempt, 2);
  EXPECT_EQ(third.placement.size(), 4u) << "back at its replicas, below the size it grew to";
  RM_ASSERT_OK_AND_ASSIGN(Job restarted, memory_.GetJob(elastic));
  EXPECT_EQ(restarted.state, JobState::kRunning);
  EXPECT_EQ(restarted.preemptions, 1) << "the growth only; the failure counts as one";
  EXPECT_THAT(restarted.message, ::testing::StartsWith("restarting (attempt 1 of at most 2"));
}

// A scheduler restart in the middle of a growth loses the growth's claim: the job is placed
// afresh once its old ranks exited, at the size the growth asked for (stored with the job), not
// back at its replicas.
TEST_F(ElasticServiceTest, ASchedulerRestartInTheMiddleOfAGrowthKeepsTheGrownSize) {
  Job first;
  const std::string elastic = GrowingBeyondItsReplicas(&first);
  ASSERT_NO_FATAL_FAILURE(
      RestartHolding(Options(), elastic, 0, first.placement, /*stopping=*/true));
  Exited(first, 143);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(link_->assignments(), SizeIs(1));
  Job second = Started(elastic);
  EXPECT_EQ(second.attempt, 1);
  EXPECT_EQ(second.placement.size(), 4u);
}

// Regression: a pass that looked only at newly pending jobs (an incremental one) was given no
// resize history, and shrank a job already at its limit.
TEST_F(ElasticServiceTest, AShrinkInAnIncrementalPassCountsAgainstTheResizeLimit) {
  SchedulerOptions options;
  std::string elastic;
  Job second = GrownToTheLimit(&options, &elastic);
  ASSERT_EQ(second.placement.size(), 4u);
  RM_ASSERT_OK(scheduler_->Submit(GpuSpec("team-b", 2), "").status());
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(Job reclaimed, memory_.GetJob(elastic));
  EXPECT_EQ(reclaimed.state, JobState::kPending);
  EXPECT_THAT(reclaimed.message, ::testing::Not(::testing::StartsWith("shrunk")));
}

// The limit on resizes per hour counts the resizes from before a restart: a restarted
// scheduler reads them from the stored events instead of starting with none.
TEST_F(ElasticServiceTest, TheResizeLimitHoldsAcrossASchedulerRestart) {
  SchedulerOptions options;
  std::string elastic;
  Job second = GrownToTheLimit(&options, &elastic);
  ASSERT_EQ(second.placement.size(), 4u);

  // The scheduler restarts; the worker comes back holding the job's four ranks.
  ASSERT_NO_FATAL_FAILURE(
      RestartHolding(options, elastic, 1, second.placement, /*stopping=*/false));
  ASSERT_EQ(StoredState(elastic), JobState::kRunning);

  // Team B reclaims its nominal 10 minutes after the growth: the job already resized once this
  // hour, so it is preempted whole rather than shrunk a second time.
  Wait(10 * 60'000);
  RM_ASSERT_OK(scheduler_->Submit(GpuSpec("team-b", 2), "").status());
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(Job reclaimed, memory_.GetJob(elastic));
  EXPECT_EQ(reclaimed.state, JobState::kPending);
  EXPECT_THAT(reclaimed.message, ::testing::Not(::testing::StartsWith("shrunk")))
      << "resized twice within the hour across the restart";
  EXPECT_EQ(reclaimed.preemptions, 2);
  RM_ASSERT_OK_AND_ASSIGN(Job read, scheduler_->GetJob(elastic));
  EXPECT_THAT(read.resizes, SizeIs(1));
}

// A queue may set its own idle delay: team-a's jobs wait 120 s of idle GPUs instead of the
// scheduler's 60 s; out of bounds, the queue is refused naming the field.
TEST_F(ElasticServiceTest, AQueuesOwnIdleDelayReplacesTheSchedulersForItsJobs) {
  RM_ASSERT_OK_AND_ASSIGN(QueueView a, scheduler_->GetQueue("team-a"));
  Queue bad = a.queue;
  bad.elastic_idle_delay_seconds = 0;
  auto refused = scheduler_->UpdateQueue(bad);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("elastic_idle_delay_seconds: must be 1..86400"));
  Queue patient = a.queue;
  patient.elastic_idle_delay_seconds = 120;
  RM_ASSERT_OK(scheduler_->UpdateQueue(patient).status());

  std::string other;
  const std::string elastic = ElasticBesideAnother(&other);
  Job first = Started(elastic);
  RM_ASSERT_OK_AND_ASSIGN(Job other_job, scheduler_->GetJob(other));
  Exited(other_job, 0);
  Wait(65'000);
  EXPECT_EQ(StoredState(elastic), JobState::kRunning) << "grew after the scheduler's 60 s";
  Wait(60'000);
  RM_ASSERT_OK_AND_ASSIGN(Job growing, memory_.GetJob(elastic));
  EXPECT_EQ(growing.state, JobState::kPending);
  EXPECT_EQ(growing.message, "grown from 2 to 4 replicas: 2 x t4 idle in cohort lab for 120 s");
}

TEST_F(SchedulerTest, SubmitsPastTheLiveJobBoundsAreRefusedAndNothingOfThemIsStored) {
  scheduler_.reset();
  SchedulerOptions options;
  options.max_live_jobs = 3;
  options.max_live_jobs_per_queue = 2;
  Start(options);
  RM_ASSERT_OK(scheduler_->CreateQueue(TeamQueue("vision")).status());
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult first, scheduler_->Submit(CommandSpec(1), ""));
  RM_ASSERT_OK(scheduler_->Submit(CommandSpec(1), "").status());
  auto per_queue = scheduler_->Submit(CommandSpec(1), "");
  EXPECT_THAT(per_queue, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(per_queue.status().message(), HasSubstr("queue 'default' holds 2 live jobs"));
  EXPECT_THAT(per_queue.status().message(), HasSubstr("--max-live-jobs-per-queue 2"));
  // Another queue has room of its own, up to the bound of all.
  RM_ASSERT_OK(scheduler_->Submit(InQueue(CommandSpec(1), "vision"), "").status());
  auto total = scheduler_->Submit(InQueue(CommandSpec(1), "vision"), "");
  EXPECT_THAT(total, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(total.status().message(), HasSubstr("holds 3 live jobs"));
  EXPECT_THAT(total.status().message(), HasSubstr("--max-live-jobs 3"));
  // An unknown queue is still named as such.
  EXPECT_THAT(scheduler_->Submit(InQueue(CommandSpec(1), "nope"), ""),
              StatusIs(absl::StatusCode::kNotFound));
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListActiveJobs());
  EXPECT_THAT(stored, SizeIs(3));
  // A job that ends makes room again.
  RM_ASSERT_OK(scheduler_->Cancel(first.job.id, "").status());
  RM_EXPECT_OK(scheduler_->Submit(CommandSpec(1), "").status());
}

// A spec may carry hundreds of KiB of argv and env: their bytes have a bound of their own.
TEST_F(SchedulerTest, SubmitsPastTheLiveSpecBytesAreRefusedUntilAJobEnds) {
  scheduler_.reset();
  SchedulerOptions options;
  options.max_live_spec_bytes = 10'000;
  Start(options);
  JobSpec big = CommandSpec(1);
  big.command->env["BIG"] = std::string(4096, 'v');
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult first, scheduler_->Submit(big, ""));
  RM_ASSERT_OK(scheduler_->Submit(big, "").status());
  auto refused = scheduler_->Submit(big, "");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(refused.status().message(), HasSubstr("--max-live-spec-mib"));
  // A small one still fits.
  RM_EXPECT_OK(scheduler_->Submit(CommandSpec(1), "").status());
  RM_ASSERT_OK(scheduler_->Cancel(first.job.id, "").status());
  RM_EXPECT_OK(scheduler_->Submit(big, "").status());
}

// Submits on their way to Postgres count too: a burst while commits hang cannot pass the
// bound before any of it is stored.
TEST_F(SchedulerTest, SubmitsInFlightCountAgainstTheLiveJobBound) {
  scheduler_.reset();
  SchedulerOptions options;
  options.max_live_jobs = 2;
  Start(options);
  store_.Hang(Call::kCommit);
  std::mutex mu;
  std::vector<absl::Status> answers;
  auto submit = [&] {
    scheduler_->SubmitAsync(CommandSpec(1), "", "vision", std::nullopt,
                            [&](absl::StatusOr<CreateJobResult> result) {
                              std::lock_guard<std::mutex> lock(mu);
                              answers.push_back(result.status());
                            });
  };
  submit();
  submit();
  submit();  // refused at once: two are in flight
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_THAT(answers, SizeIs(1));
    EXPECT_THAT(answers[0], StatusIs(absl::StatusCode::kResourceExhausted));
  }
  store_.Heal();
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return answers.size() == 3;
      },
      std::chrono::seconds(10)));
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListActiveJobs());
  EXPECT_THAT(stored, SizeIs(2));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(answers[1].ok()) << answers[1];
  EXPECT_TRUE(answers[2].ok()) << answers[2];
}

// --- Environments (core/environment.h) ---------------------------------------------------

Volume DatasetVolume() {
  Volume v;
  v.name = "imagenet";
  v.host_path = "/mnt/imagenet";
  v.grants = {{"vision", true}, {"audio", false}};
  return v;
}

JobSpec ImageSpec(int replicas) {
  JobSpec spec = CommandSpec(replicas);
  spec.image = "registry.example.com/vision/train:v1";
  spec.mounts = {{"imagenet", "/data", true}};
  return spec;
}

TEST_F(SchedulerTest, MountsNeedAGrantToTheSubmittersTeamAndAdminsMountAnyVolume) {
  RM_ASSERT_OK(scheduler_->CreateVolume(DatasetVolume()));
  JobSpec spec = ImageSpec(1);
  RM_EXPECT_OK(scheduler_->Submit(spec, "", "vision"));
  RM_EXPECT_OK(scheduler_->Submit(spec, "", "audio"));
  auto other = scheduler_->Submit(spec, "", "speech");
  EXPECT_THAT(other, StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("mounts[0].volume"));
  spec.mounts[0].read_only = false;
  auto rw = scheduler_->Submit(spec, "", "vision");
  EXPECT_THAT(rw, StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(std::string(rw.status().message()), HasSubstr("read-only"));
  RM_EXPECT_OK(scheduler_->Submit(spec, "", "audio"));
  RM_EXPECT_OK(scheduler_->Submit(spec, "", "ops", std::nullopt, /*admin=*/true));
  spec.mounts[0].volume = "secret";  // unknown: the same answer as not granted
  EXPECT_THAT(scheduler_->Submit(spec, "", "vision"), StatusIs(absl::StatusCode::kPermissionDenied));
  // A spec error is INVALID_ARGUMENT before any right is looked at.
  spec.image.clear();
  EXPECT_THAT(scheduler_->Submit(spec, "", "speech"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(SchedulerTest, AnAssignmentCarriesHostPathsAndTheDigestPinnedByTheFirstLaunch) {
  RM_ASSERT_OK(scheduler_->CreateVolume(DatasetVolume()));
  auto link = Register(CpuWorker("w1", 4));
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created,
                          scheduler_->Submit(ImageSpec(1), "", "vision"));
  const std::string id = created.job.id;
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(link->assignments(), SizeIs(1));
  Job first = link->assignments()[0];
  EXPECT_EQ(first.image_digest, "");  // the launcher resolves it
  ASSERT_THAT(link->mounts(), SizeIs(1));
  EXPECT_THAT(link->mounts()[0],
              ElementsAre(ResolvedMount{"imagenet", "/mnt/imagenet", "/data", true}));

  // The first report of the current attempt's launcher pins it; no event, no change of state.
  const std::string digest = "sha256:" + std::string(64, 'c');
  RankReport resolved;
  resolved.job_id = id;
  resolved.attempt = first.attempt;
  resolved.kind = RankReport::Kind::kImageResolved;
  resolved.image_digest = digest;
  scheduler_->ReportRank("w1", resolved);
  RankReport later = resolved;
  later.image_digest = "sha256:" + std::string(64, 'd');
  scheduler_->ReportRank("w1", later);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(id));
  EXPECT_EQ(stored.image_digest, digest);
  EXPECT_EQ(stored.state, JobState::kStarting);
  EXPECT_EQ(stored.last_event_seq, 2);
  RM_ASSERT_OK_AND_ASSIGN(Job shown, scheduler_->GetJob(id));
  EXPECT_EQ(shown.image_digest, digest);

  // The next attempt, after a failure, runs the same bytes; so does one after a restart of
  // the scheduler (the digest is loaded with the job).
  Report("w1", first, 0, RankReport::Kind::kExited, 1);
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(link->assignments(), SizeIs(2));
  EXPECT_EQ(link->assignments()[1].attempt, 1);
  EXPECT_EQ(link->assignments()[1].image_digest, digest);
  EXPECT_THAT(link->mounts()[1], SizeIs(1));

  scheduler_.reset();
  Start();
  RM_ASSERT_OK_AND_ASSIGN(Job reloaded, scheduler_->GetJob(id));
  EXPECT_EQ(reloaded.image_digest, digest);
}

TEST_F(SchedulerTest, AnImageReportOfAnotherAttemptOrWorkerPinsNothing) {
  auto link = Register(CpuWorker("w1", 4));
  Register(CpuWorker("w2", 4));
  JobSpec spec = CommandSpec(1);
  spec.image = "train:v1";
  const std::string id = SubmitAndPlace(spec);
  RM_ASSERT_OK_AND_ASSIGN(Job placed, scheduler_->GetJob(id));
  ASSERT_THAT(placed.placement, SizeIs(1));
  const std::string launcher = placed.placement[0].worker_id;
  const std::string other = launcher == "w1" ? "w2" : "w1";
  RankReport report;
  report.job_id = id;
  report.attempt = placed.attempt + 1;
  report.kind = RankReport::Kind::kImageResolved;
  report.image_digest = "sha256:" + std::string(64, 'e');
  scheduler_->ReportRank(launcher, report);  // an attempt that is not the current one
  report.attempt = placed.attempt;
  scheduler_->ReportRank(other, report);  // not its launcher
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(Job stored, memory_.GetJob(id));
  EXPECT_EQ(stored.image_digest, "");
  scheduler_->ReportRank(launcher, report);
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_ASSERT_OK_AND_ASSIGN(stored, memory_.GetJob(id));
  EXPECT_EQ(stored.image_digest, report.image_digest);
}

TEST_F(SchedulerTest, AVolumeMountedByALiveJobCannotBeDeletedUntilTheJobEnds) {
  RM_ASSERT_OK(scheduler_->CreateVolume(DatasetVolume()));
  RM_ASSERT_OK_AND_ASSIGN(CreateJobResult created,
                          scheduler_->Submit(ImageSpec(1), "", "vision"));
  absl::Status refused = scheduler_->DeleteVolume("imagenet");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(refused.message()), HasSubstr(created.job.id));
  RM_ASSERT_OK(scheduler_->Cancel(created.job.id, "done"));
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  RM_EXPECT_OK(scheduler_->DeleteVolume("imagenet"));
  EXPECT_THAT(scheduler_->GetVolume("imagenet", "", true),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(scheduler_->DeleteVolume("imagenet"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(SchedulerTest, VolumesAreShownToTheirTeamsAndAdminsOnly) {
  RM_ASSERT_OK_AND_ASSIGN(Volume created, scheduler_->CreateVolume(DatasetVolume()));
  EXPECT_EQ(created.grants[0].team, "audio");  // sorted
  EXPECT_GT(created.created_at_ms, 0);
  Volume scratch;
  scratch.name = "scratch";
  scratch.host_path = "/scratch";
  RM_ASSERT_OK(scheduler_->CreateVolume(scratch));
  EXPECT_THAT(scheduler_->CreateVolume(scratch), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(scheduler_->ListVolumes("", true), SizeIs(2));
  ASSERT_THAT(scheduler_->ListVolumes("vision", false), SizeIs(1));
  EXPECT_THAT(scheduler_->ListVolumes("speech", false), IsEmpty());
  RM_EXPECT_OK(scheduler_->GetVolume("imagenet", "vision", false));
  EXPECT_THAT(scheduler_->GetVolume("imagenet", "speech", false),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(scheduler_->GetVolume("Bad", "", true), StatusIs(absl::StatusCode::kInvalidArgument));
  scratch.host_path = "/etc";
  EXPECT_THAT(scheduler_->UpdateVolume(scratch), StatusIs(absl::StatusCode::kInvalidArgument));
  scratch.host_path = "/scratch2";
  scratch.grants = {{"speech", false}};
  RM_ASSERT_OK_AND_ASSIGN(Volume updated, scheduler_->UpdateVolume(scratch));
  EXPECT_EQ(updated.created_at_ms, created.created_at_ms);
  EXPECT_THAT(scheduler_->ListVolumes("speech", false), SizeIs(1));
  scratch.name = "nothing";
  EXPECT_THAT(scheduler_->UpdateVolume(scratch), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(SchedulerTest, AnAssignmentCarriesOnlyItsTeamsCredentialForItsImagesRegistry) {
  auto link = Register(CpuWorker("w1", 8));
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "Registry.Example.com", .username = "v", .secret = "vs"}));
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "ghcr.io", .username = "g", .secret = "gs"}));
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "audio", .registry = "ghcr.io", .username = "a", .secret = "as"}));
  JobSpec spec = CommandSpec(1);
  spec.image = "registry.example.com/vision/train:v1";
  RM_ASSERT_OK(scheduler_->Submit(spec, "", "vision"));
  RM_ASSERT_OK(scheduler_->Submit(spec, "", "audio"));  // audio has none for this registry
  spec.image = "ubuntu:24.04";
  RM_ASSERT_OK(scheduler_->Submit(spec, "", "vision"));  // nor vision for docker.io
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(link->assignments(), SizeIs(3));
  const std::vector<Job> assignments = link->assignments();
  const std::vector<std::optional<RegistryCredential>> auths = link->auths();
  ASSERT_THAT(auths, SizeIs(3));
  std::map<std::string, std::optional<RegistryCredential>> by_team_image;
  for (size_t i = 0; i < 3; ++i) {
    by_team_image[assignments[i].team + " " + assignments[i].spec.image] = auths[i];
  }
  const auto& vision = by_team_image["vision registry.example.com/vision/train:v1"];
  ASSERT_TRUE(vision.has_value());
  EXPECT_EQ(vision->registry, "registry.example.com");
  EXPECT_EQ(vision->username, "v");
  EXPECT_EQ(vision->secret, "vs");
  EXPECT_EQ(by_team_image["audio registry.example.com/vision/train:v1"], std::nullopt);
  EXPECT_EQ(by_team_image["vision ubuntu:24.04"], std::nullopt);
}

TEST_F(SchedulerTest, RegistryCredentialsAreListedWithoutSecretsAndSurviveARestart) {
  RM_ASSERT_OK_AND_ASSIGN(
      RegistryCredentialView set,
      scheduler_->SetRegistryCredential(
          {.team = "vision", .registry = "ghcr.io", .username = "v", .secret = "first"}));
  EXPECT_EQ(set.registry, "ghcr.io");
  EXPECT_GT(set.updated_at_ms, 0);
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "ghcr.io", .username = "v2", .secret = "second"}));
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "audio", .registry = "quay.io", .username = "a", .secret = "as"}));
  RM_ASSERT_OK_AND_ASSIGN(auto vision, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(vision, SizeIs(1));
  EXPECT_EQ(vision[0].username, "v2");
  RM_ASSERT_OK_AND_ASSIGN(auto all, scheduler_->ListRegistryCredentials("*"));
  EXPECT_THAT(all, SizeIs(2));
  EXPECT_THAT(scheduler_->ListRegistryCredentials("Bad"),
              StatusIs(absl::StatusCode::kInvalidArgument));

  scheduler_.reset();
  Start();
  RM_ASSERT_OK_AND_ASSIGN(auto reloaded, scheduler_->ListRegistryCredentials("*"));
  EXPECT_EQ(reloaded, all);
  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListRegistryCredentials());
  ASSERT_THAT(stored, SizeIs(2));
  // (vision, ghcr.io) after (audio, quay.io)
  EXPECT_THAT(TestSecrets('k')->Open(stored[1].sealed_secret, SealingContext("vision", "ghcr.io")),
              test::IsOkAndHolds(std::string("second")));

  EXPECT_THAT(scheduler_->DeleteRegistryCredential("vision", "quay.io"),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(scheduler_->DeleteRegistryCredential("vision", "https://ghcr.io"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  RM_EXPECT_OK(scheduler_->DeleteRegistryCredential("vision", "GHCR.io"));
  RM_ASSERT_OK_AND_ASSIGN(vision, scheduler_->ListRegistryCredentials("vision"));
  EXPECT_THAT(vision, IsEmpty());
}

TEST_F(SchedulerTest, ATeamHasCredentialsForAtMostSixteenRegistries) {
  for (size_t i = 0; i < kMaxRegistryCredentialsPerTeam; ++i) {
    RM_ASSERT_OK(scheduler_->SetRegistryCredential({.team = "vision",
                                                    .registry = absl::StrCat("r", i, ".io"),
                                                    .username = "u",
                                                    .secret = "s"}));
  }
  auto refused = scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "one-more.io", .username = "u", .secret = "s"});
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition));
  // Replacing one is not a new one; another team has its own count.
  RM_EXPECT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "r0.io", .username = "u", .secret = "t"}));
  RM_EXPECT_OK(scheduler_->SetRegistryCredential(
      {.team = "audio", .registry = "one-more.io", .username = "u", .secret = "s"}));
}

// --- Registry secrets at rest (docs/environments.md, "Private registries") ---------------

TEST_F(SchedulerTest, RegistrySecretsAreStoredSealedForTheirTeamAndRegistryOnly) {
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "ghcr.io", .username = "v", .secret = "hunter2-vision"}));
  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListRegistryCredentials());
  ASSERT_THAT(stored, SizeIs(1));
  EXPECT_EQ(stored[0].username, "v");
  EXPECT_EQ(stored[0].plaintext_secret, "");
  EXPECT_THAT(stored[0].sealed_secret, Not(HasSubstr("hunter2")));
  EXPECT_THAT(TestSecrets('k')->Open(stored[0].sealed_secret, SealingContext("vision", "ghcr.io")),
              test::IsOkAndHolds(std::string("hunter2-vision")));
  // Moved to another team's or registry's row, it does not open.
  EXPECT_THAT(TestSecrets('k')->Open(stored[0].sealed_secret, SealingContext("audio", "ghcr.io")),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(TestSecrets('k')->Open(stored[0].sealed_secret, SealingContext("vision", "quay.io")),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST_F(SchedulerTest, PlaintextRegistrySecretsOfAnOlderSchemaAreSealedAtStartAndStillSent) {
  scheduler_.reset();
  // As a scheduler before migration 15 left it.
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, memory_.TakeLeadership());
  RM_ASSERT_OK(memory_.SetRegistryCredential({.team = "vision",
                                              .registry = "ghcr.io",
                                              .username = "v",
                                              .plaintext_secret = "old-plain",
                                              .updated_at_ms = 7},
                                             epoch));
  Start();
  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListRegistryCredentials());
  ASSERT_THAT(stored, SizeIs(1));
  EXPECT_EQ(stored[0].plaintext_secret, "");
  EXPECT_EQ(stored[0].updated_at_ms, 7);
  EXPECT_THAT(TestSecrets('k')->Open(stored[0].sealed_secret, SealingContext("vision", "ghcr.io")),
              test::IsOkAndHolds(std::string("old-plain")));
  RM_ASSERT_OK_AND_ASSIGN(auto listed, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_EQ(listed[0].problem, "");

  auto link = Register(CpuWorker("w1", 8));
  JobSpec spec = CommandSpec(1);
  spec.image = "ghcr.io/vision/train:v1";
  RM_ASSERT_OK(scheduler_->Submit(spec, "", "vision"));
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(link->auths(), SizeIs(1));
  ASSERT_TRUE(link->auths()[0].has_value());
  EXPECT_EQ(link->auths()[0]->secret, "old-plain");
}

TEST_F(SchedulerTest,
       ARegistrySecretSealedWithAnotherKeyIsListedWithItsProblemAndOnlyTheProblemIsSent) {
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "ghcr.io", .username = "v", .secret = "hunter2"}));
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "audio", .registry = "ghcr.io", .username = "a", .secret = "as"}));
  scheduler_.reset();
  SchedulerOptions options;
  options.secrets = TestSecrets('o');  // a key file replaced by another
  Start(options);

  RM_ASSERT_OK_AND_ASSIGN(auto listed, scheduler_->ListRegistryCredentials("*"));
  ASSERT_THAT(listed, SizeIs(2));
  EXPECT_EQ(listed[0].team, "audio");
  EXPECT_EQ(listed[1].team, "vision");
  EXPECT_EQ(listed[1].username, "v");
  EXPECT_THAT(listed[1].problem, HasSubstr("sealed with another secrets key"));
  EXPECT_THAT(listed[1].problem, HasSubstr("--secrets-key-file"));
  EXPECT_THAT(listed[1].problem, Not(HasSubstr("hunter2")));

  auto link = Register(CpuWorker("w1", 8));
  JobSpec spec = CommandSpec(1);
  spec.image = "ghcr.io/vision/train:v1";
  RM_ASSERT_OK(scheduler_->Submit(spec, "", "vision"));
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  // The worker hears why its pull has no credential, and no secret.
  ASSERT_THAT(link->auths(), SizeIs(1));
  ASSERT_TRUE(link->auths()[0].has_value());
  EXPECT_EQ(link->auths()[0]->registry, "ghcr.io");
  EXPECT_EQ(link->auths()[0]->username, "v");
  EXPECT_EQ(link->auths()[0]->secret, "");
  EXPECT_EQ(link->auths()[0]->problem, listed[1].problem);

  // It still counts, can be deleted, and setting it again under this key mends it.
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "ghcr.io", .username = "v", .secret = "again"}));
  RM_ASSERT_OK_AND_ASSIGN(listed, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_EQ(listed[0].problem, "");
  RM_ASSERT_OK(scheduler_->Submit(spec, "", "vision"));
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(link->auths(), SizeIs(2));
  ASSERT_TRUE(link->auths()[1].has_value());
  EXPECT_EQ(link->auths()[1]->secret, "again");
  EXPECT_EQ(link->auths()[1]->problem, "");
  RM_EXPECT_OK(scheduler_->DeleteRegistryCredential("audio", "ghcr.io"));
  RM_ASSERT_OK_AND_ASSIGN(listed, scheduler_->ListRegistryCredentials("audio"));
  EXPECT_THAT(listed, IsEmpty());
}

TEST_F(SchedulerTest, ARestartWithANewKeyAndThePreviousOneResealsInPlaceAndStillSends) {
  RM_ASSERT_OK_AND_ASSIGN(
      RegistryCredentialView set,
      scheduler_->SetRegistryCredential(
          {.team = "vision", .registry = "ghcr.io", .username = "v", .secret = "hunter2"}));
  scheduler_.reset();
  clock_.Advance(60'000);
  RestartWithKeys('n', 'k');

  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListRegistryCredentials());
  ASSERT_THAT(stored, SizeIs(1));
  EXPECT_EQ(SealedKeyId(stored[0].sealed_secret), TestSecrets('n')->key_id());
  EXPECT_EQ(stored[0].updated_at_ms, set.updated_at_ms);  // the credential did not change
  EXPECT_THAT(TestSecrets('n')->Open(stored[0].sealed_secret, SealingContext("vision", "ghcr.io")),
              test::IsOkAndHolds(std::string("hunter2")));
  RM_ASSERT_OK_AND_ASSIGN(auto listed, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_EQ(listed[0].problem, "");
  EXPECT_EQ(listed[0].updated_at_ms, set.updated_at_ms);

  auto link = Register(CpuWorker("w1", 8));
  JobSpec spec = CommandSpec(1);
  spec.image = "ghcr.io/vision/train:v1";
  RM_ASSERT_OK(scheduler_->Submit(spec, "", "vision"));
  scheduler_->RunPass();
  RM_ASSERT_OK(scheduler_->Flush(5'000));
  ASSERT_THAT(link->auths(), SizeIs(1));
  ASSERT_TRUE(link->auths()[0].has_value());
  EXPECT_EQ(link->auths()[0]->secret, "hunter2");

  // The new key alone reads it now; the old key alone no longer does.
  RestartWithKeys('n');
  RM_ASSERT_OK_AND_ASSIGN(listed, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_EQ(listed[0].problem, "");
  scheduler_.reset();
  Start();
  RM_ASSERT_OK_AND_ASSIGN(listed, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_THAT(listed[0].problem, HasSubstr("sealed with another secrets key"));
  // It wrote nothing: the row is still the new key's.
  RM_ASSERT_OK_AND_ASSIGN(auto after, memory_.ListRegistryCredentials());
  EXPECT_EQ(after, stored);
}

TEST_F(SchedulerTest, ASecretOfNeitherKeyIsLeftAsItIsAndListedNamingBothKeys) {
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "ghcr.io", .username = "v", .secret = "hunter2"}));
  RM_ASSERT_OK_AND_ASSIGN(auto before, memory_.ListRegistryCredentials());
  RestartWithKeys('n', 'o');
  RM_ASSERT_OK_AND_ASSIGN(auto listed, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_THAT(listed[0].problem, HasSubstr("sealed with another secrets key"));
  EXPECT_THAT(listed[0].problem, HasSubstr(TestSecrets('k')->key_id()));
  EXPECT_THAT(listed[0].problem, HasSubstr(TestSecrets('n')->key_id()));
  EXPECT_THAT(listed[0].problem, HasSubstr(TestSecrets('o')->key_id()));
  EXPECT_THAT(listed[0].problem, Not(HasSubstr("hunter2")));
  RM_ASSERT_OK_AND_ASSIGN(auto after, memory_.ListRegistryCredentials());
  EXPECT_EQ(after, before);
}

TEST_F(SchedulerTest, APreviousKeysValueThatIsAlteredIsListedAndNotResealed) {
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "ghcr.io", .username = "v", .secret = "hunter2"}));
  scheduler_.reset();
  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListRegistryCredentials());
  ASSERT_THAT(stored, SizeIs(1));
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, memory_.TakeLeadership());
  stored[0].sealed_secret[kSealedHeaderBytes] ^= 0x20;
  RM_ASSERT_OK(memory_.SetRegistryCredential(stored[0], epoch));
  RestartWithKeys('n', 'k');
  RM_ASSERT_OK_AND_ASSIGN(auto listed, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_THAT(listed[0].problem, HasSubstr("does not authenticate"));
  RM_ASSERT_OK_AND_ASSIGN(auto after, memory_.ListRegistryCredentials());
  EXPECT_EQ(after, stored);
}

TEST_F(SchedulerTest, AnAlteredStoredRegistrySecretIsListedAsNotAuthenticating) {
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "ghcr.io", .username = "v", .secret = "hunter2"}));
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "quay.io", .username = "q", .secret = "quay-secret"}));
  scheduler_.reset();
  RM_ASSERT_OK_AND_ASSIGN(auto stored, memory_.ListRegistryCredentials());
  ASSERT_THAT(stored, SizeIs(2));
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, memory_.TakeLeadership());
  // One ciphertext byte flipped; the other row's sealed value copied over a third registry's.
  StoredRegistryCredential altered = stored[0];
  altered.sealed_secret[kSealedHeaderBytes] ^= 0x20;
  RM_ASSERT_OK(memory_.SetRegistryCredential(altered, epoch));
  StoredRegistryCredential moved = stored[1];
  moved.registry = "docker.io";
  RM_ASSERT_OK(memory_.SetRegistryCredential(moved, epoch));
  Start();
  RM_ASSERT_OK_AND_ASSIGN(auto listed, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(listed, SizeIs(3));
  EXPECT_EQ(listed[0].registry, "docker.io");
  EXPECT_THAT(listed[0].problem, HasSubstr("does not authenticate"));
  EXPECT_EQ(listed[1].registry, "ghcr.io");
  EXPECT_THAT(listed[1].problem, HasSubstr("does not authenticate"));
  EXPECT_EQ(listed[2].registry, "quay.io");
  EXPECT_EQ(listed[2].problem, "");
}

TEST_F(SchedulerTest, WithoutASecretsKeyNoRegistrySecretIsSetAndNoneIsRead) {
  RM_ASSERT_OK(scheduler_->SetRegistryCredential(
      {.team = "vision", .registry = "ghcr.io", .username = "v", .secret = "hunter2"}));
  scheduler_.reset();
  SchedulerOptions options;
  options.heartbeat_timeout_ms = kHeartbeatTimeoutMs;
  scheduler_ = std::make_unique<Scheduler>(&store_, &queue_, &liveness_, &clock_, options, nullptr);
  RM_ASSERT_OK(scheduler_->Start());
  EXPECT_THAT(scheduler_->SetRegistryCredential(
                  {.team = "vision", .registry = "quay.io", .username = "v", .secret = "s"}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  RM_ASSERT_OK_AND_ASSIGN(auto listed, scheduler_->ListRegistryCredentials("vision"));
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_THAT(listed[0].problem, HasSubstr("no secrets key"));
}

}  // namespace
}  // namespace ringmaster::scheduler
