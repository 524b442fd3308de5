// The scheduler as a real process on real PostgreSQL and Redis, driven through gRPC.
#include <pqxx/pqxx>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/queue.grpc.pb.h"
#include "common/bearer_token.h"
#include "common/tls.h"
#include "scheduler/harness.h"
#include "support/postgres_server.h"
#include "support/test_certs.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class SchedulerTest : public ::testing::Test {
 protected:
  // Tests that restart the scheduler give workers longer to come back.
  virtual int HeartbeatTimeoutMs() const { return 1500; }
  virtual std::vector<std::string> ExtraFlags() const { return {}; }

  void SetUp() override {
    auto db = TestDatabase::Create();
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    auto redis = RedisServer::StartNew();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    auto scheduler =
        SchedulerProcess::Start(db_->url(), redis_->addr(), HeartbeatTimeoutMs(), ExtraFlags());
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = *std::move(scheduler);
  }
  void TearDown() override {
    if (HasFailure() && scheduler_) std::cerr << "scheduler log:\n" << scheduler_->LogTail() << "\n";
    workers_.clear();
    scheduler_.reset();
  }

  TestWorker& AddWorker(v1::RegisterWorker registration) {
    workers_.push_back(std::make_unique<TestWorker>(scheduler_->WorkerChannel(registration.worker_id()), registration));
    EXPECT_TRUE(workers_.back()->Connect()) << "worker " << registration.worker_id();
    return *workers_.back();
  }

  grpc::Status Submit(const v1::JobSpec& spec, v1::SubmitJobResponse* resp,
                      const std::string& request_id = "") {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    req.set_request_id(request_id);
    return scheduler_->jobs().SubmitJob(&ctx, req, resp);
  }

  std::string SubmitOk(const v1::JobSpec& spec) {
    v1::SubmitJobResponse resp;
    grpc::Status s = Submit(spec, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.job().id();
  }

  grpc::Status Get(const std::string& id, v1::Job* job) {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id(id);
    return scheduler_->jobs().GetJob(&ctx, req, job);
  }

  grpc::Status Cancel(const std::string& id, v1::CancelJobResponse* resp) {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_job_id(id);
    req.set_reason("test");
    return scheduler_->jobs().CancelJob(&ctx, req, resp);
  }

  std::vector<v1::Job> List(v1::JobState state = v1::JOB_STATE_UNSPECIFIED,
                            const std::string& queue = "") {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    req.set_state(state);
    req.set_queue(queue);
    v1::ListJobsResponse resp;
    EXPECT_TRUE(scheduler_->jobs().ListJobs(&ctx, req, &resp).ok());
    return {resp.jobs().begin(), resp.jobs().end()};
  }

  int64_t CountRows(const std::string& table) {
    pqxx::connection conn(db_->url());
    pqxx::work tx(conn);
    return tx.exec1("SELECT count(*) FROM " + table)[0].as<int64_t>();
  }

  // Reports every rank of `a` placed on `w` as started.
  static void StartRanks(TestWorker& w, const v1::Assignment& a) {
    for (const auto& r : a.placement()) {
      if (r.worker_id() == w.id()) w.ReportStarted(a.job_id(), a.attempt(), r.rank());
    }
  }
  static void ExitRanks(TestWorker& w, const v1::Assignment& a, int code) {
    for (const auto& r : a.placement()) {
      if (r.worker_id() == w.id()) w.ReportExited(a.job_id(), a.attempt(), r.rank(), code);
    }
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<SchedulerProcess> scheduler_;
  std::vector<std::unique_ptr<TestWorker>> workers_;
};

TEST_F(SchedulerTest, SubmitGetListAndCancel) {
  {
    grpc::ClientContext ctx;
    v1::CreateQueueRequest req;
    req.mutable_queue()->set_name("vision");
    v1::QueueWithStatus resp;
    auto queues = v1::QueueService::NewStub(scheduler_->channel());
    ASSERT_TRUE(queues->CreateQueue(&ctx, req, &resp).ok());
  }
  v1::JobSpec spec = TrainerSpec("resnet", 2);
  spec.set_queue("vision");
  std::string id = SubmitOk(spec);
  ASSERT_THAT(id, ::testing::StartsWith("j-"));

  v1::Job job = WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_PENDING);
  EXPECT_EQ(job.state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(job.spec().queue(), "vision");
  EXPECT_EQ(job.spec().trainer().model(), "mlp");  // default filled in
  EXPECT_TRUE(WaitFor(
      [&] {
        v1::Job j;
        return Get(id, &j).ok() && !j.pending_reason().empty();
      },
      5s));
  ASSERT_TRUE(Get(id, &job).ok());
  EXPECT_EQ(job.pending_reason(), "unschedulable: needs 2 CPU slots, the cluster has 0");

  EXPECT_EQ(List(v1::JOB_STATE_PENDING, "vision").size(), 1u);
  EXPECT_EQ(List(v1::JOB_STATE_PENDING, "other").size(), 0u);
  EXPECT_EQ(List(v1::JOB_STATE_RUNNING).size(), 0u);
  for (const auto& [limit, page_size, field] :
       {std::tuple{-1, 0, "limit: must not be negative"}, {5, -1, "page_size: must not"}}) {
    // An error names the field that was sent, the deprecated one included.
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    req.set_limit(limit);
    req.set_page_size(page_size);
    v1::ListJobsResponse resp;
    grpc::Status s = scheduler_->jobs().ListJobs(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_THAT(s.error_message(), HasSubstr(field));
  }

  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(Cancel(id, &cancelled).ok());
  EXPECT_EQ(cancelled.job().state(), v1::JOB_STATE_CANCELLED);
  grpc::Status again = Cancel(id, &cancelled);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(again.error_message(), HasSubstr("already ended (CANCELLED)"));

  v1::Job missing;
  EXPECT_EQ(Get("j-0000deadbeef", &missing).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Get("../etc", &missing).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(SchedulerTest, EveryKindOfBadSpecIsRejectedAndNothingIsStored) {
  struct Case {
    std::string field;
    std::function<void(v1::JobSpec&)> mutate;
  };
  std::vector<Case> cases = {
      {"name", [](v1::JobSpec& s) { s.set_name("Bad Name"); }},
      {"queue", [](v1::JobSpec& s) { s.set_queue("-q"); }},
      {"priority", [](v1::JobSpec& s) { s.set_priority(5000); }},
      {"replicas", [](v1::JobSpec& s) { s.set_replicas(0); }},
      {"replicas", [](v1::JobSpec& s) { s.set_replicas(5000); }},
      {"gpus_per_replica", [](v1::JobSpec& s) { s.set_gpus_per_replica(-1); }},
      {"gpu_type", [](v1::JobSpec& s) { s.set_gpu_type("t4"); }},
      {"workload", [](v1::JobSpec& s) { s.clear_trainer(); }},
      {"trainer.model", [](v1::JobSpec& s) { s.mutable_trainer()->set_model("gpt"); }},
      {"trainer.steps", [](v1::JobSpec& s) { s.mutable_trainer()->set_steps(-3); }},
      {"command.argv", [](v1::JobSpec& s) { s.mutable_command(); }},
      {"command.env.RANK",
       [](v1::JobSpec& s) {
         s.mutable_command()->add_argv("true");
         (*s.mutable_command()->mutable_env())["RANK"] = "3";
       }},
      {"restart_policy",
       [](v1::JobSpec& s) { s.set_restart_policy(static_cast<v1::RestartPolicy>(9)); }},
      {"backoff_limit", [](v1::JobSpec& s) { s.set_backoff_limit(-1); }},
      {"max_runtime_seconds", [](v1::JobSpec& s) { s.set_max_runtime_seconds(-1); }},
      {"labels", [](v1::JobSpec& s) { (*s.mutable_labels())["a b"] = "x"; }},
      {"labels.k", [](v1::JobSpec& s) { (*s.mutable_labels())["k"] = std::string(300, 'v'); }},
  };
  for (const Case& c : cases) {
    v1::JobSpec spec = TrainerSpec("ok", 1);
    c.mutate(spec);
    v1::SubmitJobResponse resp;
    grpc::Status s = Submit(spec, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_TRUE(absl::StartsWith(s.error_message(), c.field + ":"))
        << c.field << " -> " << s.error_message();
  }
  v1::SubmitJobResponse resp;
  grpc::Status bad_id = Submit(TrainerSpec("ok", 1), &resp, "spaces are not allowed");
  EXPECT_EQ(bad_id.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_id.error_message(), HasSubstr("request_id"));
  grpc::ClientContext ctx;
  v1::SubmitJobRequest no_spec;
  EXPECT_EQ(scheduler_->jobs().SubmitJob(&ctx, no_spec, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  EXPECT_EQ(CountRows("jobs"), 0);
  EXPECT_EQ(CountRows("job_events"), 0);
  EXPECT_TRUE(List().empty());
}

TEST_F(SchedulerTest, SameRequestIdUnderConcurrentRetriesMakesOneJob) {
  const v1::JobSpec spec = TrainerSpec("dedup", 1);
  std::vector<std::string> ids(16);
  std::vector<bool> existing(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      v1::SubmitJobResponse resp;
      grpc::Status s = Submit(spec, &resp, "req-42");
      EXPECT_TRUE(s.ok()) << s.error_message();
      ids[i] = resp.job().id();
      existing[i] = resp.existing();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& id : ids) EXPECT_EQ(id, ids[0]);
  EXPECT_EQ(std::count(existing.begin(), existing.end(), false), 1);
  EXPECT_EQ(List().size(), 1u);
  EXPECT_EQ(CountRows("jobs"), 1);

  v1::SubmitJobResponse resp;
  grpc::Status other = Submit(TrainerSpec("different", 1), &resp, "req-42");
  EXPECT_EQ(other.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(other.error_message(), HasSubstr(ids[0]));
}

TEST_F(SchedulerTest, WatchStreamsEveryEventUntilTheJobEnds) {
  TestWorker& w = AddWorker(CpuWorker("w1", "127.0.0.2", 2));
  std::string id = SubmitOk(TrainerSpec("watched", 2));

  std::vector<v1::JobEvent> events;
  std::thread watcher([&] {
    grpc::ClientContext ctx;
    v1::WatchJobRequest req;
    req.set_job_id(id);
    auto reader = scheduler_->jobs().WatchJob(&ctx, req);
    v1::JobEvent e;
    while (reader->Read(&e)) events.push_back(e);
    EXPECT_TRUE(reader->Finish().ok());
  });
  auto a = w.WaitAssignment(id, 10s);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->placement_size(), 2);
  EXPECT_EQ(a->token().size(), 64u);
  StartRanks(w, *a);
  EXPECT_EQ(WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_RUNNING).state(),
            v1::JOB_STATE_RUNNING);
  ExitRanks(w, *a, 0);
  watcher.join();  // the stream ends by itself after the terminal event

  std::vector<v1::JobState> states;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].seq(), static_cast<int64_t>(i + 1));
    states.push_back(events[i].state());
  }
  EXPECT_THAT(states, ::testing::ElementsAre(v1::JOB_STATE_PENDING, v1::JOB_STATE_STARTING,
                                             v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED));
  // The stop that follows every release lets the worker forget the job.
  EXPECT_TRUE(w.WaitStop(id, 5s).ok());

  grpc::ClientContext ctx;
  v1::WatchJobRequest req;
  req.set_job_id("j-00000000beef");
  auto reader = scheduler_->jobs().WatchJob(&ctx, req);
  v1::JobEvent e;
  EXPECT_FALSE(reader->Read(&e));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// A watch on gRPC's callback API holds no thread while it waits: 200 idle watches of a pending
// job cost the scheduler a few threads, not one each, and every one of them gets the job's end
// and closes.
TEST_F(SchedulerTest, IdleWatchesHoldNoThreadAndEveryOneGetsTheJobsEnd) {
  const std::string id = SubmitOk(TrainerSpec("watched-by-many", 1));  // no worker: pending
  const pid_t pid = scheduler_->process().pid();
  const int64_t before = ProcStatusNumber(pid, "Threads:");
  const int64_t rss_before = ProcStatusNumber(pid, "VmRSS:");
  constexpr int kWatches = 200;
  std::atomic<int> waiting{0};
  std::vector<std::vector<v1::JobState>> seen(kWatches);
  std::vector<grpc::Status> ends(kWatches);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWatches; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 30s);
      v1::WatchJobRequest req;
      req.set_job_id(id);
      auto reader = scheduler_->jobs().WatchJob(&ctx, req);
      v1::JobEvent e;
      while (reader->Read(&e)) {
        if (seen[i].empty()) ++waiting;
        seen[i].push_back(e.state());
      }
      ends[i] = reader->Finish();
    });
  }
  EXPECT_TRUE(WaitFor([&] { return waiting == kWatches; }, 20s, 10ms));
  const int64_t during = ProcStatusNumber(pid, "Threads:");
  std::cerr << waiting << " idle watches: scheduler threads " << before << " before, " << during
            << " while they wait; resident memory " << rss_before << " kB before, "
            << ProcStatusNumber(pid, "VmRSS:") << " kB while they wait\n";
  EXPECT_LT(during - before, 20);
  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(Cancel(id, &cancelled).ok());
  for (auto& t : threads) t.join();
  for (int i = 0; i < kWatches; ++i) {
    EXPECT_TRUE(ends[i].ok()) << ends[i].error_message();
    EXPECT_THAT(seen[i], ::testing::ElementsAre(v1::JOB_STATE_PENDING, v1::JOB_STATE_CANCELLED));
  }
}

