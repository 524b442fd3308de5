// Hostile bytes against a real cluster (scheduler on PostgreSQL and Redis, a worker, the metrics
// service), the way an attacker on the network would try it:
//   - every listening port (three gRPC servers, three /metrics pages) gets random bytes,
//     truncated and oversized TLS records, HTTP requests with garbage, connections held half
//     open, and, inside a real TLS session with a client certificate, the HTTP/2 preface
//     followed by random and truncated frames;
//   - every RPC of every service gets random bytes and random protobuf messages of its request
//     type (every field filled with edge values, through reflection).
// Bounded (a fixed number of rounds, short deadlines). Afterwards every process is alive, its
// memory grew by less than a bound, and the cluster still works: a job runs to SUCCEEDED and
// every /metrics page answers; a registry credential set before the barrage is still there, and
// every registry secret in PostgreSQL is sealed and opens for its own team and registry.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/secret_box.h"
#include "common/tls.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/admin.pb.h"
#include "ringmaster/v1/agent.pb.h"
#include "ringmaster/v1/job.pb.h"
#include "ringmaster/v1/metrics.pb.h"
#include "ringmaster/v1/queue.pb.h"
#include "ringmaster/v1/registry.grpc.pb.h"
#include "ringmaster/v1/volume.pb.h"
#include "ringmaster/v1/worker.pb.h"
#include "scheduler/core/registry_credentials.h"
#include "support/cluster/cluster_test.h"
#include "support/http_get.h"
#include "support/proc_file.h"
#include "support/subprocess.h"
#include "support/test_certs.h"
#include "support/test_tokens.h"

