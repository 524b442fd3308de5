// ringmaster-metrics as a real process: ingest over gRPC (batches, and the one-sample messages
// of older clients), scrape over HTTP, hostile input, and the trainer's MetricsReporter
// streaming to it.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/job_token.h"
#include "common/net.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/metrics.grpc.pb.h"
#include "support/http_get.h"
#include "support/subprocess.h"
#include "support/test_certs.h"
#include "support/wait_for.h"
#include "trainer/metrics_reporter.h"
#include "worker/host/file_io.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

int64_t RssKib(pid_t pid) { return ProcStatusNumber(pid, "VmRSS:"); }

v1::Sample MakeSample(const std::string& job, int rank, double ips) {
  v1::Sample s;
  s.set_job_id(job);
  s.set_rank(rank);
  s.set_world_size(2);
  s.set_queue("default");
  s.set_model("mlp");
  s.set_gpu_type("t4");
  s.set_worker_id("w1");
  s.set_step(5);
  s.set_step_seconds(0.05);
  s.set_samples_per_second(ips);
  s.set_allreduce_bytes(4e6);
  s.set_allreduce_seconds(0.004);
  s.set_loss(2.0);
  return s;
}

// What worker `signer` gives the ranks of `job` (common/job_token.h).
std::string JobTokenFrom(const CertFiles& signer, const std::string& job) {
  absl::StatusOr<std::string> token =
      SignJobToken(job, worker::ReadFileToString(signer.cert).value_or(""),
                   worker::ReadFileToString(signer.key).value_or(""));
  EXPECT_TRUE(token.ok()) << token.status();
  return token.value_or("");
}

class MetricsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { StartService({}); }

  void StartService(const std::vector<std::string>& extra_flags) {
    auto grpc_port = PickFreePort();
    auto http_port = PickFreePort();
    ASSERT_TRUE(grpc_port.ok() && http_port.ok());
    http_port_ = *http_port;
    addr_ = absl::StrCat("127.0.0.1:", *grpc_port);
    std::vector<std::string> argv = {
        RINGMASTER_BINARY_DIR "/services/metrics/ringmaster-metrics", "--listen", addr_,
        "--metrics-listen", absl::StrCat("127.0.0.1:", http_port_), "--max-jobs",
        std::to_string(kMaxJobs), "--tls-cert=" + TestCerts::Get().Metrics().cert,
        "--tls-key=" + TestCerts::Get().Metrics().key, "--tls-ca=" + TestCerts::Get().ca()};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    auto p = Subprocess::Start(argv);
    // The trainer's MetricsReporter finds the CA and its job token where a worker puts them
    // for its ranks.
    setenv(kTlsCaEnv, TestCerts::Get().ca().c_str(), 1);
    setenv(kJobTokenEnv, JobTokenFrom(TestCerts::Get().Worker("w1"), "j-00cc").c_str(), 1);
    ASSERT_TRUE(p.ok()) << p.status();
    process_ = *std::move(p);
    ASSERT_TRUE(WaitFor([&] { return !HttpGet(http_port_, "/metrics").empty(); }, 10s))
        << process_->LogTail();
    // As a platform component, with a certificate of the CA: it may send any job's samples,
    // which the tests of decoding and bounds need. Ranks have the CA alone and a job token
    // (rank_stub_; the tests of job tokens below).
    auto channel =
        grpc::CreateChannel(addr_, *MakeChannelCredentials(TestCerts::Get().Client().Options()));
    // /metrics answers before the gRPC server is up: wait for both.
    ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + 10s))
        << process_->LogTail();
    stub_ = v1::MetricsService::NewStub(channel);
    rank_stub_ = v1::MetricsService::NewStub(
        grpc::CreateChannel(addr_, *MakeChannelCredentials(TestCerts::Get().CaOnly())));
  }

  // One IngestBatches stream of a rank (the CA only) with `token` (none when empty), one batch
  // per sample; the stream's status.
  grpc::Status SendAsRank(const std::string& token, const std::vector<v1::Sample>& samples,
                          v1::IngestResponse* resp) {
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata(kJobTokenMetadata, token);
    auto writer = rank_stub_->IngestBatches(&ctx, resp);
    for (const v1::Sample& sample : samples) {
      v1::SampleBatch batch;
      *batch.add_samples() = sample;
      if (!writer->Write(batch)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // One IngestBatches stream carrying `samples` in batches of `batch_size`.
  v1::IngestResponse Send(const std::vector<v1::Sample>& samples, size_t batch_size = 1024) {
    grpc::ClientContext ctx;
    v1::IngestResponse resp;
    auto writer = stub_->IngestBatches(&ctx, &resp);
    for (size_t i = 0; i < samples.size(); i += batch_size) {
      v1::SampleBatch batch;
      for (size_t j = i; j < std::min(samples.size(), i + batch_size); ++j) {
        *batch.add_samples() = samples[j];
      }
      EXPECT_TRUE(writer->Write(batch));
    }
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return resp;
  }

  // The value of an unlabelled series in /metrics; -1 when absent.
  double Scraped(const std::string& series) {
    const std::string text = HttpGet(http_port_, "/metrics");
    const size_t at = text.find("\n" + series + " ");
    double value = -1;
    if (at == std::string::npos) return value;
    const size_t begin = at + series.size() + 2;
    if (!absl::SimpleAtod(text.substr(begin, text.find('\n', begin) - begin), &value)) return -1;
    return value;
  }

  static constexpr int kMaxJobs = 2000;
  int http_port_ = 0;
  std::string addr_;
  std::unique_ptr<Subprocess> process_;
  std::unique_ptr<v1::MetricsService::Stub> stub_;
  std::unique_ptr<v1::MetricsService::Stub> rank_stub_;
};

TEST_F(MetricsServiceTest, ExposesJobAndRankThroughputStepTimeBandwidthAndLoss) {
  v1::IngestResponse r = Send({MakeSample("j-00aa", 0, 100), MakeSample("j-00aa", 1, 130)});
  EXPECT_EQ(r.accepted(), 2);
  std::string text = HttpGet(http_port_, "/metrics");
  const std::string job = "gpu_type=\"t4\",job_id=\"j-00aa\",model=\"mlp\",queue=\"default\"";
  EXPECT_THAT(text, HasSubstr("ringmaster_job_images_per_second{" + job + "} 230"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_images_per_second{" + job +
                              ",rank=\"1\",worker=\"w1\"} 130"));
  EXPECT_THAT(text, HasSubstr("ringmaster_step_time_seconds_count{" + job + "} 2"));
  EXPECT_THAT(text, HasSubstr("ringmaster_step_time_seconds_bucket{" + job + ",le=\"0.05\"} 2"));
  // 4 MB in 4 ms = 1e9 B/s algbw; x 2(n-1)/n = 1 for two ranks.
  EXPECT_THAT(text, HasSubstr("ringmaster_allreduce_bus_bandwidth_bytes_per_second{" + job +
                              "} 1000000000"));
  EXPECT_THAT(text, HasSubstr("ringmaster_loss{" + job + "} 2"));

  grpc::ClientContext ctx;
  v1::Baseline baseline;
  baseline.set_model("mlp");
  baseline.set_gpu_type("t4");
  baseline.set_samples_per_second(125);
  v1::DeclareBaselineResponse resp;
  ASSERT_TRUE(stub_->DeclareBaseline(&ctx, baseline, &resp).ok());
  EXPECT_THAT(HttpGet(http_port_, "/metrics"),
              HasSubstr("ringmaster_scaling_efficiency{" + job + "} 0.92"));
  grpc::ClientContext bad_ctx;
  baseline.set_samples_per_second(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(stub_->DeclareBaseline(&bad_ctx, baseline, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(MetricsServiceTest, HostileInputIsDroppedAndMemoryStaysBounded) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<v1::Sample> bad;
  auto with = [&](auto mutate) {
    v1::Sample s = MakeSample("j-00aa", 0, 1);
    mutate(s);
    bad.push_back(s);
  };
  with([&](v1::Sample& s) { s.set_samples_per_second(nan); });
  with([&](v1::Sample& s) { s.set_step_seconds(-1); });
  with([&](v1::Sample& s) { s.set_samples_per_second(1e300); });
  with([&](v1::Sample& s) { s.set_loss(std::numeric_limits<double>::infinity()); });
  with([&](v1::Sample& s) { s.set_queue(std::string(1 << 20, 'q')); });
  with([&](v1::Sample& s) { s.set_job_id("'; DROP TABLE jobs; --"); });
  with([&](v1::Sample& s) { s.set_model("a\"b\nc"); });
  with([&](v1::Sample& s) { s.set_rank(-1); });
  with([&](v1::Sample& s) { s.set_world_size(1 << 30); });
  v1::IngestResponse r = Send(bad);
  EXPECT_EQ(r.accepted(), 0);
  EXPECT_EQ(r.dropped(), static_cast<int64_t>(bad.size()));

  const int64_t rss_before = RssKib(process_->pid());
  const int kFakeJobs = 100000;
  std::vector<v1::Sample> flood;
  flood.reserve(10000);
  int64_t accepted = 0, dropped = 0;
  for (int i = 0; i < kFakeJobs; ++i) {
    char id[32];
    std::snprintf(id, sizeof(id), "j-%012x", i);
    flood.push_back(MakeSample(id, 0, 1));
    if (flood.size() == 10000) {
      v1::IngestResponse part = Send(flood);
      accepted += part.accepted();
      dropped += part.dropped();
      flood.clear();
    }
  }
  EXPECT_EQ(accepted, kMaxJobs);
  EXPECT_EQ(dropped, kFakeJobs - kMaxJobs);
  ASSERT_TRUE(process_->Running()) << process_->LogTail();

  std::string text = HttpGet(http_port_, "/metrics");
  EXPECT_THAT(text, HasSubstr(absl::StrCat("ringmaster_metrics_active_jobs ", kMaxJobs)));
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
                        "ringmaster_metrics_samples_dropped_total{reason=\"too_many_jobs\"} ",
                        kFakeJobs - kMaxJobs)));
  EXPECT_THAT(text, HasSubstr("ringmaster_metrics_samples_dropped_total{reason=\"bad_value\"} 6"));
  const int64_t rss_after = RssKib(process_->pid());
  std::printf("metrics service RSS: %lld KiB before the flood, %lld KiB after %d fake jobs "
              "(%d kept), /metrics %zu bytes\n",
              static_cast<long long>(rss_before), static_cast<long long>(rss_after), kFakeJobs,
              kMaxJobs, text.size());
  // The stated bound (docs/metrics.md): under 64 MiB resident with the default caps' worth of
  // series; a leak of the refused 98,000 jobs would be far above it.
  EXPECT_LT(rss_after, 64 * 1024);
}

TEST_F(MetricsServiceTest, ABatchMixingGoodAndBadSamplesKeepsTheGoodOnesAndNamesTheFirstBadField) {
  v1::Sample bad_value = MakeSample("j-00aa", 1, 100);
  bad_value.set_step_seconds(-1);
  v1::Sample bad_label = MakeSample("j-00aa", 1, 100);
  bad_label.set_gpu_type("T4");
  v1::IngestResponse r =
      Send({MakeSample("j-00aa", 0, 100), bad_value, MakeSample("j-00aa", 1, 130), bad_label});
  EXPECT_EQ(r.accepted(), 2);
  EXPECT_EQ(r.dropped(), 2);
  EXPECT_EQ(r.first_error(),
            "batch 0: samples[1].step_seconds must be a finite number in [0, 86400], got -1");
  const std::string text = HttpGet(http_port_, "/metrics");
  EXPECT_THAT(text, HasSubstr("ringmaster_job_images_per_second{gpu_type=\"t4\",job_id=\"j-00aa\","
                              "model=\"mlp\",queue=\"default\"} 230"));
  EXPECT_THAT(text, HasSubstr("ringmaster_metrics_samples_dropped_total{reason=\"bad_value\"} 1"));
  EXPECT_THAT(text, HasSubstr("ringmaster_metrics_samples_dropped_total{reason=\"bad_label\"} 1"));
}

TEST_F(MetricsServiceTest, ABatchOverTheLimitEndsTheStreamWithInvalidArgumentAndEarlierOnesStay) {
  grpc::ClientContext ctx;
  v1::IngestResponse resp;
  auto writer = stub_->IngestBatches(&ctx, &resp);
  v1::SampleBatch first;
  *first.add_samples() = MakeSample("j-00aa", 0, 100);
  ASSERT_TRUE(writer->Write(first));
  v1::SampleBatch oversized;
  for (int i = 0; i < 1025; ++i) *oversized.add_samples() = MakeSample("j-00bb", 0, 1);
  writer->Write(oversized);  // may already see the stream closed; Finish says why
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "batch 1: samples: 1025 in one batch, at most 1024; nothing of this batch was kept "
            "(earlier batches of the stream were) (1 samples kept so far)");
  EXPECT_EQ(Scraped("ringmaster_metrics_samples_total"), 1);
  EXPECT_EQ(Scraped("ringmaster_metrics_active_jobs"), 1);
}

TEST_F(MetricsServiceTest, OneSampleMessagesOfOlderClientsAreStillValidatedAndKept) {
  grpc::ClientContext ctx;
  v1::IngestResponse resp;
  auto writer = stub_->Ingest(&ctx, &resp);
  v1::Sample bad = MakeSample("j-00aa", 1, 1);
  bad.set_rank(7);
  ASSERT_TRUE(writer->Write(MakeSample("j-00aa", 0, 100)));
  ASSERT_TRUE(writer->Write(bad));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(resp.accepted(), 1);
  EXPECT_EQ(resp.dropped(), 1);
  EXPECT_EQ(resp.first_error(), "sample 1: rank must be in 0..world_size-1 (0..1), got 7");
  EXPECT_EQ(Scraped("ringmaster_metrics_samples_total"), 1);
}

// Anyone who can reach the port has the CA: without a job token its samples could fill the
// service's --max-jobs with made-up jobs, and real jobs' samples would be dropped.
TEST_F(MetricsServiceTest, ARankWithoutAValidJobTokenIsRefusedAndNothingIsKept) {
  v1::IngestResponse resp;
  grpc::Status none = SendAsRank("", {MakeSample("j-00aa", 0, 100)}, &resp);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(none.error_message(), HasSubstr(kJobTokenEnv));
  grpc::Status foreign = SendAsRank(JobTokenFrom(TestCerts::Foreign().Worker("w1"), "j-00aa"),
                                    {MakeSample("j-00aa", 0, 100)}, &resp);
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(foreign.error_message(), HasSubstr("not one of the cluster's CA"));
  grpc::Status junk = SendAsRank("rmj1.not.a.token", {MakeSample("j-00aa", 0, 100)}, &resp);
  EXPECT_EQ(junk.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(resp.accepted(), 0);
  EXPECT_THAT(HttpGet(http_port_, "/metrics"), Not(HasSubstr("j-00aa")));
}

TEST_F(MetricsServiceTest, AJobTokenAdmitsItsOwnJobsSamplesAndNoOtherJobs) {
  const std::string token = JobTokenFrom(TestCerts::Get().Worker("w2"), "j-00aa");
  v1::IngestResponse resp;
  grpc::Status ok =
      SendAsRank(token, {MakeSample("j-00aa", 0, 100), MakeSample("j-00aa", 1, 50)}, &resp);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(resp.accepted(), 2);
  v1::IngestResponse mixed;
  grpc::Status other =
      SendAsRank(token, {MakeSample("j-00aa", 0, 100), MakeSample("j-00bb", 0, 7)}, &mixed);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(other.error_message(), HasSubstr("of job 'j-00bb'"));
  const std::string text = HttpGet(http_port_, "/metrics");
  EXPECT_THAT(text, HasSubstr("job_id=\"j-00aa\""));
  EXPECT_THAT(text, Not(HasSubstr("j-00bb")));
  EXPECT_EQ(Scraped("ringmaster_metrics_samples_total"), 3);
}

TEST_F(MetricsServiceTest, OnlyACertificateOfTheCaDeclaresABaseline) {
  v1::Baseline baseline;
  baseline.set_model("mlp");
  baseline.set_gpu_type("t4");
  baseline.set_samples_per_second(125);
  v1::DeclareBaselineResponse resp;
  grpc::ClientContext as_rank;
  as_rank.AddMetadata(kJobTokenMetadata, JobTokenFrom(TestCerts::Get().Worker("w1"), "j-00aa"));
  EXPECT_EQ(rank_stub_->DeclareBaseline(&as_rank, baseline, &resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext as_service;
  EXPECT_TRUE(stub_->DeclareBaseline(&as_service, baseline, &resp).ok());
}

trainer::ReportLabels ReporterLabels() {
  return {"j-00cc", 0, 0, 1, "default", "mlp", "t4", "w1"};
}

TEST_F(MetricsServiceTest, ReporterFlushesAFullBatchWithoutWaitingForTheInterval) {
  // An interval no test waits out: only a full batch can make the samples arrive.
  trainer::MetricsReporter reporter(addr_, ReporterLabels(),
                                    {.max_queue = 4096, .flush_samples = 8,
                                     .flush_interval = std::chrono::hours(1)});
  for (int step = 0; step < 8; ++step) reporter.Report({step, 0.01, 50, 0, 0, 1.0});
  EXPECT_TRUE(WaitFor([&] { return Scraped("ringmaster_metrics_samples_total") == 8; }, 10s));
  EXPECT_EQ(reporter.sent(), 8);
}

TEST_F(MetricsServiceTest, ReporterFlushesALoneSampleWithinTheInterval) {
  trainer::MetricsReporter reporter(addr_, ReporterLabels(),
                                    {.max_queue = 4096, .flush_samples = 256,
                                     .flush_interval = std::chrono::milliseconds(100)});
  reporter.Report({1, 0.01, 50, 0, 0, 1.0});
  // Far fewer than a batch: the interval alone sends it (the bound is loose for a loaded CI).
  EXPECT_TRUE(WaitFor([&] { return Scraped("ringmaster_metrics_samples_total") == 1; }, 10s));
  EXPECT_EQ(reporter.dropped(), 0);
}

TEST_F(MetricsServiceTest, ReporterSendsWhatIsQueuedWhenItStops) {
  {
    trainer::MetricsReporter reporter(addr_, ReporterLabels(),
                                      {.max_queue = 4096, .flush_samples = 1024,
                                       .flush_interval = std::chrono::hours(1)});
    for (int step = 0; step < 3000; ++step) reporter.Report({step, 0.01, 50, 0, 0, 1.0});
  }
  // The destructor drained the queue in batches of at most 1,024 before returning.
  EXPECT_EQ(Scraped("ringmaster_metrics_samples_total"), 3000);
}

// Past --max-streams a stream is turned away at once, so idle streams opened in a loop cannot
// grow the process without end.
class MetricsServiceStreamBoundTest : public MetricsServiceTest {
 protected:
  static constexpr int kMaxStreams = 16;
  void SetUp() override { StartService({"--max-streams", std::to_string(kMaxStreams)}); }
};

// Streams are on gRPC's callback API: an idle one holds no thread, and past --max-streams a new
// one is turned away at once.
TEST_F(MetricsServiceStreamBoundTest, IdleStreamsPastTheBoundAreTurnedAwayAndNoneHoldsAThread) {
  const pid_t pid = process_->pid();
  const int64_t before = ProcStatusNumber(pid, "Threads:");
  constexpr int kStreams = 48;
  std::vector<grpc::Status> statuses(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      // Opened, one batch sent, then left idle until the deadline cuts it.
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 4s);
      v1::IngestResponse resp;
      auto writer = stub_->IngestBatches(&ctx, &resp);
      v1::SampleBatch batch;
      *batch.add_samples() = MakeSample(absl::StrCat("j-", 1000 + i), 0, 1);
      (void)writer->Write(batch);
      statuses[i] = writer->Finish();
    });
  }
  int64_t peak = before;
  for (int i = 0; i < 100; ++i) {  // 2 s, while every stream is open or refused
    peak = std::max(peak, ProcStatusNumber(pid, "Threads:"));
    std::this_thread::sleep_for(20ms);
  }
  for (std::thread& t : clients) t.join();
  int refused = 0, held = 0;
  for (const grpc::Status& s : statuses) {
    refused += s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    held += s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  }
  std::printf("%d idle streams under --max-streams %d: %d held, %d refused; threads %lld "
              "before, %lld at most\n",
              kStreams, kMaxStreams, held, refused, static_cast<long long>(before),
              static_cast<long long>(peak));
  EXPECT_EQ(held, kMaxStreams);
  EXPECT_EQ(refused, kStreams - kMaxStreams);
  // A few of gRPC's own threads at most; a thread per stream (the sync API) was 18 here.
  EXPECT_LT(peak - before, 8);
  // The held ones were cut by their deadlines: they count no more.
  EXPECT_TRUE(WaitFor(
      [&] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 2s);
        v1::IngestResponse resp;
        auto writer = stub_->IngestBatches(&ctx, &resp);
        v1::SampleBatch batch;
        *batch.add_samples() = MakeSample("j-0fff", 0, 1);
        (void)writer->Write(batch);
        writer->WritesDone();
        return writer->Finish().ok() && resp.accepted() == 1;
      },
      10s));
  ASSERT_TRUE(process_->Running()) << process_->LogTail();
}

}  // namespace
}  // namespace ringmaster::test