// A cancel holds no thread while its write waits for Postgres (callback API): 100 cancels
// queued behind a locked jobs table leave the scheduler's threads as they were, and every one
// is answered once the table is free.
TEST_F(SchedulerTest, CancelsWaitingForTheirWriteHoldNoThread) {
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(SubmitOk(TrainerSpec(absl::StrCat("c-", i), 1)));
  const pid_t pid = scheduler_->process().pid();
  const int64_t before = ProcStatusNumber(pid, "Threads:");
  pqxx::connection conn(db_->url());
  pqxx::work lock(conn);
  lock.exec("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE");
  std::vector<grpc::Status> answers(ids.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] {
      v1::CancelJobResponse resp;
      answers[i] = Cancel(ids[i], &resp);
    });
  }
  auto waiting_writes = [&] {
    pqxx::connection c(db_->url());
    pqxx::nontransaction tx(c);
    return tx.exec1("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")[0]
        .as<int64_t>();
  };
  EXPECT_TRUE(WaitFor([&] { return waiting_writes() >= 1; }, 5s, 10ms));
  std::this_thread::sleep_for(500ms);  // for the rest of the cancels to arrive
  const int64_t during = ProcStatusNumber(pid, "Threads:");
  lock.abort();
  for (auto& t : threads) t.join();
  std::cerr << ids.size() << " cancels waiting for their write: scheduler threads " << before
            << " before, " << during << " while they wait\n";
  EXPECT_LT(during - before, 20);
  for (const grpc::Status& s : answers) EXPECT_TRUE(s.ok()) << s.error_message();
  for (const std::string& id : ids) {
    v1::Job job;
    ASSERT_TRUE(Get(id, &job).ok());
    EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  }
}

