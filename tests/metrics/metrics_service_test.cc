// ringmaster-metrics as a real process: ingest over gRPC, scrape over HTTP, hostile input.
#include <grpcpp/grpcpp.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/metrics.grpc.pb.h"
#include "support/http_get.h"
#include "support/subprocess.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Resident memory of a process in KiB, from /proc.
int64_t RssKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kib = 0;
      std::string digits;
      for (char c : line) {
        if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
      }
      if (absl::SimpleAtoi(digits, &kib)) return kib;
    }
  }
  return -1;
}

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

class MetricsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto grpc_port = PickFreePort();
    auto http_port = PickFreePort();
    ASSERT_TRUE(grpc_port.ok() && http_port.ok());
    http_port_ = *http_port;
    addr_ = absl::StrCat("127.0.0.1:", *grpc_port);
    auto p = Subprocess::Start(
        {RINGMASTER_BINARY_DIR "/services/metrics/ringmaster-metrics", "--listen", addr_,
         "--metrics-listen", absl::StrCat("127.0.0.1:", http_port_), "--max-jobs",
         std::to_string(kMaxJobs)});
    ASSERT_TRUE(p.ok()) << p.status();
    process_ = *std::move(p);
    ASSERT_TRUE(WaitFor([&] { return !HttpGet(http_port_, "/metrics").empty(); }, 10s))
        << process_->LogTail();
    auto channel = grpc::CreateChannel(addr_, grpc::InsecureChannelCredentials());
    // /metrics answers before the gRPC server is up: wait for both.
    ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + 10s))
        << process_->LogTail();
    stub_ = v1::MetricsService::NewStub(channel);
  }

  v1::IngestResponse Send(const std::vector<v1::Sample>& samples) {
    grpc::ClientContext ctx;
    v1::IngestResponse resp;
    auto writer = stub_->Ingest(&ctx, &resp);
    for (const auto& s : samples) writer->Write(s);
    writer->WritesDone();
    EXPECT_TRUE(writer->Finish().ok());
    return resp;
  }

  static constexpr int kMaxJobs = 2000;
  int http_port_ = 0;
  std::string addr_;
  std::unique_ptr<Subprocess> process_;
  std::unique_ptr<v1::MetricsService::Stub> stub_;
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

}  // namespace
}  // namespace ringmaster::test
