// QueueService of a real scheduler process on real PostgreSQL and Redis, driven through gRPC:
// CRUD, every validation error, NOT_FOUND on a submit to an unknown queue, FAILED_PRECONDITION
// on deleting a queue with a live job, `default` present on the first start, and queues
// surviving a restart.
#include <functional>
#include <pqxx/pqxx>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/queue.grpc.pb.h"
#include "scheduler/harness.h"

namespace ringmaster::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class QueueServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = TestDatabase::Create();
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    auto redis = RedisServer::StartNew();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    auto scheduler = SchedulerProcess::Start(db_->url(), redis_->addr(), 5000);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = *std::move(scheduler);
    queues_ = v1::QueueService::NewStub(scheduler_->channel());
  }
  void TearDown() override {
    if (HasFailure() && scheduler_)
      std::cerr << "scheduler log:\n" << scheduler_->LogTail() << "\n";
    scheduler_.reset();
  }

  static v1::Queue Vision() {
    v1::Queue q;
    q.set_name("vision");
    q.set_cohort("research");
    q.set_weight(2);
    v1::ResourceQuota& t4 = (*q.mutable_resources())["t4"];
    t4.set_nominal(16);
    t4.set_borrowing_limit(8);
    t4.set_lending_limit(4);
    (*q.mutable_resources())["cpu"].set_nominal(64);
    q.set_within_queue(v1::PREEMPT_WITHIN_QUEUE_LOWER_PRIORITY);
    q.set_reclaim_within_cohort(v1::RECLAIM_WITHIN_COHORT_ANY);
    q.set_min_runtime_seconds(600);
    return q;
  }

  grpc::Status Create(const v1::Queue& queue, v1::QueueWithStatus* out = nullptr) {
    grpc::ClientContext ctx;
    v1::CreateQueueRequest req;
    *req.mutable_queue() = queue;
    v1::QueueWithStatus resp;
    grpc::Status s = queues_->CreateQueue(&ctx, req, &resp);
    if (out) *out = resp;
    return s;
  }
  grpc::Status Update(const v1::Queue& queue, v1::QueueWithStatus* out = nullptr) {
    grpc::ClientContext ctx;
    v1::UpdateQueueRequest req;
    *req.mutable_queue() = queue;
    v1::QueueWithStatus resp;
    grpc::Status s = queues_->UpdateQueue(&ctx, req, &resp);
    if (out) *out = resp;
    return s;
  }
  grpc::Status Get(const std::string& name, v1::QueueWithStatus* out = nullptr) {
    grpc::ClientContext ctx;
    v1::GetQueueRequest req;
    req.set_name(name);
    v1::QueueWithStatus resp;
    grpc::Status s = queues_->GetQueue(&ctx, req, &resp);
    if (out) *out = resp;
    return s;
  }
  std::vector<std::string> ListNames() {
    grpc::ClientContext ctx;
    v1::ListQueuesResponse resp;
    grpc::Status s = queues_->ListQueues(&ctx, v1::ListQueuesRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> names;
    for (const auto& q : resp.queues()) names.push_back(q.queue().name());
    return names;
  }
  grpc::Status Delete(const std::string& name) {
    grpc::ClientContext ctx;
    v1::DeleteQueueRequest req;
    req.set_name(name);
    v1::DeleteQueueResponse resp;
    return queues_->DeleteQueue(&ctx, req, &resp);
  }
  grpc::Status Submit(const std::string& queue, std::string* id = nullptr) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    *req.mutable_spec() = TrainerSpec("train", 1);
    req.mutable_spec()->set_queue(queue);
    v1::SubmitJobResponse resp;
    grpc::Status s = scheduler_->jobs().SubmitJob(&ctx, req, &resp);
    if (id) *id = resp.job().id();
    return s;
  }
  int64_t QueueRows() {
    pqxx::connection conn(db_->url());
    pqxx::work tx(conn);
    return tx.exec1("SELECT count(*) FROM queues")[0].as<int64_t>();
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<SchedulerProcess> scheduler_;
  std::unique_ptr<v1::QueueService::Stub> queues_;
};