// Cancels hold no thread, so their count is bounded instead: past --max-cancels a cancel is
// turned away at once, and the bound is free again once the ones on their way are stored.
class SchedulerCancelBoundTest : public SchedulerTest {
 protected:
  std::vector<std::string> ExtraFlags() const override { return {"--max-cancels", "10"}; }
};

TEST_F(SchedulerCancelBoundTest, CancelsPastTheBoundAreTurnedAwayAtOnce) {
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) ids.push_back(SubmitOk(TrainerSpec(absl::StrCat("b-", i), 1)));
  pqxx::connection conn(db_->url());
  pqxx::work lock(conn);
  lock.exec("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE");
  std::vector<grpc::Status> answers(ids.size());
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] {
      v1::CancelJobResponse resp;
      answers[i] = Cancel(ids[i], &resp);
      ++answered;
    });
  }
  // The ones past the bound are answered while the others wait for the locked table.
  EXPECT_TRUE(WaitFor([&] { return answered >= 20; }, 10s, 10ms));
  std::this_thread::sleep_for(300ms);
  const int answered_while_locked = answered;
  lock.abort();
  for (auto& t : threads) t.join();
  EXPECT_EQ(answered_while_locked, 20);
  std::vector<std::string> refused;
  int cancelled = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (answers[i].ok()) {
      ++cancelled;
    } else {
      EXPECT_EQ(answers[i].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      EXPECT_THAT(answers[i].error_message(), ::testing::HasSubstr("--max-cancels"));
      refused.push_back(ids[i]);
    }
  }
  EXPECT_EQ(cancelled, 10);
  ASSERT_EQ(refused.size(), 20u);
  // A retry is served now: the bound counts only cancels on their way.
  v1::CancelJobResponse resp;
  grpc::Status again = Cancel(refused[0], &resp);
  EXPECT_TRUE(again.ok()) << again.error_message();
}

TEST_F(SchedulerTest, PlacesGangsByTypeOntoFewestWorkers) {
  TestWorker& w1 = AddWorker(GpuWorker("w1", "127.0.0.2", 2, "t4"));
  TestWorker& w2 = AddWorker(GpuWorker("w2", "127.0.0.3", 2, "t4"));
  TestWorker& w3 = AddWorker(GpuWorker("w3", "127.0.0.4", 4, "v100"));

  std::string v100 = SubmitOk(TrainerSpec("v", 2, 2, "v100"));
  auto a3 = w3.WaitAssignment(v100, 10s);
  ASSERT_TRUE(a3.ok());
  for (const auto& r : a3->placement()) EXPECT_EQ(r.worker_id(), "w3");

  std::string t4 = SubmitOk(TrainerSpec("t", 4, 1, "t4"));
  auto a1 = w1.WaitAssignment(t4, 10s);
  auto a2 = w2.WaitAssignment(t4, 10s);
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->token(), a2->token());
  EXPECT_EQ(a1->placement(0).worker_address(), "127.0.0.2");

  std::string big = SubmitOk(TrainerSpec("big", 8, 1, "t4"));
  v1::Job job;
  EXPECT_TRUE(WaitFor([&] { return Get(big, &job).ok() && !job.pending_reason().empty(); }, 5s));
  EXPECT_EQ(job.pending_reason(), "unschedulable: needs 8 x t4, the cluster has 4");
  std::string waits = SubmitOk(TrainerSpec("waits", 1, 1, "t4"));
  EXPECT_TRUE(WaitFor([&] { return Get(waits, &job).ok() && !job.pending_reason().empty(); }, 5s));
  EXPECT_EQ(job.pending_reason(), "needs 1 x t4, 0 free");

  grpc::ClientContext ctx;
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(scheduler_->cluster().ListWorkers(&ctx, v1::ListWorkersRequest(), &workers).ok());
  ASSERT_EQ(workers.workers_size(), 3);
  for (const auto& w : workers.workers()) {
    EXPECT_EQ(w.state(), "READY");
    EXPECT_EQ(w.allocated_gpus_size(), w.gpus_size()) << w.worker_id();
    EXPECT_TRUE(w.gpus(0).simulated());
  }

  // Cancel frees the GPUs and stops the ranks; the waiting job gets them.
  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(Cancel(t4, &cancelled).ok());
  EXPECT_TRUE(w1.WaitStop(t4, 5s).ok());
  EXPECT_TRUE(w2.WaitStop(t4, 5s).ok());
  EXPECT_EQ(WaitForState(scheduler_->jobs(), waits, v1::JOB_STATE_STARTING).state(),
            v1::JOB_STATE_STARTING);
}

