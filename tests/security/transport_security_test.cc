// Transport security of a real scheduler (on real PostgreSQL and Redis): TLS is the default,
// plaintext and foreign certificates are refused in the handshake, a worker is admitted only
// under a name of its own certificate (and nothing of a refused registration is stored), and
// --insecure is refused off loopback. The agent's side is in tests/worker/worker_e2e_test.cc.
#include <pqxx/pqxx>

#include <chrono>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/bearer_token.h"
#include "common/net.h"
#include "common/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/harness.h"
#include "support/test_certs.h"
#include "support/test_tokens.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class TransportSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = TestDatabase::Create();
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    auto redis = RedisServer::StartNew();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
    auto scheduler = SchedulerProcess::Start(db_->url(), redis_->addr());
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = *std::move(scheduler);
  }
  void TearDown() override {
    if (HasFailure() && scheduler_) std::cerr << "scheduler log:\n" << scheduler_->LogTail() << "\n";
    scheduler_.reset();
  }

  // Opens a Connect stream on `channel`, registers `registration` and returns how the stream
  // ended (OK status with `registered` set when the scheduler answered Registered).
  grpc::Status Register(std::shared_ptr<grpc::Channel> channel,
                        const v1::RegisterWorker& registration, bool* registered) {
    auto stub = v1::WorkerService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto stream = stub->Connect(&ctx);
    v1::WorkerMessage msg;
    *msg.mutable_register_() = registration;
    stream->Write(msg);
    v1::SchedulerMessage reply;
    *registered = stream->Read(&reply) && reply.has_registered();
    if (*registered) ctx.TryCancel();
    return stream->Finish();
  }

  grpc::Status ListWorkers(std::shared_ptr<grpc::Channel> channel,
                           v1::ListWorkersResponse* resp) {
    auto stub = v1::ClusterService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    return stub->ListWorkers(&ctx, v1::ListWorkersRequest(), resp);
  }

  int64_t StoredWorkers() {
    pqxx::connection conn(db_->url());
    pqxx::work tx(conn);
    return tx.exec1("SELECT count(*) FROM workers")[0].as<int64_t>();
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<SchedulerProcess> scheduler_;
};