// Every field a client sets, compared one by one (the times are the scheduler's).
void ExpectSameSettings(const v1::Queue& actual, const v1::Queue& expected) {
  EXPECT_EQ(actual.name(), expected.name());
  EXPECT_EQ(actual.cohort(), expected.cohort());
  EXPECT_EQ(actual.weight(), expected.weight());
  EXPECT_EQ(actual.resources().size(), expected.resources().size());
  for (const auto& [name, quota] : expected.resources()) {
    ASSERT_TRUE(actual.resources().contains(name)) << name;
    const v1::ResourceQuota& got = actual.resources().at(name);
    EXPECT_EQ(got.nominal(), quota.nominal()) << name;
    EXPECT_EQ(got.has_borrowing_limit(), quota.has_borrowing_limit()) << name;
    EXPECT_EQ(got.borrowing_limit(), quota.borrowing_limit()) << name;
    EXPECT_EQ(got.has_lending_limit(), quota.has_lending_limit()) << name;
    EXPECT_EQ(got.lending_limit(), quota.lending_limit()) << name;
  }
  EXPECT_EQ(actual.within_queue(), expected.within_queue());
  EXPECT_EQ(actual.reclaim_within_cohort(), expected.reclaim_within_cohort());
  EXPECT_EQ(actual.min_runtime_seconds(), expected.min_runtime_seconds());
}

TEST_F(QueueServiceTest, TheDefaultQueueIsThereOnTheFirstStart) {
  EXPECT_THAT(ListNames(), ElementsAre("default"));
  v1::QueueWithStatus got;
  ASSERT_TRUE(Get("default", &got).ok());
  EXPECT_TRUE(got.queue().resources().empty()) << "no quota limits";
  EXPECT_EQ(got.queue().cohort(), "");
  EXPECT_EQ(got.queue().weight(), 1);
  EXPECT_GT(got.queue().created_at_ms(), 0);
  // Jobs without a queue go there, as before queues existed.
  std::string id;
  ASSERT_TRUE(Submit("", &id).ok());
  v1::Job job = WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_PENDING);
  EXPECT_EQ(job.spec().queue(), "default");
}

TEST_F(QueueServiceTest, CreateGetListUpdateDelete) {
  v1::QueueWithStatus created;
  ASSERT_TRUE(Create(Vision(), &created).ok());
  ExpectSameSettings(created.queue(), Vision());
  EXPECT_GT(created.queue().created_at_ms(), 0);
  EXPECT_EQ(created.queue().updated_at_ms(), created.queue().created_at_ms());
  EXPECT_EQ(created.status().pending_jobs(), 0);

  v1::QueueWithStatus got;
  ASSERT_TRUE(Get("vision", &got).ok());
  ExpectSameSettings(got.queue(), Vision());
  EXPECT_THAT(ListNames(), ElementsAre("default", "vision"));

  grpc::Status again = Create(Vision());
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS) << again.error_message();

  v1::Queue next = Vision();
  next.set_weight(7);
  next.mutable_resources()->erase("cpu");
  next.mutable_resources()->at("t4").clear_borrowing_limit();
  v1::QueueWithStatus updated;
  ASSERT_TRUE(Update(next, &updated).ok());
  ExpectSameSettings(updated.queue(), next);
  EXPECT_EQ(updated.queue().created_at_ms(), created.queue().created_at_ms());
  ASSERT_TRUE(Get("vision", &got).ok());
  ExpectSameSettings(got.queue(), next);

  ASSERT_TRUE(Delete("vision").ok());
  EXPECT_EQ(Get("vision").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Update(next).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Delete("vision").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(ListNames(), ElementsAre("default"));
  EXPECT_EQ(QueueRows(), 1);
}