TEST_F(SchedulerTest, RankStatusesInOneMessageAreHandledOneByOne) {
  TestWorker& w = AddWorker(GpuWorker("w1", "127.0.0.2", 4, "t4"));
  std::string id = SubmitOk(TrainerSpec("batched", 4, 1, "t4"));
  auto a = w.WaitAssignment(id, 10s);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->placement_size(), 4);
  auto status = [&](v1::RankStatus::Kind kind, int rank) {
    v1::RankStatus s;
    s.set_job_id(id);
    s.set_attempt(a->attempt());
    s.set_rank(rank);
    s.set_kind(kind);
    return s;
  };

  // Over the limit: the whole message is ignored, nothing starts.
  v1::WorkerMessage huge;
  for (int i = 0; i < 1025; ++i) {
    *huge.mutable_rank_statuses()->add_statuses() = status(v1::RankStatus::KIND_STARTED, i % 4);
  }
  w.Send(huge);
  // Three ranks start in one message, with a malformed status among them that is skipped.
  v1::WorkerMessage three;
  for (int rank : {0, 1}) {
    *three.mutable_rank_statuses()->add_statuses() = status(v1::RankStatus::KIND_STARTED, rank);
  }
  *three.mutable_rank_statuses()->add_statuses() = status(v1::RankStatus::KIND_PROGRESS, 3);
  *three.mutable_rank_statuses()->add_statuses() = status(v1::RankStatus::KIND_STARTED, 2);
  w.Send(three);
  // Messages on one stream are handled in order: once a checkpoint sent after them shows, the
  // batches before it were handled too. Rank 3 has not started, so the job is still STARTING.
  v1::WorkerMessage marker;
  *marker.mutable_rank_status() = status(v1::RankStatus::KIND_CHECKPOINT, 0);
  marker.mutable_rank_status()->set_checkpoint_step(7);
  marker.mutable_rank_status()->set_checkpoint_time_ms(absl::ToUnixMillis(absl::Now()));
  w.Send(marker);
  v1::Job job;
  ASSERT_TRUE(WaitFor([&] { return Get(id, &job).ok() && job.last_checkpoint_step() == 7; }, 5s));
  EXPECT_EQ(job.state(), v1::JOB_STATE_STARTING);

  v1::WorkerMessage last;
  *last.mutable_rank_statuses()->add_statuses() = status(v1::RankStatus::KIND_STARTED, 3);
  w.Send(last);
  EXPECT_EQ(WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_RUNNING).state(),
            v1::JOB_STATE_RUNNING);
  v1::WorkerMessage exits;
  for (int rank = 0; rank < 4; ++rank) {
    *exits.mutable_rank_statuses()->add_statuses() = status(v1::RankStatus::KIND_EXITED, rank);
  }
  w.Send(exits);
  EXPECT_EQ(WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_SUCCEEDED).state(),
            v1::JOB_STATE_SUCCEEDED);
}

// Rank 0's checkpoint reports reach Postgres, so an ended job (read from the store) and a new
// leader know the job's last checkpoint.
TEST_F(SchedulerTest, ACheckpointIsStoredAndOutlivesTheJob) {
  TestWorker& w = AddWorker(GpuWorker("w1", "127.0.0.2", 1, "t4"));
  std::string id = SubmitOk(TrainerSpec("ckpt", 1, 1, "t4"));
  auto a = w.WaitAssignment(id, 10s);
  ASSERT_TRUE(a.ok()) << a.status();
  StartRanks(w, *a);
  WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_RUNNING);
  const int64_t at_ms = absl::ToUnixMillis(absl::Now());
  v1::WorkerMessage msg;
  v1::RankStatus* s = msg.mutable_rank_status();
  s->set_job_id(id);
  s->set_attempt(a->attempt());
  s->set_rank(0);
  s->set_kind(v1::RankStatus::KIND_CHECKPOINT);
  s->set_checkpoint_step(40);
  s->set_checkpoint_time_ms(at_ms);
  w.Send(msg);
  auto stored_step = [&] {
    pqxx::connection conn(db_->url());
    pqxx::work tx(conn);
    return tx.exec_params1("SELECT last_checkpoint_step FROM jobs WHERE id = $1", id)[0]
        .as<int64_t>();
  };
  EXPECT_TRUE(WaitFor([&] { return stored_step() == 40; }, 5s));
  ExitRanks(w, *a, 0);
  WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_SUCCEEDED);
  v1::Job job;
  ASSERT_TRUE(Get(id, &job).ok());
  EXPECT_EQ(job.last_checkpoint_step(), 40);
  EXPECT_EQ(job.last_checkpoint_time_ms(), at_ms);
}

TEST_F(SchedulerTest, HigherPriorityJumpsTheQueue) {
  std::string low = SubmitOk(TrainerSpec("low", 1));
  v1::JobSpec urgent = TrainerSpec("urgent", 1);
  urgent.set_priority(10);
  std::string high = SubmitOk(urgent);
  TestWorker& w = AddWorker(CpuWorker("w1", "127.0.0.2", 1));
  ASSERT_TRUE(w.WaitAssignment(high, 10s).ok());
  v1::Job job;
  ASSERT_TRUE(Get(low, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_PENDING);
}

TEST_F(SchedulerTest, LostWorkerRestartsJobThenBackoffLimitFailsIt) {
  TestWorker& w1 = AddWorker(CpuWorker("w1", "127.0.0.2", 2));
  v1::JobSpec spec = TrainerSpec("flaky", 2);
  spec.set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
  spec.set_backoff_limit(1);
  std::string id = SubmitOk(spec);
  auto a = w1.WaitAssignment(id, 10s);
  ASSERT_TRUE(a.ok());
  StartRanks(w1, *a);
  WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_RUNNING);

  TestWorker& w2 = AddWorker(CpuWorker("w2", "127.0.0.3", 2));
  w1.PauseHeartbeats(true);  // w1 goes silent: lost after the 1.5 s timeout
  auto b = w2.WaitAssignment(id, 15s);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->attempt(), 1);
  v1::Job job;
  ASSERT_TRUE(Get(id, &job).ok());
  EXPECT_EQ(job.attempt(), 1);

  StartRanks(w2, *b);
  w2.ReportExited(id, 1, 1, 3);
  job = WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.exit_code(), 3);
  EXPECT_THAT(job.message(), HasSubstr("rank 1 on w2 exited with code 3"));

  pqxx::connection conn(db_->url());
  pqxx::work tx(conn);
  auto rows = tx.exec("SELECT state, reason, exit_code FROM job_events WHERE job_id = " +
                      tx.quote(id) + " ORDER BY seq");
  std::vector<std::string> states;
  for (const auto& row : rows) states.push_back(row[0].as<std::string>());
  EXPECT_THAT(states, ::testing::ElementsAre("PENDING", "STARTING", "RUNNING", "PENDING",
                                             "STARTING", "RUNNING", "FAILED"));
  EXPECT_THAT(rows[3][1].as<std::string>(), HasSubstr("worker w1 lost"));
  EXPECT_EQ(rows[6][2].as<int>(), 3);

  grpc::ClientContext ctx;
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(scheduler_->cluster().ListWorkers(&ctx, v1::ListWorkersRequest(), &workers).ok());
  for (const auto& w : workers.workers()) {
    EXPECT_EQ(w.state(), w.worker_id() == "w1" ? "LOST" : "READY");
  }
}