TEST_F(TransportSecurityTest, ClientWithOnlyTheCaIsServedOverTls) {
  v1::ListWorkersResponse resp;
  grpc::Status s = ListWorkers(scheduler_->channel(), &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(TransportSecurityTest, PlaintextClientIsRefused) {
  v1::ListWorkersResponse resp;
  grpc::Status s = ListWorkers(scheduler_->ChannelWith(InsecureTls()), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TransportSecurityTest, ClientThatDoesNotTrustTheServersCaIsRefused) {
  // The client verifies the server against another CA: the scheduler's certificate fails.
  v1::ListWorkersResponse resp;
  grpc::Status s = ListWorkers(scheduler_->ChannelWith(TestCerts::Foreign().CaOnly()), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TransportSecurityTest, AgentStyleChannelsSkipTheNameCheckButNotTheChain) {
  // ServerName::kAnyOfTheCa (how rsh, ranks and ringctl logs reach agents) still refuses a
  // server whose certificate is not of the CA it trusts.
  auto credentials =
      MakeChannelCredentials(TestCerts::Foreign().CaOnly(), ServerName::kAnyOfTheCa);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  auto stub = v1::ClusterService::NewStub(grpc::CreateChannel(scheduler_->addr(), *credentials));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::ListWorkersResponse resp;
  EXPECT_EQ(stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // And accepts one of its own CA.
  auto own = MakeChannelCredentials(TestCerts::Get().CaOnly(), ServerName::kAnyOfTheCa);
  ASSERT_TRUE(own.ok());
  auto own_stub = v1::ClusterService::NewStub(
      CreateChannelWithToken(scheduler_->addr(), *own, AdminToken().token));
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + 5s);
  EXPECT_TRUE(own_stub->ListWorkers(&ctx2, v1::ListWorkersRequest(), &resp).ok());
}

TEST_F(TransportSecurityTest, ClientCertificateFromAnotherCaIsRefused) {
  // Trusts the server, but presents a worker certificate of a foreign CA: the handshake fails,
  // and the registration it carried never reaches the scheduler.
  CertFiles foreign = TestCerts::Foreign().Worker("w1");
  TlsOptions tls{foreign.cert, foreign.key, TestCerts::Get().ca(), false};
  bool registered = false;
  grpc::Status s = Register(scheduler_->ChannelWith(tls), CpuWorker("w1", "127.0.0.2", 1),
                            &registered);
  EXPECT_FALSE(registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(StoredWorkers(), 0);
}

TEST_F(TransportSecurityTest, WorkerIsAdmittedUnderTheNameOfItsCertificate) {
  bool registered = false;
  grpc::Status s = Register(scheduler_->WorkerChannel("w1"), CpuWorker("w1", "127.0.0.2", 1),
                            &registered);
  EXPECT_TRUE(registered) << s.error_message();
  // The positive control of the "nothing stored" checks below (stored by the scheduler's
  // writer, which may finish after Registered went out).
  EXPECT_TRUE(WaitFor([&] { return StoredWorkers() == 1; }, 10s)) << StoredWorkers();
}

TEST_F(TransportSecurityTest, WorkerClaimingAnotherWorkersIdIsDeniedAndNothingIsStored) {
  bool registered = false;
  // A certificate for w1 that registers as w2.
  grpc::Status s = Register(scheduler_->WorkerChannel("w1"), CpuWorker("w2", "127.0.0.3", 4),
                            &registered);
  EXPECT_FALSE(registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("w2"));
  EXPECT_EQ(StoredWorkers(), 0);
  v1::ListWorkersResponse resp;
  ASSERT_TRUE(ListWorkers(scheduler_->channel(), &resp).ok());
  EXPECT_EQ(resp.workers_size(), 0);
}

TEST_F(TransportSecurityTest, WorkerWithoutCertificateIsDenied) {
  bool registered = false;
  grpc::Status s = Register(scheduler_->ChannelWith(TestCerts::Get().CaOnly()),
                            CpuWorker("w1", "127.0.0.2", 1), &registered);
  EXPECT_FALSE(registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(StoredWorkers(), 0);
}

TEST_F(TransportSecurityTest, ServiceCertificateWithoutTheWorkersNameIsDenied) {
  // ringctl's client certificate is of the right CA but names no worker.
  bool registered = false;
  grpc::Status s = Register(scheduler_->ChannelWith(TestCerts::Get().Client().Options()),
                            CpuWorker("w1", "127.0.0.2", 1), &registered);
  EXPECT_FALSE(registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(StoredWorkers(), 0);
}

// Starts `binary` with `args` and waits for it to exit; returns its exit code and output.
std::pair<int, std::string> RunToExit(const std::string& binary, std::vector<std::string> args) {
  args.insert(args.begin(), binary);
  auto p = Subprocess::Start(args);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {-1, ""};
  absl::StatusOr<int> code = (*p)->Wait(30s);
  EXPECT_TRUE(code.ok()) << code.status() << "\n" << (*p)->LogTail();
  if (!code.ok()) (void)(*p)->Stop();
  return {code.ok() ? *code : -1, (*p)->Log()};
}

TEST(InsecureModeTest, InsecureIsRefusedOnANonLoopbackAddressByEveryServer) {
  auto port = PickFreePort("0.0.0.0");
  ASSERT_TRUE(port.ok());
  const std::string any = absl::StrCat("0.0.0.0:", *port);
  for (const auto& [binary, args] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {RINGMASTER_BINARY_DIR "/services/scheduler/ringmaster-scheduler",
            {"--insecure", "--listen=" + any, "--metrics-listen=127.0.0.1:0"}},
           {RINGMASTER_BINARY_DIR "/services/metrics/ringmaster-metrics",
            {"--insecure", "--listen=" + any, "--metrics-listen=127.0.0.1:0"}},
           {RINGMASTER_BINARY_DIR "/services/worker/ringmaster-worker",
            {"--insecure", "--listen=" + any, "--address=127.0.0.2",
             "--metrics-listen=127.0.0.2:0", "--worker-id=w1"}}}) {
    auto [code, log] = RunToExit(binary, args);
    EXPECT_EQ(code, 2) << binary << ": " << log;
    EXPECT_THAT(log, HasSubstr("--insecure")) << binary;
    EXPECT_THAT(log, HasSubstr("is not a loopback address")) << binary;
  }
}

TEST(InsecureModeTest, InsecureEnvironmentVariableIsRefusedOffLoopbackToo) {
  auto port = PickFreePort("0.0.0.0");
  ASSERT_TRUE(port.ok());
  auto p = Subprocess::Start(
      {RINGMASTER_BINARY_DIR "/services/metrics/ringmaster-metrics",
       absl::StrCat("--listen=0.0.0.0:", *port), "--metrics-listen=127.0.0.1:0"},
      {{"RINGMASTER_INSECURE", "1"}});
  ASSERT_TRUE(p.ok());
  absl::StatusOr<int> code = (*p)->Wait(30s);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 2);
  EXPECT_THAT((*p)->Log(), HasSubstr("--insecure (or RINGMASTER_INSECURE) is refused"));
}

TEST(InsecureModeTest, InsecureOnLoopbackServesPlaintextWithALoudWarning) {
  auto port = PickFreePort();
  auto http = PickFreePort();
  ASSERT_TRUE(port.ok() && http.ok());
  const std::string addr = absl::StrCat("127.0.0.1:", *port);
  auto p = Subprocess::Start({RINGMASTER_BINARY_DIR "/services/metrics/ringmaster-metrics",
                              "--insecure", "--listen=" + addr,
                              absl::StrCat("--metrics-listen=127.0.0.1:", *http)});
  ASSERT_TRUE(p.ok()) << p.status();
  auto stub = v1::ClusterService::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  EXPECT_TRUE(WaitFor(
      [&] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 1s);
        v1::ListWorkersResponse resp;
        // UNIMPLEMENTED: the plaintext call reached the server (it has no cluster API).
        return stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).error_code() ==
               grpc::StatusCode::UNIMPLEMENTED;
      },
      10s))
      << (*p)->LogTail();
  EXPECT_THAT((*p)->Log(), HasSubstr("*** INSECURE: ringmaster-metrics runs with --insecure"));
  EXPECT_THAT((*p)->Log(), HasSubstr("in PLAINTEXT"));
}

TEST(InsecureModeTest, TlsWithoutCertificatesFailsAtStartNamingTheFlag) {
  auto [code, log] = RunToExit(RINGMASTER_BINARY_DIR "/services/metrics/ringmaster-metrics",
                               {"--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0"});
  EXPECT_EQ(code, 2) << log;
  EXPECT_THAT(log, HasSubstr("--tls-cert (or RINGMASTER_TLS_CERT) is needed"));
}

// The code a handshake-level probe gets: UNIMPLEMENTED (the metrics service has no cluster
// API) when TLS succeeded, UNAVAILABLE when it failed.
grpc::StatusCode Probe(const std::string& addr, const TlsOptions& tls) {
  auto stub = v1::ClusterService::NewStub(
      grpc::CreateChannel(addr, *MakeChannelCredentials(tls)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  v1::ListWorkersResponse resp;
  return stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).error_code();
}

TEST(CertificateReloadTest, ReplacedFilesAreServedWithoutARestart) {
  // The service's files in a directory of the test's own, first of our CA.
  std::string dir = ::testing::TempDir() + "reload-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto put = [&](const CertFiles& from) {
    // Written beside, then renamed over: each file changes at once, as a kubelet does.
    for (const auto& [src, name] : {std::pair{from.cert, "tls.crt"}, std::pair{from.key, "tls.key"},
                                    std::pair{from.ca, "ca.crt"}}) {
      std::filesystem::copy_file(src, dir + "/next-" + name,
                                 std::filesystem::copy_options::overwrite_existing);
      std::filesystem::rename(dir + "/next-" + name, dir + "/" + name);
    }
  };
  put(TestCerts::Get().Metrics());
  auto port = PickFreePort();
  auto http = PickFreePort();
  ASSERT_TRUE(port.ok() && http.ok());
  const std::string addr = absl::StrCat("127.0.0.1:", *port);
  auto p = Subprocess::Start({RINGMASTER_BINARY_DIR "/services/metrics/ringmaster-metrics",
                              "--listen=" + addr, absl::StrCat("--metrics-listen=127.0.0.1:", *http),
                              "--tls-cert=" + dir + "/tls.crt", "--tls-key=" + dir + "/tls.key",
                              "--tls-ca=" + dir + "/ca.crt"});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(WaitFor([&] { return Probe(addr, TestCerts::Get().CaOnly()) ==
                                   grpc::StatusCode::UNIMPLEMENTED; }, 10s))
      << (*p)->LogTail();
  EXPECT_EQ(Probe(addr, TestCerts::Foreign().CaOnly()), grpc::StatusCode::UNAVAILABLE);

  put(TestCerts::Foreign().Metrics());
  // Within the provider's refresh interval (10 s), and without a restart.
  EXPECT_TRUE(WaitFor([&] { return Probe(addr, TestCerts::Foreign().CaOnly()) ==
                                   grpc::StatusCode::UNIMPLEMENTED; }, 25s, 500ms))
      << (*p)->LogTail();
  EXPECT_EQ(Probe(addr, TestCerts::Get().CaOnly()), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE((*p)->Running());
  std::filesystem::remove_all(dir);
}

TEST(TlsLibraryTest, LoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:7070"));
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.3:7071"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:7070"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:7070"));
  EXPECT_TRUE(IsLoopbackAddress("unix:/tmp/sock"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:7070"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:7070"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5:7070"));
  EXPECT_FALSE(IsLoopbackAddress("scheduler:7070"));
  EXPECT_FALSE(IsLoopbackAddress(":7070"));
}

TEST(TlsLibraryTest, ChildrenOfAWorkloadGetTheCaButNoIdentity) {
  TlsOptions tls{"/c/tls.crt", "/c/tls.key", "/c/ca.crt", false};
  EXPECT_EQ(TlsEnvironment(tls, /*with_identity=*/false),
            (std::map<std::string, std::string>{{"RINGMASTER_TLS_CA", "/c/ca.crt"}}));
  EXPECT_EQ(TlsEnvironment(tls, /*with_identity=*/true).size(), 3u);
  EXPECT_EQ(TlsEnvironment(InsecureTls(), true),
            (std::map<std::string, std::string>{{"RINGMASTER_INSECURE", "1"}}));
}

}  // namespace
}  // namespace ringmaster::test