TEST_F(QueueServiceTest, EveryKindOfBadQueueIsRejectedAndNothingIsStored) {
  struct Case {
    std::string field;
    std::function<void(v1::Queue&)> mutate;
  };
  std::vector<Case> cases = {
      {"name", [](v1::Queue& q) { q.set_name("Team A"); }},
      {"name", [](v1::Queue& q) { q.set_name(""); }},
      {"cohort", [](v1::Queue& q) { q.set_cohort("-research"); }},
      {"weight", [](v1::Queue& q) { q.set_weight(1001); }},
      {"weight", [](v1::Queue& q) { q.set_weight(-1); }},
      {"resources", [](v1::Queue& q) { (*q.mutable_resources())["Tesla T4"].set_nominal(1); }},
      {"resources.t4.nominal",
       [](v1::Queue& q) { q.mutable_resources()->at("t4").set_nominal(-1); }},
      {"resources.cpu.nominal",
       [](v1::Queue& q) { q.mutable_resources()->at("cpu").set_nominal(1'000'001); }},
      {"resources.t4.borrowing_limit",
       [](v1::Queue& q) { q.mutable_resources()->at("t4").set_borrowing_limit(-2); }},
      {"resources.t4.lending_limit",
       [](v1::Queue& q) { q.mutable_resources()->at("t4").set_lending_limit(17); }},
      {"resources.t4.borrowing_limit", [](v1::Queue& q) { q.clear_cohort(); }},
      {"within_queue",
       [](v1::Queue& q) { q.set_within_queue(static_cast<v1::PreemptWithinQueue>(9)); }},
      {"reclaim_within_cohort",
       [](v1::Queue& q) { q.set_reclaim_within_cohort(static_cast<v1::ReclaimWithinCohort>(9)); }},
      {"min_runtime_seconds", [](v1::Queue& q) { q.set_min_runtime_seconds(-1); }},
      {"min_runtime_seconds", [](v1::Queue& q) { q.set_min_runtime_seconds(2'592'001); }},
  };
  ASSERT_TRUE(Create(Vision()).ok());  // for the updates
  for (const Case& c : cases) {
    v1::Queue queue = Vision();
    c.mutate(queue);
    grpc::Status created = Create(queue);
    EXPECT_EQ(created.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_THAT(created.error_message(), ::testing::StartsWith(c.field + ":")) << c.field;
    if (!queue.name().empty() && queue.name() == "vision") {
      grpc::Status updated = Update(queue);
      EXPECT_EQ(updated.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
      EXPECT_THAT(updated.error_message(), ::testing::StartsWith(c.field + ":")) << c.field;
    }
  }
  {
    grpc::ClientContext ctx;
    v1::QueueWithStatus resp;
    grpc::Status missing = queues_->CreateQueue(&ctx, v1::CreateQueueRequest(), &resp);
    EXPECT_EQ(missing.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(missing.error_message(), HasSubstr("queue: is required"));
  }
  grpc::Status bad_get = Get("Bad Name");
  EXPECT_EQ(bad_get.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_get.error_message(), ::testing::StartsWith("name:"));
  grpc::Status bad_delete = Delete("../etc");
  EXPECT_EQ(bad_delete.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_delete.error_message(), ::testing::StartsWith("name:"));
  EXPECT_EQ(QueueRows(), 2) << "only default and vision";
  v1::QueueWithStatus got;
  ASSERT_TRUE(Get("vision", &got).ok());
  ExpectSameSettings(got.queue(), Vision());
}

TEST_F(QueueServiceTest, SubmitToAnUnknownQueueIsNotFoundNamingIt) {
  grpc::Status refused = Submit("audio");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(refused.error_message(), HasSubstr("'audio'"));
  v1::Queue audio;
  audio.set_name("audio");
  ASSERT_TRUE(Create(audio).ok());
  std::string id;
  ASSERT_TRUE(Submit("audio", &id).ok());
  EXPECT_EQ(WaitForState(scheduler_->jobs(), id, v1::JOB_STATE_PENDING).spec().queue(), "audio");
}

TEST_F(QueueServiceTest, AQueueWithALiveJobOrTheDefaultQueueCannotBeDeleted) {
  grpc::Status default_delete = Delete("default");
  EXPECT_EQ(default_delete.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(Create(Vision()).ok());
  std::string id;
  ASSERT_TRUE(Submit("vision", &id).ok());
  grpc::Status refused = Delete("vision");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("live jobs"));
  EXPECT_TRUE(Get("vision").ok());

  grpc::ClientContext ctx;
  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(scheduler_->jobs().CancelJob(&ctx, cancel, &cancelled).ok());
  EXPECT_TRUE(Delete("vision").ok());
  EXPECT_THAT(ListNames(), ElementsAre("default"));
}

TEST_F(QueueServiceTest, QueuesSurviveASchedulerRestart) {
  v1::QueueWithStatus created;
  ASSERT_TRUE(Create(Vision(), &created).ok());
  ASSERT_TRUE(scheduler_->Restart(SIGKILL).ok());
  queues_ = v1::QueueService::NewStub(scheduler_->channel());
  v1::QueueWithStatus got;
  ASSERT_TRUE(Get("vision", &got).ok());
  ExpectSameSettings(got.queue(), Vision());
  EXPECT_EQ(got.queue().created_at_ms(), created.queue().created_at_ms());
  EXPECT_THAT(ListNames(), ElementsAre("default", "vision"));
  EXPECT_TRUE(Submit("vision").ok());
}

}  // namespace
}  // namespace ringmaster::test
