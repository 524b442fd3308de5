// A real Prometheus scrapes a real run: scheduler, two workers on 127.0.0.2 and .3, the metrics
// service, and a 4-rank trainer job whose ranks stream samples. Checks the job's images/sec in
// Prometheus against the trainer's own `total images/sec`, and that every PromQL expression of
// every panel of every dashboard in dashboards/ returns at least one series (a new panel is
// checked without touching this test).
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/net.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/metrics.grpc.pb.h"
#include "support/cluster/cluster.h"
#include "support/http_get.h"
#include "support/subprocess.h"
#include "support/test_certs.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using namespace std::chrono_literals;

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// Every "expr" of every dashboard JSON file, with template variables widened to match all.
std::vector<std::pair<std::string, std::string>> DashboardQueries() {
  std::vector<std::pair<std::string, std::string>> out;
  const std::regex expr("\"expr\":\\s*\"((?:[^\"\\\\]|\\\\.)*)\"");
  for (const auto& entry : std::filesystem::directory_iterator(RINGMASTER_SOURCE_DIR "/dashboards")) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string body = text.str();
    for (std::sregex_iterator it(body.begin(), body.end(), expr), end; it != end; ++it) {
      std::string q = absl::StrReplaceAll((*it)[1].str(), {{"\\\"", "\""}, {"\\\\", "\\"}});
      q = absl::StrReplaceAll(q, {{"$job", ".*"}, {"$queue", ".*"}});
      out.emplace_back(entry.path().filename().string(), q);
    }
  }
  return out;
}

class PrometheusE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = Cluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);

    auto grpc_port = PickFreePort();
    auto http_port = PickFreePort();
    ASSERT_TRUE(grpc_port.ok() && http_port.ok());
    metrics_addr_ = absl::StrCat("127.0.0.1:", *grpc_port);
    metrics_http_ = *http_port;
    auto metrics = Subprocess::Start(
        {RINGMASTER_BINARY_DIR "/services/metrics/ringmaster-metrics", "--listen", metrics_addr_,
         "--metrics-listen", absl::StrCat("127.0.0.1:", metrics_http_),
         "--tls-cert=" + TestCerts::Get().Metrics().cert,
         "--tls-key=" + TestCerts::Get().Metrics().key, "--tls-ca=" + TestCerts::Get().ca()});
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = *std::move(metrics);

    for (const auto& [id, addr] : {std::pair{"w2", "127.0.0.2"}, std::pair{"w3", "127.0.0.3"}}) {
      WorkerConfig config;
      config.id = absl::StrCat(id, "-prom-", getpid());
      config.address = addr;
      config.simulated_gpus = 2;
      config.metrics_service = metrics_addr_;
      ASSERT_TRUE(cluster_->AddWorker(config).ok());
    }
    ASSERT_TRUE(cluster_->WaitWorkersReady(2).ok());

    // Prometheus scrapes everything once a second, with the job names the dashboards expect.
    auto prom_port = PickFreePort();
    ASSERT_TRUE(prom_port.ok());
    prom_port_ = *prom_port;
    std::string workers;
    for (auto& w : cluster_->workers()) {
      absl::StrAppend(&workers, workers.empty() ? "" : ", ", "'127.0.0.1:", w->metrics_port(), "'");
    }
    const std::string config_path = cluster_->dir() + "/prometheus.yml";
    std::ofstream(config_path) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                               << "scrape_configs:\n"
                               << "  - job_name: ringmaster-scheduler\n    static_configs:\n"
                               << "      - targets: ['127.0.0.1:" << cluster_->scheduler().metrics_port() << "']\n"
                               << "  - job_name: ringmaster-worker\n    static_configs:\n"
                               << "      - targets: [" << workers << "]\n"
                               << "  - job_name: ringmaster-metrics\n    static_configs:\n"
                               << "      - targets: ['127.0.0.1:" << metrics_http_ << "']\n";
    auto prom = Subprocess::Start({"prometheus", "--config.file=" + config_path,
                                   "--storage.tsdb.path=" + cluster_->dir() + "/prometheus-data",
                                   absl::StrCat("--web.listen-address=127.0.0.1:", prom_port_)});
    ASSERT_TRUE(prom.ok()) << prom.status();
    prometheus_ = *std::move(prom);
    ASSERT_TRUE(WaitFor([&] { return !HttpGet(prom_port_, "/-/ready").empty(); }, 30s))
        << prometheus_->LogTail();
  }

  // The JSON "result" of an instant query; empty when the query failed.
  std::string Query(const std::string& promql) {
    return HttpGet(prom_port_, "/api/v1/query?query=" + UrlEncode(promql));
  }
  static bool HasSeries(const std::string& response) {
    return response.find("\"status\":\"success\"") != std::string::npos &&
           response.find("\"result\":[]") == std::string::npos &&
           response.find("\"result\":[") != std::string::npos;
  }
  static std::optional<double> FirstValue(const std::string& response) {
    std::smatch m;
    static const std::regex value("\"value\":\\[[0-9.]+,\"([^\"]+)\"\\]");
    if (!std::regex_search(response, m, value)) return std::nullopt;
    double v = 0;
    if (!absl::SimpleAtod(m[1].str(), &v)) return std::nullopt;
    return v;
  }

  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<Subprocess> metrics_;
  std::unique_ptr<Subprocess> prometheus_;
  std::string metrics_addr_;
  int metrics_http_ = 0;
  int prom_port_ = 0;
};