namespace ringmaster::test {
namespace {

using namespace std::chrono_literals;
namespace pb = google::protobuf;

constexpr int kRawRoundsPerPort = 120;
constexpr int kMessagesPerMethod = 24;
// RSS a service may gain over the whole barrage (gRPC and allocator pools grow once).
constexpr int64_t kMaxGrowthKb = 96 * 1024;
// A registry credential set before the RPC barrage, which must come out of it intact.
constexpr char kKnownTeam[] = "hostile-team";
constexpr char kKnownRegistry[] = "registry.hostile.test:5000";
constexpr char kKnownUser[] = "robot";
constexpr char kKnownSecret[] = "known-secret-8c1f3e";

struct Port {
  std::string name;
  int port = 0;
  pid_t pid = 0;
  bool tls = false;  // a gRPC server (TLS); otherwise a plaintext /metrics page
};

int64_t RssKb(pid_t pid) { return ProcStatusNumber(pid, "VmRSS:"); }

bool Alive(pid_t pid) {
  const std::string text = ReadProcFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{0, 200'000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server hung up: that is its right
    done += static_cast<size_t>(n);
  }
}

// Waits briefly for the server's first reply: long enough for it to have read what was sent.
void ShortTimeout(int fd) {
  timeval tv{0, 20'000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

void DrainAndClose(int fd) {
  ShortTimeout(fd);
  char buf[4096];
  (void)::recv(fd, buf, sizeof(buf), 0);  // whatever the server says first, if anything
  ::close(fd);
}

class Bytes {
 public:
  explicit Bytes(uint64_t seed) : rng_(seed) {}
  uint32_t Below(uint32_t n) { return n == 0 ? 0 : static_cast<uint32_t>(rng_() % n); }
  std::string Random(size_t max) {
    std::string out(Below(static_cast<uint32_t>(max)) + 1, '\0');
    for (char& c : out) c = static_cast<char>(rng_());
    return out;
  }
  // An HTTP/2 frame header (9 bytes) with a random or lying length, then some payload.
  std::string Frame() {
    const uint32_t length = Below(4) == 0 ? 0xffffff : Below(2048);
    std::string f;
    f += static_cast<char>(length >> 16);
    f += static_cast<char>(length >> 8);
    f += static_cast<char>(length);
    f += static_cast<char>(Below(12));  // DATA .. CONTINUATION, and unknown types
    f += static_cast<char>(Below(256));
    const uint32_t stream = Below(3) == 0 ? 0 : static_cast<uint32_t>(rng_());
    for (int shift : {24, 16, 8, 0}) f += static_cast<char>(stream >> shift);
    f += Random(std::min<uint32_t>(length, 1024));
    if (Below(3) == 0) f.resize(Below(static_cast<uint32_t>(f.size())));  // truncated
    return f;
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

// Plaintext attacks: on a TLS port they hit the handshake, on /metrics the HTTP parser.
void RawRound(const Port& port, Bytes& b, int round, std::vector<int>& held) {
  const int fd = Connect(port.port);
  if (fd < 0) return;
  switch (round % 7) {
    case 0:
      SendAll(fd, b.Random(4096));
      break;
    case 1: {  // a TLS record header with a random (often huge) length, then garbage
      std::string rec = "\x16\x03\x01";
      rec += b.Random(2);
      rec += b.Random(512);
      SendAll(fd, rec);
      break;
    }
    case 2:  // the HTTP/2 preface in clear, then frames
      SendAll(fd, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
      for (int i = 0; i < 8; ++i) SendAll(fd, b.Frame());
      break;
    case 3:  // an HTTP request with an oversized, binary header
      SendAll(fd, absl::StrCat("GET /metrics HTTP/1.1\r\nHost: x\r\nX-", b.Random(64), ": ",
                               std::string(64 * 1024, 'a'), "\r\n\r\n"));
      break;
    case 4:  // a request line that never ends
      SendAll(fd, absl::StrCat("GET /", std::string(b.Below(16 * 1024), 'A')));
      break;
    case 5:  // connect and say nothing, kept open until the round ends
      if (held.size() < 64) {
        held.push_back(fd);
        return;
      }
      break;
    default:  // a truncated, then abandoned, chunked POST
      SendAll(fd, "POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\n");
      SendAll(fd, b.Random(256));
      break;
  }
  DrainAndClose(fd);
}

// Inside a real TLS session (client certificate of the cluster's CA): the HTTP/2 preface, then
// random and truncated frames. What a peer that passed the handshake could send.
// True when the handshake passed and the garbage went inside the session.
bool TlsRound(const Port& port, Bytes& b, SSL_CTX* ctx) {
  const int fd = Connect(port.port);
  if (fd < 0) return false;
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "localhost");
  const bool opened = SSL_connect(ssl) == 1;
  if (opened) {
    std::string bytes = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    if (b.Below(4) == 0) bytes.resize(b.Below(static_cast<uint32_t>(bytes.size())));
    for (int i = 0; i < 12; ++i) bytes += b.Frame();
    SSL_write(ssl, bytes.data(), static_cast<int>(bytes.size()));
    char buf[4096];
    ShortTimeout(fd);
    (void)SSL_read(ssl, buf, sizeof(buf));
  }
  SSL_free(ssl);
  ::close(fd);
  ERR_clear_error();
  return opened;
}

// Fills every field of `msg` with values chosen to hurt: empty, huge, negative, unknown enum
// numbers, deep nesting (bounded), many repeated entries.
void Fill(pb::Message* msg, Bytes& b, int depth) {
  const pb::Descriptor* d = msg->GetDescriptor();
  const pb::Reflection* r = msg->GetReflection();
  static const int64_t kInts[] = {0,    1,         -1,        2,         64,
                                  4097, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
  auto any_int = [&] {
    return b.Below(3) == 0 ? static_cast<int64_t>(b.rng()()) : kInts[b.Below(10)];
  };
  auto any_string = [&]() -> std::string {
    switch (b.Below(6)) {
      case 0:
        return "";
      case 1:
        return std::string(b.Below(70'000), 'x');
      case 2:
        return "../../etc/passwd";
      case 3:
        return "default";
      case 4:
        return "w1";
      default: {
        std::string s = b.Random(32);
        for (char& c : s) c = static_cast<char>(' ' + (static_cast<unsigned char>(c) % 95));
        return s;
      }
    }
  };
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (b.Below(5) == 0) continue;  // some fields stay unset
    const int count = f->is_repeated() ? static_cast<int>(b.Below(b.Below(8) == 0 ? 300 : 4)) : 1;
    for (int n = 0; n < count; ++n) {
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_INT32: {
          const auto v = static_cast<int32_t>(any_int());
          rep ? r->AddInt32(msg, f, v) : r->SetInt32(msg, f, v);
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_INT64:
          rep ? r->AddInt64(msg, f, any_int()) : r->SetInt64(msg, f, any_int());
          break;
        case pb::FieldDescriptor::CPPTYPE_UINT32: {
          const auto v = static_cast<uint32_t>(any_int());
          rep ? r->AddUInt32(msg, f, v) : r->SetUInt32(msg, f, v);
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_UINT64: {
          const auto v = static_cast<uint64_t>(any_int());
          rep ? r->AddUInt64(msg, f, v) : r->SetUInt64(msg, f, v);
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
          static const double kDoubles[] = {0, -1, 1e308, -1e308, 1e-300, std::nan(""), INFINITY};
          const double v = kDoubles[b.Below(7)];
          rep ? r->AddDouble(msg, f, v) : r->SetDouble(msg, f, v);
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_FLOAT: {
          const float v = b.Below(2) ? NAN : -1.0f;
          rep ? r->AddFloat(msg, f, v) : r->SetFloat(msg, f, v);
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_BOOL:
          rep ? r->AddBool(msg, f, b.Below(2)) : r->SetBool(msg, f, b.Below(2));
          break;
        case pb::FieldDescriptor::CPPTYPE_ENUM: {
          const int v =
              b.Below(3) == 0 ? static_cast<int>(any_int()) : static_cast<int>(b.Below(8));
          rep ? r->AddEnumValue(msg, f, v) : r->SetEnumValue(msg, f, v);
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_STRING: {
          std::string v =
              f->type() == pb::FieldDescriptor::TYPE_BYTES ? b.Random(4096) : any_string();
          rep ? r->AddString(msg, f, std::move(v)) : r->SetString(msg, f, std::move(v));
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth >= 4) break;
          Fill(rep ? r->AddMessage(msg, f) : r->MutableMessage(msg, f), b, depth + 1);
          break;
      }
    }
  }
}

// One call of any kind (unary or streaming: the same on the wire) with one request message;
// reads what comes back until the server ends the call or the deadline passes.
grpc::StatusCode Call(grpc::GenericStub& stub, const std::string& method,
                      const std::string& payload, const std::string& token) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 2s);
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(&ctx, method, &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](void* want) {
    while (cq.Next(&tag, &ok)) {
      if (tag == want) return ok;
    }
    return false;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  if (step(reinterpret_cast<void*>(1))) {
    grpc::Slice slice(payload);
    grpc::ByteBuffer request(&slice, 1);
    call->Write(request, reinterpret_cast<void*>(2));
    if (step(reinterpret_cast<void*>(2))) {
      call->WritesDone(reinterpret_cast<void*>(3));
      step(reinterpret_cast<void*>(3));
    }
    grpc::ByteBuffer response;
    for (int i = 0; i < 64; ++i) {
      call->Read(&response, reinterpret_cast<void*>(4));
      if (!step(reinterpret_cast<void*>(4))) break;
    }
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(reinterpret_cast<void*>(5));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status.error_code();
}

class HostileBytesTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(StartCluster());
    auto grpc_port = PickFreePort();
    auto http_port = PickFreePort();
    ASSERT_TRUE(grpc_port.ok() && http_port.ok());
    metrics_addr_ = new std::string(absl::StrCat("127.0.0.1:", *grpc_port));
    metrics_http_ = *http_port;
    auto metrics = Subprocess::Start(
        {RINGMASTER_BINARY_DIR "/services/metrics/ringmaster-metrics", "--listen", *metrics_addr_,
         "--metrics-listen", absl::StrCat("127.0.0.1:", metrics_http_),
         "--tls-cert=" + TestCerts::Get().Metrics().cert,
         "--tls-key=" + TestCerts::Get().Metrics().key, "--tls-ca=" + TestCerts::Get().ca()});
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = metrics->release();
    WorkerConfig config;
    config.id = absl::StrCat("hostile-", getpid());
    config.address = "127.0.0.2";
    config.cpu_slots = 2;
    config.metrics_service = *metrics_addr_;
    ASSERT_TRUE(cluster_->AddWorker(config).ok());
    ASSERT_TRUE(cluster_->WaitWorkersReady(1).ok()) << cluster_->Logs();
  }

  static void TearDownTestSuite() {
    delete metrics_;
    metrics_ = nullptr;
    ClusterTest::TearDownTestSuite();
    delete metrics_addr_;
    metrics_addr_ = nullptr;
  }

  void TearDown() override {
    ClusterTest::TearDown();
    if (HasFailure() && metrics_ != nullptr) std::cerr << metrics_->LogTail() << "\n";
  }

  static std::vector<Port> Ports() {
    WorkerProcess& worker = *cluster_->workers().front();
    auto port_of = [](const std::string& addr) {
      std::string host;
      int port = 0;
      (void)SplitHostPort(addr, "address", &host, &port);
      return port;
    };
    const pid_t scheduler = cluster_->scheduler().process().pid();
    const pid_t agent = worker.process().pid();
    return {
        {"scheduler gRPC", port_of(cluster_->scheduler().addr()), scheduler, true},
        {"scheduler /metrics", cluster_->scheduler().metrics_port(), scheduler, false},
        {"worker agent gRPC", port_of(worker.agent_addr()), agent, true},
        {"worker /metrics", worker.metrics_port(), agent, false},
        {"metrics service gRPC", port_of(*metrics_addr_), metrics_->pid(), true},
        {"metrics service /metrics", metrics_http_, metrics_->pid(), false},
    };
  }

  // Every process alive, its memory within the bound, and the cluster still working.
  void ExpectHealthy(const std::map<pid_t, int64_t>& rss_before) {
    for (const auto& [pid, before] : rss_before) {
      ASSERT_TRUE(Alive(pid)) << "process " << pid << " died";
      const int64_t after = RssKb(pid);
      std::printf("pid %d: RSS %lld kB -> %lld kB\n", pid, static_cast<long long>(before),
                  static_cast<long long>(after));
      EXPECT_LT(after - before, kMaxGrowthKb) << "process " << pid << " grew past the bound";
    }
    for (const Port& port : Ports()) {
      if (!port.tls) {
        EXPECT_NE(HttpGet(port.port, "/metrics").find("# TYPE"), std::string::npos) << port.name;
      }
    }
    v1::JobSpec spec;
    spec.set_name("after-the-barrage");
    spec.set_replicas(1);
    spec.mutable_command()->add_argv("/bin/true");
    auto id = cluster_->Submit(spec);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(cluster_->WaitState(*id, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  }

  static std::map<pid_t, int64_t> Rss() {
    std::map<pid_t, int64_t> out;
    for (const Port& p : Ports()) out[p.pid] = RssKb(p.pid);
    return out;
  }

  static Subprocess* metrics_;
  static std::string* metrics_addr_;
  static int metrics_http_;
};

Subprocess* HostileBytesTest::metrics_ = nullptr;
std::string* HostileBytesTest::metrics_addr_ = nullptr;
int HostileBytesTest::metrics_http_ = 0;

TEST_F(HostileBytesTest, RandomAndTruncatedFramesOnEveryPortCrashNothingAndLeakNothing) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  ASSERT_NE(ctx, nullptr);
  const CertFiles client = TestCerts::Get().Client();
  ASSERT_EQ(SSL_CTX_use_certificate_chain_file(ctx, client.cert.c_str()), 1);
  ASSERT_EQ(SSL_CTX_use_PrivateKey_file(ctx, client.key.c_str(), SSL_FILETYPE_PEM), 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx, kAlpn, sizeof(kAlpn));

  Bytes b(20261124);
  // One warm-up round first: the first connections grow the servers' pools for good.
  for (const Port& port : Ports()) {
    std::vector<int> held;
    for (int i = 0; i < 7; ++i) RawRound(port, b, i, held);
    if (port.tls) TlsRound(port, b, ctx);
    for (int fd : held) ::close(fd);
  }
  const std::map<pid_t, int64_t> before = Rss();
  const auto start = std::chrono::steady_clock::now();
  int sessions = 0;
  for (const Port& port : Ports()) {
    std::vector<int> held;
    for (int i = 0; i < kRawRoundsPerPort; ++i) {
      RawRound(port, b, i, held);
      if (port.tls && i % 3 == 0) sessions += TlsRound(port, b, ctx);
    }
    for (int fd : held) ::close(fd);
    ASSERT_TRUE(Alive(port.pid)) << port.name << " died";
  }
  std::printf(
      "raw and TLS barrage: %d rounds on each of %zu ports, %d TLS sessions carrying "
      "garbage frames, in %.1f s\n",
      kRawRoundsPerPort, Ports().size(), sessions,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  SSL_CTX_free(ctx);
  // Most handshakes pass (the garbage is meant to reach HTTP/2, not only TLS).
  EXPECT_GT(sessions, kRawRoundsPerPort / 3);
  ExpectHealthy(before);
}

// The registry credentials the scheduler lists for kKnownTeam, through the admin token.
std::vector<v1::RegistryCredential> KnownTeamsCredentials(
    const std::shared_ptr<grpc::ChannelCredentials>& credentials, const std::string& addr) {
  auto stub = v1::RegistryService::NewStub(grpc::CreateChannel(addr, credentials));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  ctx.AddMetadata("authorization", "Bearer " + AdminToken().token);
  v1::ListRegistryCredentialsRequest req;
  req.set_team(kKnownTeam);
  v1::ListRegistryCredentialsResponse resp;
  grpc::Status s = stub->ListRegistryCredentials(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return {resp.credentials().begin(), resp.credentials().end()};
}

// Every registry secret in the database is sealed (no plaintext column set, no byte of
// kKnownSecret anywhere in a row) and opens with the scheduler's key for its own row.
void ExpectStoredRegistrySecretsSealed(const std::string& db_url) {
  auto box = LoadSecretsKey(SecretsKeyFile());
  ASSERT_TRUE(box.ok()) << box.status();
  pqxx::connection conn(db_url);
  pqxx::read_transaction tx(conn);
  int rows = 0;
  bool known = false;
  for (const auto& row : tx.exec("SELECT team, registry, plaintext_secret IS NULL, sealed_secret, "
                                 "t::text || coalesce(encode(sealed_secret, 'escape'), '') "
                                 "FROM registry_credentials t")) {
    ++rows;
    const std::string team = row[0].as<std::string>();
    const std::string registry = row[1].as<std::string>();
    EXPECT_TRUE(row[2].as<bool>()) << team << " " << registry << " is stored in plaintext";
    ASSERT_FALSE(row[3].is_null()) << team << " " << registry;
    EXPECT_EQ(row[4].as<std::string>().find(kKnownSecret), std::string::npos);
    auto opened =
        box->Open(pqxx::binarystring(row[3]).str(), scheduler::SealingContext(team, registry));
    EXPECT_TRUE(opened.ok()) << team << " " << registry << ": " << opened.status();
    if (team == kKnownTeam && registry == kKnownRegistry) {
      known = true;
      EXPECT_TRUE(opened.ok() && *opened == kKnownSecret);
    }
  }
  EXPECT_TRUE(known) << "the known credential is gone from the database (" << rows << " rows)";
}

TEST_F(HostileBytesTest, RandomMessagesIntoEveryRpcAreRefusedCleanly) {
  // Each file's descriptor is linked in through one of its messages.
  const std::vector<const pb::FileDescriptor*> files = {
      v1::SubmitJobRequest::descriptor()->file(),
      v1::CreateQueueRequest::descriptor()->file(),
      v1::CreateTokenRequest::descriptor()->file(),
      v1::CreateVolumeRequest::descriptor()->file(),
      v1::SetRegistryCredentialRequest::descriptor()->file(),
      v1::WorkerMessage::descriptor()->file(),
      v1::ExecRequest::descriptor()->file(),
      v1::SampleBatch::descriptor()->file()};
  const CertFiles client = TestCerts::Get().Client();
  auto credentials = MakeChannelCredentials(client.Options(), ServerName::kAnyOfTheCa);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  {
    auto stub = v1::RegistryService::NewStub(
        grpc::CreateChannel(cluster_->scheduler().addr(), *credentials));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    ctx.AddMetadata("authorization", "Bearer " + AdminToken().token);
    v1::SetRegistryCredentialRequest req;
    req.set_team(kKnownTeam);
    req.set_registry(kKnownRegistry);
    req.set_username(kKnownUser);
    req.set_secret(kKnownSecret);
    v1::RegistryCredential set;
    grpc::Status s = stub->SetRegistryCredential(&ctx, req, &set);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  WorkerProcess& worker = *cluster_->workers().front();
  // Which server serves which service.
  const std::map<std::string, std::string> servers = {
      {"ringmaster.v1.JobService", cluster_->scheduler().addr()},
      {"ringmaster.v1.QueueService", cluster_->scheduler().addr()},
      {"ringmaster.v1.VolumeService", cluster_->scheduler().addr()},
      {"ringmaster.v1.RegistryService", cluster_->scheduler().addr()},
      {"ringmaster.v1.ClusterService", cluster_->scheduler().addr()},
      {"ringmaster.v1.AdminService", cluster_->scheduler().addr()},
      {"ringmaster.v1.WorkerService", cluster_->scheduler().addr()},
      {"ringmaster.v1.WorkerAgent", worker.agent_addr()},
      {"ringmaster.v1.MetricsService", *metrics_addr_},
  };
  const std::map<pid_t, int64_t> before = Rss();
  Bytes b(424242);
  int methods = 0, calls = 0;
  std::map<grpc::StatusCode, int> codes;
  for (const pb::FileDescriptor* file : files) {
    for (int s = 0; s < file->service_count(); ++s) {
      const pb::ServiceDescriptor* service = file->service(s);
      auto server = servers.find(service->full_name());
      ASSERT_NE(server, servers.end()) << "no server known for " << service->full_name();
      auto channel = grpc::CreateChannel(server->second, *credentials);
      grpc::GenericStub stub(channel);
      for (int m = 0; m < service->method_count(); ++m) {
        const pb::MethodDescriptor* method = service->method(m);
        const std::string path = absl::StrCat("/", service->full_name(), "/", method->name());
        ++methods;
        const pb::Message* prototype =
            pb::MessageFactory::generated_factory()->GetPrototype(method->input_type());
        ASSERT_NE(prototype, nullptr) << path;
        for (int i = 0; i < kMessagesPerMethod; ++i) {
          std::string payload;
          if (i % 3 == 0) {
            payload = b.Random(2048);  // not a protobuf, or not this one
          } else {
            std::unique_ptr<pb::Message> msg(prototype->New());
            Fill(msg.get(), b, 0);
            payload = msg->SerializeAsString();
            if (i % 3 == 2 && !payload.empty()) payload.resize(b.Below(payload.size()));
          }
          // Most calls carry the admin token, so that they reach the handlers behind the
          // authorization check; the rest test that check.
          ++codes[Call(stub, path, payload, i % 4 == 3 ? "" : AdminToken().token)];
          ++calls;
        }
        // Nothing may have taken the server down (UNAVAILABLE would say so).
        v1::ListWorkersResponse workers;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 5s);
        ASSERT_TRUE(cluster_->scheduler().cluster().ListWorkers(&ctx, {}, &workers).ok())
            << "after " << path;
        ASSERT_TRUE(Alive(worker.process().pid())) << "after " << path;
        ASSERT_TRUE(Alive(metrics_->pid())) << "after " << path;
      }
    }
  }
  // Random submits may have left jobs behind (valid by chance): out of the way of the last job.
  for (const v1::Job& job : cluster_->LiveJobs()) (void)cluster_->Cancel(job.id());
  std::printf("%d calls into %d methods; status codes:", calls, methods);
  for (const auto& [code, n] : codes) std::printf(" %d x%d", static_cast<int>(code), n);
  std::printf("\n");
  EXPECT_GE(methods, 33);  // RegistryService's three included
  ExpectHealthy(before);
  // What was stored before the barrage is still there, listed without a problem.
  const std::vector<v1::RegistryCredential> known =
      KnownTeamsCredentials(*credentials, cluster_->scheduler().addr());
  ASSERT_EQ(known.size(), 1u);
  EXPECT_EQ(known[0].registry(), kKnownRegistry);
  EXPECT_EQ(known[0].username(), kKnownUser);
  EXPECT_EQ(known[0].problem(), "");
  ExpectStoredRegistrySecretsSealed(cluster_->db_url());
}

}  // namespace
}  // namespace ringmaster::test