// Regression: a worker marked lost while its stream still stood kept heartbeating into a link
// the scheduler had dropped, and stayed LOST for good.
TEST_F(SchedulerTest, LateWorkerMarkedLostIsDisconnectedAndCanRegisterAgain) {
  TestWorker& w1 = AddWorker(CpuWorker("w1", "127.0.0.2", 2));
  w1.PauseHeartbeats(true);
  ASSERT_TRUE(WaitFor([&] { return !w1.connected(); }, 15s, 20ms))
      << "the scheduler kept the stream of a lost worker open";
  auto state = [&] {
    grpc::ClientContext ctx;
    v1::ListWorkersResponse resp;
    EXPECT_TRUE(scheduler_->cluster().ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).ok());
    return resp.workers_size() == 1 ? resp.workers(0).state() : std::string("none");
  };
  EXPECT_EQ(state(), "LOST");

  w1.PauseHeartbeats(false);
  ASSERT_TRUE(w1.Connect());
  EXPECT_EQ(state(), "READY");
  std::this_thread::sleep_for(3s);  // two heartbeat timeouts: the heartbeats count again
  EXPECT_EQ(state(), "READY");
  EXPECT_TRUE(w1.connected());
}

TEST_F(SchedulerTest, StandbyWaitsForTheLeaseAndTakesOverWhenTheLeaderDies) {
  const std::string id = SubmitOk(TrainerSpec("kept", 2));
  auto standby = SchedulerProcess::StartStandby(db_->url(), redis_->addr());
  ASSERT_TRUE(standby.ok()) << standby.status();
  SchedulerProcess& second = **standby;
  std::this_thread::sleep_for(3s);  // three lease ttls: the leader renews, the standby waits
  ASSERT_TRUE(second.process().Running()) << second.LogTail();
  EXPECT_FALSE(PortOpen(second.addr())) << "a standby must not serve";
  EXPECT_THAT(second.LogTail(), HasSubstr("standby: waiting for the leader lease"));

  ASSERT_TRUE(scheduler_->process().Kill(SIGKILL).ok());
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(second.WaitServing(10s).ok()) << second.LogTail();
  std::cerr << "standby serving "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - killed)
                   .count()
            << " ms after the leader was killed\n";
  v1::Job job;
  {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id(id);
    ASSERT_TRUE(second.jobs().GetJob(&ctx, req, &job).ok());
  }
  EXPECT_EQ(job.state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(job.spec().name(), "kept");
}

TEST_F(SchedulerTest, LeaderWhoseLeaseWasTakenExits) {
  // What a leader finds after it stalled past the ttl and another replica took over.
  const std::string cmd = absl::StrCat("redis-cli -h 127.0.0.1 -p ", redis_->port(),
                                       " SET rm:leader intruder PX 60000 >/dev/null");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto code = scheduler_->process().Wait(5s);
  ASSERT_TRUE(code.ok()) << "the scheduler kept running without the lease";
  EXPECT_EQ(*code, 3);
  EXPECT_THAT(scheduler_->LogTail(), HasSubstr("another scheduler took the leader lease"));
}

TEST_F(SchedulerTest, AStalledLeaderResumingAfterATakeoverWritesNothingAndExits) {
  auto standby = SchedulerProcess::StartStandby(db_->url(), redis_->addr());
  ASSERT_TRUE(standby.ok()) << standby.status();
  SchedulerProcess& second = **standby;
  // The leader stalls past its lease ttl (1 s); the standby takes over and serves.
  ASSERT_TRUE(scheduler_->process().Kill(SIGSTOP).ok());
  ASSERT_TRUE(second.WaitServing(10s).ok()) << second.LogTail();
  v1::SubmitJobResponse fresh;
  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = TrainerSpec("new-leader", 1);
    req.set_request_id("from-new-leader");
    ASSERT_TRUE(second.jobs().SubmitJob(&ctx, req, &fresh).ok());
  }
  // Clients still talking to the old leader: their calls wait on its socket, and reach it the
  // moment it resumes, racing its own lease check.
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 5s);
      v1::SubmitJobRequest req;
      *req.mutable_spec() = TrainerSpec("stale", 1);
      req.set_request_id(absl::StrCat("stale-", i));
      v1::SubmitJobResponse resp;
      (void)scheduler_->jobs().SubmitJob(&ctx, req, &resp);
    });
  }
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(scheduler_->process().Kill(SIGCONT).ok());
  auto code = scheduler_->process().Wait(10s);
  for (auto& t : clients) t.join();
  ASSERT_TRUE(code.ok()) << "the old leader kept running: " << scheduler_->LogTail();
  EXPECT_EQ(*code, 3);
  const std::string log = scheduler_->LogTail();
  std::cerr << "old leader stopped by: "
            << (absl::StrContains(log, "fenced") ? "the Postgres fence" : "its lease check")
            << "\n";
  pqxx::connection conn(db_->url());
  pqxx::work tx(conn);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM jobs WHERE request_id LIKE 'stale-%'")[0].as<int>(), 0)
      << "the fenced leader stored jobs";
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM jobs")[0].as<int>(), 1);
  EXPECT_EQ(tx.exec1("SELECT epoch FROM leader_fence")[0].as<int>(), 2);
}

