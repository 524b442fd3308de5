// The coordination conformance suite on the Redis implementations (each test with its own
// redis-server), and what only Redis has: outages, restarts that come back empty, database
// and prefix isolation, pub/sub across replicas.
#include "scheduler/store/redis_coordination.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "coordination_conformance.h"
#include "gmock/gmock.h"
#include "job_store_conformance.h"  // PrintTo for JobEvent
#include "support/redis_server.h"
#include "support/status_test_util.h"
#include "support/wait_for.h"

namespace ringmaster::scheduler::store_test {
namespace {

using ::ringmaster::test::RedisServer;
using ::ringmaster::test::StatusIs;
using ::ringmaster::test::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

RedisOptions OptionsFor(const RedisServer& server, int db = 3,
                        const std::string& prefix = "rmtest:") {
  RedisOptions options;
  options.host = server.host();
  options.port = server.port();
  options.db = db;
  options.key_prefix = prefix;
  options.connect_timeout = std::chrono::milliseconds(500);
  options.command_timeout = std::chrono::milliseconds(1000);
  return options;
}

class RedisCoordinationBackend : public CoordinationBackend {
 public:
  RedisCoordinationBackend() {
    auto server = RedisServer::StartNew();
    if (server.ok()) {
      server_ = std::move(*server);
      redis_ = std::make_shared<RedisConnection>(OptionsFor(*server_));
    } else {
      start_error_ = server.status();
    }
  }

  absl::StatusOr<std::unique_ptr<PendingQueue>> NewQueue() override {
    if (!start_error_.ok()) return start_error_;
    return std::unique_ptr<PendingQueue>(new RedisPendingQueue(redis_));
  }
  absl::StatusOr<std::unique_ptr<Liveness>> NewLiveness() override {
    if (!start_error_.ok()) return start_error_;
    return std::unique_ptr<Liveness>(new RedisLiveness(redis_));
  }
  absl::StatusOr<std::unique_ptr<LeaderLease>> NewLease() override {
    if (!start_error_.ok()) return start_error_;
    return std::unique_ptr<LeaderLease>(new RedisLeaderLease(redis_));
  }
  void LoseEverything() override { ASSERT_TRUE(server_->Flush().ok()); }
  void AdvanceTime(int64_t ms) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }

 private:
  absl::Status start_error_;
  std::unique_ptr<RedisServer> server_;
  std::shared_ptr<RedisConnection> redis_;
};

INSTANTIATE_TEST_SUITE_P(Redis, CoordinationConformanceTest,
                         ::testing::Values(CoordinationBackendParam{
                             "Redis", [] { return std::make_unique<RedisCoordinationBackend>(); }}),
                         CoordinationBackendName);

// --- Redis specifics ---------------------------------------------------------------------

class RedisCoordinationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RM_ASSERT_OK_AND_ASSIGN(server_, RedisServer::StartNew());
    redis_ = std::make_shared<RedisConnection>(OptionsFor(*server_));
  }

  std::unique_ptr<RedisServer> server_;
  std::shared_ptr<RedisConnection> redis_;
};

