// Tests of the test harness itself: Subprocess, RedisServer, TestDatabase, WaitFor.
#include <hiredis/hiredis.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "common/net.h"
#include "gtest/gtest.h"
#include "support/proc_file.h"
#include "support/redis_server.h"
#include "support/subprocess.h"
#include "support/test_database.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(SubprocessTest, CapturesStdoutAndStderrAndExitCode) {
  auto proc = Subprocess::Start({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(proc.ok()) << proc.status();
  auto code = (*proc)->Wait(seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 3);
  EXPECT_FALSE((*proc)->Running());
  std::string log = (*proc)->Log();
  EXPECT_NE(log.find("out\n"), std::string::npos) << log;
  EXPECT_NE(log.find("err\n"), std::string::npos) << log;
}

TEST(SubprocessTest, PassesExtraEnvironment) {
  auto proc =
      Subprocess::Start({"sh", "-c", "echo \"v=$RM_HARNESS_VAR\""}, {{"RM_HARNESS_VAR", "hello"}});
  ASSERT_TRUE(proc.ok()) << proc.status();
  ASSERT_TRUE((*proc)->Wait(seconds(10)).ok());
  EXPECT_NE((*proc)->Log().find("v=hello"), std::string::npos) << (*proc)->Log();
}

TEST(SubprocessTest, MissingProgramIsAnErrorNotAChild) {
  auto proc = Subprocess::Start({"/nonexistent/ringmaster-no-such-program"});
  EXPECT_EQ(proc.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(proc.status().message().find("No such file"), std::string::npos) << proc.status();
}

TEST(SubprocessTest, KillReportsTheSignalAndWaitTimesOut) {
  auto proc = Subprocess::Start({"sleep", "30"});
  ASSERT_TRUE(proc.ok()) << proc.status();
  EXPECT_TRUE((*proc)->Running());
  EXPECT_EQ((*proc)->Wait(milliseconds(50)).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE((*proc)->Kill(SIGKILL).ok());
  auto code = (*proc)->Wait(seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGKILL);
  EXPECT_TRUE((*proc)->Kill().ok());  // already gone: a no-op
}

TEST(SubprocessTest, ProcStatusNumberReadsAFieldAndSaysWhenThereIsNone) {
  const int64_t threads = ProcStatusNumber(getpid(), "Threads:");
  EXPECT_GE(threads, 1);
  std::thread extra([] { std::this_thread::sleep_for(milliseconds(300)); });
  EXPECT_GE(ProcStatusNumber(getpid(), "Threads:"), threads + 1);  // others may start too
  extra.join();
  EXPECT_GT(ProcStatusNumber(getpid(), "VmRSS:"), 0);
  EXPECT_EQ(ProcStatusNumber(getpid(), "NoSuchField:"), -1);
  auto proc = Subprocess::Start({"true"});
  ASSERT_TRUE(proc.ok()) << proc.status();
  const pid_t gone = (*proc)->pid();
  ASSERT_TRUE((*proc)->Wait(seconds(10)).ok());  // reaped: its /proc entry is gone
  EXPECT_EQ(ProcStatusNumber(gone, "Threads:"), -1);
}

TEST(SubprocessTest, WritesToAGivenLogPath) {
  std::string path = ::testing::TempDir() + "/harness-given.log";
  std::remove(path.c_str());
  SubprocessOptions options;
  options.argv = {"sh", "-c", "pwd"};
  options.log_path = path;
  options.working_dir = "/";
  auto proc = Subprocess::Start(options);
  ASSERT_TRUE(proc.ok()) << proc.status();
  ASSERT_TRUE((*proc)->Wait(seconds(10)).ok());
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "/");
}

TEST(SubprocessTest, ChildDiesWithTheThreadThatStartedIt) {
  // PR_SET_PDEATHSIG fires when the starting thread ends: a stand-in for the test crashing.
  absl::StatusOr<std::unique_ptr<Subprocess>> proc = absl::UnknownError("not started");
  std::thread starter([&] { proc = Subprocess::Start({"sleep", "30"}); });
  starter.join();
  ASSERT_TRUE(proc.ok()) << proc.status();
  auto code = (*proc)->Wait(seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGKILL);
}

TEST(WaitForTest, ReturnsTrueOnceThePredicateHolds) {
  std::atomic<int> calls{0};
  EXPECT_TRUE(WaitFor([&] { return ++calls >= 3; }, seconds(5), milliseconds(1)));
  EXPECT_EQ(calls.load(), 3);
}

TEST(WaitForTest, ReturnsFalseAfterTheTimeout) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(WaitFor([] { return false; }, milliseconds(50)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(50));
}

bool Pings(const RedisServer& server) {
  redisContext* ctx = redisConnectWithTimeout(server.host().c_str(), server.port(), {1, 0});
  if (ctx == nullptr) return false;
  bool ok = false;
  if (ctx->err == 0) {
    auto* reply = static_cast<redisReply*>(redisCommand(ctx, "PING"));
    ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
    if (reply != nullptr) freeReplyObject(reply);
  }
  redisFree(ctx);
  return ok;
}

TEST(ReadProcFileTest, ReadsAProcessFileAndGivesEmptyForAGoneProcess) {
  EXPECT_NE(ringmaster::test::ReadProcFile("/proc/self/stat").find(')'), std::string::npos);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(ringmaster::test::ReadProcFile("/proc/" + std::to_string(child) + "/environ"), "");
  EXPECT_EQ(ringmaster::test::ReadProcFile("/proc/self"), "");  // EISDIR: no throw either
}

// Ports for the services tests start come from below the ephemeral range: a port-0 pick could
// be handed to any connect() (mpirun's, gRPC's) before the service binds it.
TEST(PickFreePortTest, PicksBelowTheEphemeralRangeAndNeverTwice) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  ASSERT_TRUE(range >> low);
  std::set<int> seen;
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<int> port = ringmaster::PickFreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_GE(*port, 10000);
    if (low > 11000) {
      EXPECT_LT(*port, low);
    }
    EXPECT_TRUE(seen.insert(*port).second) << "port " << *port << " picked twice";
  }
  EXPECT_EQ(ringmaster::PickFreePort("not-an-address").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RedisServerTest, StartsStopsAndRestartsOnTheSamePort) {
  auto server = RedisServer::StartNew();
  ASSERT_TRUE(server.ok()) << server.status();
  RedisServer& redis = **server;
  EXPECT_TRUE(redis.running());
  EXPECT_EQ(redis.addr(), "127.0.0.1:" + std::to_string(redis.port()));
  EXPECT_TRUE(Pings(redis));
  int port = redis.port();
  ASSERT_TRUE(redis.Stop().ok());
  EXPECT_FALSE(redis.running());
  EXPECT_FALSE(Pings(redis));
  EXPECT_EQ(redis.Flush().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(redis.Start().ok()) << redis.LogTail();
  EXPECT_EQ(redis.port(), port);
  EXPECT_TRUE(Pings(redis));
  EXPECT_TRUE(redis.Flush().ok());
  EXPECT_EQ(redis.Start().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TestDatabaseTest, UrlForDatabaseReplacesOnlyTheDatabase) {
  EXPECT_EQ(TestDatabase::UrlForDatabase("postgresql://postgres@127.0.0.1:5544/postgres", "x"),
            "postgresql://postgres@127.0.0.1:5544/x");
  EXPECT_EQ(TestDatabase::UrlForDatabase("postgresql://u@h:1", "x"), "postgresql://u@h:1/x");
  EXPECT_EQ(TestDatabase::UrlForDatabase("postgres://u@h/postgres?sslmode=disable", "x"),
            "postgres://u@h/x?sslmode=disable");
  EXPECT_EQ(TestDatabase::UrlForDatabase("host=h port=1 dbname=postgres", "x"),
            "host=h port=1 dbname=postgres dbname=x");
}

TEST(TestDatabaseTest, UnsetUrlFailsWithHowToSetIt) {
  const char* saved = std::getenv(TestDatabase::kAdminUrlEnv);
  std::string value = saved != nullptr ? saved : "";
  unsetenv(TestDatabase::kAdminUrlEnv);
  auto db = TestDatabase::Create();
  if (saved != nullptr) setenv(TestDatabase::kAdminUrlEnv, value.c_str(), 1);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(db.status().message().find("scripts/test"), std::string::npos) << db.status();
  EXPECT_NE(db.status().message().find(TestDatabase::kAdminUrlEnv), std::string::npos);
}

TEST(TestDatabaseTest, CreatesAFreshDatabaseAndDropsIt) {
  std::string name;
  {
    auto db = TestDatabase::Create();
    ASSERT_TRUE(db.ok()) << db.status();
    name = (*db)->name();
    EXPECT_EQ(name.rfind("rm_test_", 0), 0u) << name;
    pqxx::connection conn((*db)->url());
    pqxx::work tx(conn);
    EXPECT_EQ(tx.exec1("SELECT current_database()")[0].as<std::string>(), name);
    // A connection still open when the database is dropped does not block the drop.
    tx.commit();
    auto other = TestDatabase::Create();
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_NE((*other)->name(), name);
  }
  auto admin = TestDatabase::AdminUrl();
  ASSERT_TRUE(admin.ok());
  pqxx::connection conn(*admin);
  pqxx::work tx(conn);
  EXPECT_EQ(
      tx.exec_params1("SELECT count(*) FROM pg_database WHERE datname = $1", name)[0].as<int>(), 0);
}

}  // namespace
}  // namespace ringmaster::test