TEST_F(SchedulerTest, AnOldLeaderThatRetakesALostLeaseIsStillFencedInPostgres) {
  auto standby = SchedulerProcess::StartStandby(db_->url(), redis_->addr());
  ASSERT_TRUE(standby.ok()) << standby.status();
  ASSERT_TRUE(scheduler_->process().Kill(SIGSTOP).ok());
  ASSERT_TRUE((*standby)->WaitServing(10s).ok()) << (*standby)->LogTail();
  // Redis loses the lease key (a flush): the old leader, resumed, takes the lease again, so
  // only the fence in Postgres stands between it and a second writer.
  ASSERT_TRUE(redis_->Flush().ok());
  ASSERT_TRUE(scheduler_->process().Kill(SIGCONT).ok());
  std::this_thread::sleep_for(500ms);
  v1::SubmitJobResponse resp;
  grpc::Status s = Submit(TrainerSpec("stale", 1), &resp, "stale-after-flush");
  EXPECT_FALSE(s.ok());
  auto code = scheduler_->process().Wait(10s);
  ASSERT_TRUE(code.ok()) << "the fenced leader kept running: " << scheduler_->LogTail();
  EXPECT_EQ(*code, 3);
  EXPECT_THAT(scheduler_->LogTail(), HasSubstr("fenced"));
  EXPECT_EQ(CountRows("jobs"), 0) << "the fenced leader stored a job";
}

TEST_F(SchedulerTest, MaxRuntimeFailsTheJobAndStopsItsRanks) {
  TestWorker& w = AddWorker(CpuWorker("w1", "127.0.0.2", 1));
  v1::JobSpec spec = TrainerSpec("slow", 1);
  spec.set_max_runtime_seconds(1);
  spec.set_restart_policy(v1::RESTART_POLICY_ON_FAILURE);
  std::string id = SubmitOk(spec);
  auto a = w.WaitAssignment(id, 10s);
  ASSERT_TRUE(a.ok());
  StartRanks(w, *a);
  v1::Job job = WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_FAILED, 10s);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.message(), HasSubstr("max_runtime_seconds"));
  EXPECT_TRUE(w.WaitStop(id, 5s).ok());
}

class SchedulerRestartTest : public SchedulerTest {
 protected:
  int HeartbeatTimeoutMs() const override { return 10000; }
};

TEST_F(SchedulerRestartTest, RestartLosesNoJobStateOrPlacement) {
  TestWorker& w = AddWorker(CpuWorker("w1", "127.0.0.2", 2));
  std::string running = SubmitOk(TrainerSpec("running", 2));
  auto a = w.WaitAssignment(running, 10s);
  ASSERT_TRUE(a.ok());
  StartRanks(w, *a);
  WaitForState(scheduler_->jobs(), running, v1::JOB_STATE_RUNNING);
  std::string pending = SubmitOk(TrainerSpec("pending", 2));
  std::string done = SubmitOk(TrainerSpec("done", 1));
  v1::CancelJobResponse c;
  ASSERT_TRUE(Cancel(done, &c).ok());
  v1::Job before;
  ASSERT_TRUE(Get(running, &before).ok());

  ASSERT_TRUE(scheduler_->Restart(SIGKILL).ok());

  v1::Job after;
  ASSERT_TRUE(Get(running, &after).ok());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RUNNING);
  ASSERT_EQ(after.placement_size(), 2);
  EXPECT_EQ(after.placement(0).worker_id(), "w1");
  ASSERT_TRUE(Get(pending, &after).ok());
  EXPECT_EQ(after.state(), v1::JOB_STATE_PENDING);
  ASSERT_TRUE(Get(done, &after).ok());
  EXPECT_EQ(after.state(), v1::JOB_STATE_CANCELLED);

  // The worker reconnects holding both ranks, one of which finished while we were down.
  w.registration().clear_ranks();
  for (int rank = 0; rank < 2; ++rank) {
    auto* r = w.registration().add_ranks();
    r->set_job_id(running);
    r->set_attempt(0);
    r->set_rank(rank);
    r->set_exited(rank == 1);
  }
  v1::RegisterWorker registration = w.registration();
  workers_.clear();  // destroys `w`
  TestWorker& back = AddWorker(registration);
  back.ReportExited(running, 0, 0, 0);
  EXPECT_EQ(WaitForState(scheduler_->jobs(), running, v1::JOB_STATE_SUCCEEDED).state(),
            v1::JOB_STATE_SUCCEEDED);
  // Its slots came back, so the pending job runs.
  EXPECT_TRUE(back.WaitAssignment(pending, 10s).ok());
}

TEST_F(SchedulerTest, WorkerReturningWithoutItsRanksFailsTheirJob) {
  TestWorker& w = AddWorker(CpuWorker("w1", "127.0.0.2", 1));
  std::string id = SubmitOk(TrainerSpec("orphan", 1));
  auto a = w.WaitAssignment(id, 10s);
  ASSERT_TRUE(a.ok());
  StartRanks(w, *a);
  WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(w.Connect());  // re-registers holding nothing, as a restarted worker would
  v1::Job job = WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.message(), HasSubstr("re-registered: rank 0 is gone"));
}

TEST_F(SchedulerTest, RedisFlushedMidRunIsRebuilt) {
  TestWorker& w = AddWorker(CpuWorker("w1", "127.0.0.2", 1));
  std::string first = SubmitOk(TrainerSpec("first", 1));
  auto a = w.WaitAssignment(first, 10s);
  ASSERT_TRUE(a.ok());
  StartRanks(w, *a);
  std::string queued = SubmitOk(TrainerSpec("queued", 1));
  WaitForState(scheduler_->jobs(), first, v1::JOB_STATE_RUNNING);

  ASSERT_TRUE(redis_->Flush().ok());
  std::this_thread::sleep_for(2s);  // longer than the heartbeat timeout
  v1::Job job;
  ASSERT_TRUE(Get(first, &job).ok());
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING) << "a flush must not make live workers lost";

  ExitRanks(w, *a, 0);
  EXPECT_TRUE(w.WaitAssignment(queued, 10s).ok()) << "the rebuilt queue still holds the job";

  // A Redis restart (empty) is survived the same way.
  ASSERT_TRUE(redis_->Stop().ok());
  std::string during = SubmitOk(TrainerSpec("during", 1));
  ASSERT_TRUE(redis_->Start().ok());
  grpc::ClientContext ctx;
  v1::CancelJobRequest req;
  req.set_job_id(queued);
  v1::CancelJobResponse resp;
  ASSERT_TRUE(scheduler_->jobs().CancelJob(&ctx, req, &resp).ok());
  EXPECT_TRUE(w.WaitAssignment(during, 10s).ok());
}