TEST_F(RedisCoordinationTest, RedisStoppedIsUnavailableAndRecoversWhenItIsBack) {
  RedisPendingQueue queue(redis_);
  RedisLiveness liveness(redis_);
  RM_ASSERT_OK(queue.Rebuild({{"a", 0, 1}}));
  RM_ASSERT_OK(server_->Stop());

  auto pushed = queue.Push({"b", 0, 2});
  EXPECT_THAT(pushed, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(pushed.message()), HasSubstr(server_->addr()));
  EXPECT_THAT(queue.List(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(queue.Intact(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(queue.Remove("a"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(queue.Rebuild({}), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(liveness.Beat("w1", 1000), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(liveness.Alive({"w1"}), StatusIs(absl::StatusCode::kUnavailable));

  RM_ASSERT_OK(server_->Start());
  // Same connection object: it reconnects by itself.
  RM_ASSERT_OK(queue.Push({"b", 0, 2}));
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue.List());
  EXPECT_THAT(ids, ElementsAre("b"));
  RM_ASSERT_OK(liveness.Beat("w1", 60'000));
}

TEST_F(RedisCoordinationTest, ARedisRestartedEmptyLeavesTheQueueNotIntact) {
  RedisPendingQueue queue(redis_);
  RM_ASSERT_OK(queue.Rebuild({{"a", 0, 1}, {"b", 0, 2}}));
  RM_ASSERT_OK_AND_ASSIGN(bool intact, queue.Intact());
  ASSERT_TRUE(intact);
  RM_ASSERT_OK(server_->Stop());
  RM_ASSERT_OK(server_->Start());
  // The first call after the restart may find the old connection dead: UNAVAILABLE, then fine.
  absl::StatusOr<bool> after = queue.Intact();
  if (!after.ok()) {
    EXPECT_THAT(after, StatusIs(absl::StatusCode::kUnavailable));
    after = queue.Intact();
  }
  RM_ASSERT_OK(after);
  EXPECT_FALSE(*after);
  RM_ASSERT_OK_AND_ASSIGN(auto ids, queue.List());
  EXPECT_THAT(ids, IsEmpty());
}

TEST_F(RedisCoordinationTest, FlushAllLeavesTheQueueNotIntact) {
  RedisPendingQueue queue(redis_);
  RM_ASSERT_OK(queue.Rebuild({{"a", 0, 1}}));
  RM_ASSERT_OK(server_->Flush());
  RM_ASSERT_OK_AND_ASSIGN(bool intact, queue.Intact());
  EXPECT_FALSE(intact);
}

TEST_F(RedisCoordinationTest, ANewQueueIsNotIntactBeforeItsFirstRebuild) {
  RedisPendingQueue queue(redis_);
  RM_ASSERT_OK_AND_ASSIGN(bool intact, queue.Intact());
  EXPECT_FALSE(intact);
}

TEST_F(RedisCoordinationTest, DatabasesAndPrefixesKeepUsersApart) {
  auto db1 = std::make_shared<RedisConnection>(OptionsFor(*server_, 1, "rm:"));
  auto db2 = std::make_shared<RedisConnection>(OptionsFor(*server_, 2, "rm:"));
  auto db1_other_prefix = std::make_shared<RedisConnection>(OptionsFor(*server_, 1, "other:"));
  RedisPendingQueue q1(db1), q2(db2), q3(db1_other_prefix);
  RM_ASSERT_OK(q1.Rebuild({{"in-db1", 0, 1}}));
  RM_ASSERT_OK(q2.Push({"in-db2", 0, 1}));
  RM_ASSERT_OK_AND_ASSIGN(auto ids1, q1.List());
  RM_ASSERT_OK_AND_ASSIGN(auto ids2, q2.List());
  RM_ASSERT_OK_AND_ASSIGN(auto ids3, q3.List());
  EXPECT_THAT(ids1, ElementsAre("in-db1"));
  EXPECT_THAT(ids2, ElementsAre("in-db2"));
  EXPECT_THAT(ids3, IsEmpty());
  RM_ASSERT_OK_AND_ASSIGN(bool intact2, q2.Intact());
  EXPECT_FALSE(intact2);
  RM_ASSERT_OK_AND_ASSIGN(auto keys, db1->Command({"KEYS", "*"}));
  ASSERT_EQ(keys->type, REDIS_REPLY_ARRAY);
  for (size_t i = 0; i < keys->elements; ++i) {
    EXPECT_THAT(std::string(keys->element[i]->str), ::testing::StartsWith("rm:pending"));
  }
}

TEST_F(RedisCoordinationTest, AnUnreachableRedisIsUnavailable) {
  RM_ASSERT_OK_AND_ASSIGN(int port, PickFreePort());
  RedisOptions options;
  options.port = port;
  auto connection = RedisConnection::Connect(options);
  EXPECT_THAT(connection, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(connection.status().message()),
              HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_THAT(std::string(connection.status().message()), HasSubstr("redisConnectWithTimeout"));
}

TEST_F(RedisCoordinationTest, AnOutOfRangeDatabaseIsInvalidArgument) {
  EXPECT_THAT(RedisConnection::Connect(OptionsFor(*server_, 999)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(RedisCoordinationTest, ErrorRepliesComeBackAsStatusesAndKeepTheConnection) {
  RM_ASSERT_OK(redis_->Command({"SET", "rmtest:s", "x"}));
  EXPECT_THAT(redis_->Command({"ZADD", "rmtest:s", "1", "m"}),
              StatusIs(absl::StatusCode::kInternal));
  RM_ASSERT_OK_AND_ASSIGN(auto reply, redis_->Command({"GET", "rmtest:s"}));
  EXPECT_EQ(std::string(reply->str, reply->len), "x");
}

TEST_F(RedisCoordinationTest, AHeartbeatExpiresWithItsRealTtl) {
  RedisLiveness liveness(redis_);
  RM_ASSERT_OK(liveness.Beat("w1", 200));
  RM_ASSERT_OK_AND_ASSIGN(auto ttl, redis_->Command({"PTTL", "rmtest:alive:w1"}));
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 200);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto alive = liveness.Alive({"w1"});
        return alive.ok() && alive->empty();
      },
      std::chrono::seconds(5)));
}

}  // namespace
}  // namespace ringmaster::scheduler::store_test