TEST_F(PrometheusE2eTest, ThroughputMatchesTheTrainerAndEveryPanelHasData) {
  // The 1-rank throughput that scaling efficiency divides by, declared as an operator does:
  // with a certificate of the cluster's CA.
  auto stub = v1::MetricsService::NewStub(grpc::CreateChannel(
      metrics_addr_, *MakeChannelCredentials(TestCerts::Get().Client().Options())));
  grpc::ClientContext ctx;
  v1::Baseline baseline;
  baseline.set_model("mlp-small");
  baseline.set_gpu_type("t4");
  baseline.set_samples_per_second(500);
  v1::DeclareBaselineResponse resp;
  ASSERT_TRUE(stub->DeclareBaseline(&ctx, baseline, &resp).ok());

  v1::JobSpec spec;
  spec.set_name("prom-e2e");
  spec.set_queue("default");  // a queue that exists without being created
  spec.set_replicas(4);
  spec.set_gpus_per_replica(1);
  spec.set_gpu_type("t4");
  spec.mutable_trainer()->set_model("mlp-small");
  spec.mutable_trainer()->set_batch_size(32);
  spec.mutable_trainer()->set_steps(150);
  auto id = cluster_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  auto placed = cluster_->WaitPlaced(*id, 0);  // the placement is released when the job ends
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_GT(placed->placement_size(), 0);
  const v1::RankPlacement rank0 = placed->placement(0);
  v1::Job job = cluster_->WaitState(*id, v1::JOB_STATE_SUCCEEDED, 180s);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << cluster_->Logs();

  // The trainer's own figure, from rank 0's log on its worker.
  auto log = cluster_->RankLog(absl::StrCat(rank0.worker_address(), ":", rank0.worker_port()),
                               *id, 0);
  ASSERT_TRUE(log.ok()) << log.status();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(*log, m, std::regex("total images/sec: ([0-9.]+)"))) << *log;
  double trainer_ips = 0;
  ASSERT_TRUE(absl::SimpleAtod(m[1].str(), &trainer_ips));

  // Prometheus' figures once it has scraped the last samples. Rank 0's last sample is the
  // trainer's total over the world size (the same steps over the same clock), so it must match
  // closely (0.1%: the trainer prints two decimals): it proves the last sample came through.
  // The job's figure sums every rank's rate on its own clock, which a loaded host skews a
  // little (0.05% measured with two busy loops beside the test), so it gets 1%.
  const double world = static_cast<double>(spec.replicas());
  double prom_rank0 = 0;
  const std::string q0 = absl::StrCat("ringmaster_rank_images_per_second{job_id=\"", *id,
                                      "\",rank=\"0\"}");
  bool rank0_close = WaitFor(
      [&] {
        auto v = FirstValue(Query(q0));
        if (!v) return false;
        prom_rank0 = *v;
        return std::abs(prom_rank0 * world - trainer_ips) <= 0.001 * trainer_ips;
      },
      20s, 500ms);
  EXPECT_TRUE(rank0_close) << "Prometheus has rank 0 at " << prom_rank0 << " images/sec, x"
                           << world << " against the trainer's total " << trainer_ips;
  double prom_ips = 0;
  const std::string q = absl::StrCat("ringmaster_job_images_per_second{job_id=\"", *id, "\"}");
  bool close = WaitFor(
      [&] {
        auto v = FirstValue(Query(q));
        if (!v) return false;
        prom_ips = *v;
        return std::abs(prom_ips - trainer_ips) <= 0.01 * trainer_ips;
      },
      20s, 500ms);
  EXPECT_TRUE(close) << "Prometheus " << prom_ips << " images/sec vs the trainer's " << trainer_ips
                     << "; ranks: "
                     << Query(absl::StrCat("ringmaster_rank_images_per_second{job_id=\"", *id,
                                           "\"}"));
  std::printf(
      "trainer total images/sec %.2f, Prometheus %.2f (%.2f%% apart); rank 0 x %g: %.2f "
      "(%.3f%% apart)\n",
      trainer_ips, prom_ips, 100 * std::abs(prom_ips - trainer_ips) / trainer_ips, world,
      prom_rank0 * world, 100 * std::abs(prom_rank0 * world - trainer_ips) / trainer_ips);

  auto queries = DashboardQueries();
  ASSERT_GE(queries.size(), 10u);
  for (const auto& [file, promql] : queries) {
    std::string response;
    // Rates and increases need two scrapes of a series; give them a few seconds.
    bool has = WaitFor([&] { return HasSeries(response = Query(promql)); }, 15s, 500ms);
    EXPECT_TRUE(has) << file << ": " << promql << " returned no series: " << response;
  }
}

}  // namespace
}  // namespace ringmaster::test