// Heartbeats are written to Redis aside: a Redis that answers nothing (each call then waits out
// the 1 s command timeout, one at a time on the scheduler's connection) must not hold up the
// rank statuses that come after them on a worker's stream, or any other worker's messages.
TEST_F(SchedulerTest, AHungRedisHoldsUpNoWorkerMessage) {
  TestWorker& w1 = AddWorker(CpuWorker("w1", "127.0.0.2", 1));
  TestWorker& w2 = AddWorker(CpuWorker("w2", "127.0.0.3", 1));
  std::string first = SubmitOk(TrainerSpec("first", 1));
  std::string second = SubmitOk(TrainerSpec("second", 1));
  // Each worker has one slot: one job each, whichever way round.
  TestWorker* on_first = nullptr;
  absl::StatusOr<v1::Assignment> a = absl::DeadlineExceededError("not placed");
  for (int i = 0; i < 100 && on_first == nullptr; ++i) {
    for (TestWorker* w : {&w1, &w2}) {
      if (on_first != nullptr) break;
      a = w->WaitAssignment(first, 50ms);
      if (a.ok()) on_first = w;
    }
  }
  ASSERT_TRUE(a.ok()) << a.status();
  TestWorker* on_second = on_first == &w1 ? &w2 : &w1;
  absl::StatusOr<v1::Assignment> b = on_second->WaitAssignment(second, 10s);
  ASSERT_TRUE(b.ok()) << b.status();

  ASSERT_TRUE(redis_->Pause().ok());
  v1::WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat();
  for (int i = 0; i < 5; ++i) {
    on_first->Send(heartbeat);
    on_second->Send(heartbeat);
  }
  const auto start = std::chrono::steady_clock::now();
  StartRanks(*on_first, *a);
  StartRanks(*on_second, *b);
  // Ten heartbeats' Redis writes in line ahead of them would take 10 s.
  EXPECT_EQ(WaitForState(scheduler_->jobs(), first, v1::JOB_STATE_RUNNING, 3s).state(),
            v1::JOB_STATE_RUNNING);
  EXPECT_EQ(WaitForState(scheduler_->jobs(), second, v1::JOB_STATE_RUNNING, 3s).state(),
            v1::JOB_STATE_RUNNING);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  ASSERT_TRUE(redis_->Resume().ok());

  ExitRanks(*on_first, *a, 0);
  ExitRanks(*on_second, *b, 0);
  WaitForState(scheduler_->jobs(), first, v1::JOB_STATE_SUCCEEDED);
  WaitForState(scheduler_->jobs(), second, v1::JOB_STATE_SUCCEEDED);
  v1::Job job;
  ASSERT_TRUE(Get(first, &job).ok());
  EXPECT_EQ(job.attempt(), 0) << "no worker may be lost for Redis's silence";
}

TEST_F(SchedulerTest, ServesPrometheusMetrics) {
  TestWorker& w = AddWorker(GpuWorker("w1", "127.0.0.2", 2, "t4"));
  std::string id = SubmitOk(TrainerSpec("m", 1, 1, "t4"));
  ASSERT_TRUE(w.WaitAssignment(id, 10s).ok());
  std::string text;
  EXPECT_TRUE(WaitFor(
      [&] {
        text = HttpGet(scheduler_->metrics_port(), "/metrics");
        return absl::StrContains(text, "ringmaster_gpus_allocated{gpu_type=\"t4\"} 1");
      },
      5s))
      << text;
  EXPECT_THAT(text, HasSubstr("ringmaster_gpus{gpu_type=\"t4\"} 2"));
  EXPECT_THAT(text, HasSubstr("ringmaster_jobs{queue=\"default\",state=\"STARTING\"} 1"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_submissions_total{queue=\"default\"} 1"));
  EXPECT_THAT(text, HasSubstr("ringmaster_placement_latency_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("ringmaster_workers{state=\"READY\"} 1"));
}

TEST_F(SchedulerTest, MalformedWorkerRegistrationIsRefused) {
  // An id no certificate can name: the identity check refuses it before it is validated.
  v1::RegisterWorker bad = GpuWorker("BAD ID", "127.0.0.2", 1, "t4");
  auto stub = v1::WorkerService::NewStub(scheduler_->WorkerChannel("w1"));
  grpc::ClientContext ctx;
  auto stream = stub->Connect(&ctx);
  v1::WorkerMessage msg;
  *msg.mutable_register_() = bad;
  stream->Write(msg);
  stream->WritesDone();
  v1::SchedulerMessage reply;
  EXPECT_FALSE(stream->Read(&reply));
  grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("BAD ID"));

  grpc::ClientContext ctx2;
  auto stream2 = stub->Connect(&ctx2);
  v1::WorkerMessage hb;
  hb.mutable_heartbeat();
  stream2->Write(hb);
  stream2->WritesDone();
  EXPECT_FALSE(stream2->Read(&reply));
  EXPECT_EQ(stream2->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace ringmaster::test

namespace ringmaster::test {
namespace {

// The database itself misbehaves: a Postgres of the test's own, frozen (SIGSTOP) for 30 s and
// restarted, under a scheduler with short store timeouts and a worker that keeps beating.
TEST(SchedulerDatabaseOutageTest, AHungAndARestartedPostgresLoseNothingAndCatchUpByThemselves) {
  auto pg = PostgresServer::Start();
  ASSERT_TRUE(pg.ok()) << pg.status();
  auto redis = RedisServer::StartNew();
  ASSERT_TRUE(redis.ok()) << redis.status();
  // Few RPC threads (the flags want at least --max-log-relays + 64), for the flood below.
  auto started = SchedulerProcess::Start(
      (*pg)->admin_url(), (*redis)->addr(), 1500,
      {"--postgres-timeout-ms", "500", "--write-wait-ms", "1500", "--max-watchers", "8",
       "--max-log-relays", "8", "--max-rpc-threads", "80"});
  ASSERT_TRUE(started.ok()) << started.status();
  SchedulerProcess& scheduler = **started;
  TestWorker w(scheduler.WorkerChannel("w1"), CpuWorker("w1", "127.0.0.2", 2));
  ASSERT_TRUE(w.Connect());
  auto submit = [&](const std::string& name, v1::SubmitJobResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::SubmitJobRequest req;
    *req.mutable_spec() = TrainerSpec(name, 1);
    req.set_request_id(name);
    return scheduler.jobs().SubmitJob(&ctx, req, resp);
  };
  auto run = [&](const std::string& name) -> absl::StatusOr<v1::Assignment> {
    v1::SubmitJobResponse resp;
    grpc::Status s = submit(name, &resp);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    auto a = w.WaitAssignment(resp.job().id(), 10s);
    if (!a.ok()) return a.status();
    w.ReportStarted(a->job_id(), a->attempt(), 0);
    WaitForState(scheduler.jobs(), a->job_id(), v1::JOB_STATE_RUNNING);
    return a;
  };
  auto state_of = [&](const std::string& id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 2s);
    v1::GetJobRequest req;
    req.set_job_id(id);
    v1::Job job;
    grpc::Status s = scheduler.jobs().GetJob(&ctx, req, &job);
    return s.ok() ? job.state() : v1::JOB_STATE_UNSPECIFIED;
  };
  auto worker_ready = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 2s);
    v1::ListWorkersResponse resp;
    if (!scheduler.cluster().ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).ok()) return false;
    return resp.workers_size() == 1 && resp.workers(0).state() == "READY";
  };

  // A call with a bearer token whose id Postgres does not know.
  auto get_with_token = [&](const std::string& id) {
    auto channel = CreateChannelWithToken(
        scheduler.addr(), *MakeChannelCredentials(TestCerts::Get().CaOnly()),
        absl::StrCat("rmt_", id, "_", std::string(64, 'a')));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::GetJobRequest req;
    req.set_job_id("j-0000000000000000");
    v1::Job job;
    return v1::JobService::NewStub(channel)->GetJob(&ctx, req, &job);
  };
  const std::string unknown_id = "00000000deadbeef";
  EXPECT_EQ(get_with_token(unknown_id).error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Hung: the server accepts connections and answers nothing.
  auto hung_job = run("before-hang");
  ASSERT_TRUE(hung_job.ok()) << hung_job.status();
  EXPECT_EQ(get_with_token(unknown_id).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE((*pg)->Pause().ok());
  // An id just found unknown stays unknown for a while without asking Postgres again.
  EXPECT_EQ(get_with_token(unknown_id).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Made-up ids while Postgres hangs: a few calls wait for it (bounded), the rest are turned
  // away at once instead of each holding an RPC thread.
  {
    std::vector<grpc::Status> flood(24);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < flood.size(); ++i) {
      threads.emplace_back(
          [&, i] { flood[i] = get_with_token(absl::StrCat("00000000000000", 10 + i)); });
    }
    for (auto& t : threads) t.join();
    int turned_away = 0;
    for (const grpc::Status& s : flood) {
      // The one read already on the hung connection outlives the call's deadline.
      EXPECT_THAT(s.error_code(), ::testing::AnyOf(grpc::StatusCode::UNAVAILABLE,
                                                   grpc::StatusCode::DEADLINE_EXCEEDED))
          << s.error_message();
      if (absl::StrContains(s.error_message(), "too many bearer tokens")) ++turned_away;
    }
    EXPECT_GE(turned_away, 8);
  }
  // A flood of reads of an ended job (so from Postgres) while it hangs: each holds an RPC
  // thread until its read gives up; past --max-rpc-threads the rest are turned away at once
  // instead of each starting a thread of its own.
  {
    const pid_t pid = scheduler.process().pid();
    const int64_t before = ProcStatusNumber(pid, "Threads:");
    std::atomic<bool> flooding{true};
    int64_t peak = before;
    std::thread sampler([&] {
      while (flooding) {
        peak = std::max(peak, ProcStatusNumber(pid, "Threads:"));
        std::this_thread::sleep_for(2ms);
      }
    });
    std::vector<grpc::Status> flood(320);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < flood.size(); ++i) {
      threads.emplace_back([&, i] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 5s);
        v1::GetJobRequest req;
        req.set_job_id("j-00000000beef");
        v1::Job job;
        flood[i] = scheduler.jobs().GetJob(&ctx, req, &job);
      });
    }
    for (auto& t : threads) t.join();
    flooding = false;
    sampler.join();
    int exhausted = 0;
    for (const grpc::Status& s : flood) {
      EXPECT_THAT(s.error_code(), ::testing::AnyOf(grpc::StatusCode::UNAVAILABLE,
                                                   grpc::StatusCode::DEADLINE_EXCEEDED,
                                                   grpc::StatusCode::RESOURCE_EXHAUSTED))
          << s.error_message();
      exhausted += s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    }
    std::cerr << "flood of " << flood.size() << " reads: " << exhausted
              << " turned away; scheduler threads " << before << " before, " << peak
              << " at most\n";
    EXPECT_GE(exhausted, 1);
    EXPECT_LE(peak - before, 80);
  }
  w.ReportExited(hung_job->job_id(), hung_job->attempt(), 0, 0);  // cannot be stored now
  const auto hang_start = std::chrono::steady_clock::now();
  v1::SubmitJobResponse refused;
  const auto submit_start = std::chrono::steady_clock::now();
  grpc::Status during = submit("during-hang", &refused);
  EXPECT_EQ(during.error_code(), grpc::StatusCode::UNAVAILABLE) << during.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - submit_start, 5s);
  int checks = 0;
  while (std::chrono::steady_clock::now() - hang_start < 30s) {
    EXPECT_TRUE(worker_ready()) << "a hung database must not make workers lost";
    EXPECT_EQ(state_of(hung_job->job_id()), v1::JOB_STATE_RUNNING) << "shown before stored";
    ++checks;
    std::this_thread::sleep_for(1s);
  }
  EXPECT_GE(checks, 20);
  ASSERT_TRUE((*pg)->Resume().ok());
  EXPECT_EQ(WaitForState(scheduler.jobs(), hung_job->job_id(), v1::JOB_STATE_SUCCEEDED, 20s).state(),
            v1::JOB_STATE_SUCCEEDED)
      << scheduler.LogTail();
  // The refused submit's write stayed queued and may have landed after the resume: a retry with
  // its request id returns that job or makes it, never a second one.
  v1::SubmitJobResponse retried;
  grpc::Status again = submit("during-hang", &retried);
  EXPECT_TRUE(again.ok()) << again.error_message();
  {
    pqxx::connection conn((*pg)->admin_url());
    pqxx::work tx(conn);
    EXPECT_EQ(tx.exec1("SELECT count(*) FROM jobs WHERE name = 'during-hang'")[0].as<int>(), 1);
  }

  // Gone: a restart breaks every connection.
  auto restarted_job = run("before-restart");
  ASSERT_TRUE(restarted_job.ok()) << restarted_job.status();
  ASSERT_TRUE((*pg)->Restart().ok());
  w.ReportExited(restarted_job->job_id(), restarted_job->attempt(), 0, 0);
  EXPECT_EQ(WaitForState(scheduler.jobs(), restarted_job->job_id(), v1::JOB_STATE_SUCCEEDED, 20s)
                .state(),
            v1::JOB_STATE_SUCCEEDED)
      << scheduler.LogTail();
  EXPECT_TRUE(worker_ready());
  v1::SubmitJobResponse after;
  grpc::Status ok = submit("after-restart", &after);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  if (HasFailure()) std::cerr << scheduler.LogTail() << "\n";
}

}  // namespace
}  // namespace ringmaster::test
