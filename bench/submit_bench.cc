// Durable submit throughput: C concurrent clients call SubmitJob on a running scheduler (each
// submit is committed to Postgres before it returns), then the same number of clients run
// single-row INSERTs against the same Postgres as the baseline. Prints jobs/s, p50/p99/mean
// latency and the ratio; --submit-only and --insert-only run one side (bench/submit_cpu.sh
// measures each one's CPU). Driven by bench/submit_bench.sh, which starts the servers.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/bearer_token.h"
#include "common/tls.h"
#include "ringmaster/v1/job.grpc.pb.h"

using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  double seconds = 0;
  std::vector<double> latencies_ms;
  int errors = 0;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

template <typename Op>
Result RunClients(int clients, int per_client, Op op) {
  Result r;
  std::vector<std::vector<double>> lat(clients);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto state = op.Open(c);
      for (int i = 0; i < per_client; ++i) {
        auto s = Clock::now();
        if (!op.Call(state, c, i)) ++errors;
        lat[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
      }
    });
  }
  for (auto& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& l : lat) r.latencies_ms.insert(r.latencies_ms.end(), l.begin(), l.end());
  r.errors = errors;
  return r;
}

struct SubmitOp {
  std::shared_ptr<grpc::Channel> channel;
  std::string run;
  std::unique_ptr<ringmaster::v1::JobService::Stub> Open(int) const {
    return ringmaster::v1::JobService::NewStub(channel);
  }
  bool Call(std::unique_ptr<ringmaster::v1::JobService::Stub>& stub, int c, int i) const {
    grpc::ClientContext ctx;
    ringmaster::v1::SubmitJobRequest req;
    req.set_request_id(absl::StrCat(run, "-", c, "-", i));
    auto* spec = req.mutable_spec();
    spec->set_name("bench");
    spec->set_replicas(4);
    spec->set_gpus_per_replica(1);
    spec->set_gpu_type("t4");
    spec->mutable_trainer()->set_steps(100);
    ringmaster::v1::SubmitJobResponse resp;
    grpc::Status status = stub->SubmitJob(&ctx, req, &resp);
    if (!status.ok()) {
      // The first refusal says why a run failed, without a line per error.
      static std::once_flag once;
      std::call_once(once, [&] {
        std::fprintf(stderr, "first error: %s (code %d)\n", status.error_message().c_str(),
                     static_cast<int>(status.error_code()));
      });
    }
    return status.ok() && !resp.existing();
  }
};

struct InsertOp {
  std::string url;
  std::unique_ptr<pqxx::connection> Open(int) const {
    auto conn = std::make_unique<pqxx::connection>(url);
    conn->prepare("ins", "INSERT INTO bench_insert (client, i, payload) VALUES ($1, $2, $3)");
    return conn;
  }
  bool Call(std::unique_ptr<pqxx::connection>& conn, int c, int i) const {
    try {
      pqxx::work tx(*conn);
      tx.exec_prepared("ins", c, i, std::string(200, 'x'));
      tx.commit();
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }
};

void Print(const char* what, int n, const Result& r) {
  double sum = 0;
  for (double ms : r.latencies_ms) sum += ms;
  const double mean = r.latencies_ms.empty() ? 0 : sum / static_cast<double>(r.latencies_ms.size());
  std::printf(
      "  %-34s %8.0f /s   p50 %6.2f ms   p99 %6.2f ms   mean %6.2f ms   (%d in %.2f s, %d errors)\n",
      what, n / r.seconds, Percentile(r.latencies_ms, 0.50), Percentile(r.latencies_ms, 0.99), mean,
      n, r.seconds, r.errors);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 6 ? argv[5] : "";
  if (argc != 5 && !(argc == 6 && (mode == "--submit-only" || mode == "--insert-only"))) {
    std::fprintf(stderr,
                 "usage: submit_bench SCHEDULER_ADDR POSTGRES_URL CLIENTS JOBS "
                 "[--submit-only | --insert-only]\n"
                 "  TLS from RINGMASTER_TLS_CA (and _CERT, _KEY), or RINGMASTER_INSECURE=1;\n"
                 "  bearer token from RINGMASTER_TOKEN\n");
    return 2;
  }
  const bool submit_only = mode == "--submit-only";
  const bool insert_only = mode == "--insert-only";
  int clients = 0, jobs = 0;
  if (!absl::SimpleAtoi(argv[3], &clients) || !absl::SimpleAtoi(argv[4], &jobs) || clients < 1 ||
      jobs < clients) {
    std::fprintf(stderr, "CLIENTS and JOBS must be positive integers, JOBS >= CLIENTS\n");
    return 2;
  }
  const int per_client = jobs / clients;
  const int n = per_client * clients;

  const ringmaster::TlsOptions tls = ringmaster::TlsOptionsFromEnvironment();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ringmaster::MakeChannelCredentials(tls);
  if (!credentials.ok()) {
    std::fprintf(stderr, "%s\n", std::string(credentials.status().message()).c_str());
    return 2;
  }
  // The bearer token from RINGMASTER_TOKEN (or the user's token file); none in the plaintext
  // baseline, whose scheduler runs --insecure-no-auth.
  auto channel =
      ringmaster::CreateChannelWithToken(argv[1], *credentials, ringmaster::ResolveBearerToken(""));
  std::string run =
      absl::StrCat("bench-", std::chrono::system_clock::now().time_since_epoch().count());
  SubmitOp submit{channel, run};
  Result submitted;
  if (!insert_only) {
    // Warm-up: connections, prepared statements, the first pages of the tables.
    RunClients(clients, 20, SubmitOp{channel, run + "-warm"});
    submitted = RunClients(clients, per_client, submit);
  }
  if (submit_only) {
    std::printf("durable submit benchmark (%s): %d clients, %d submits\n",
                tls.insecure ? "plaintext" : "TLS", clients, n);
    Print("SubmitJob via gRPC (committed):", n, submitted);
    return submitted.errors > 0 ? 1 : 0;
  }

  {
    pqxx::connection conn(argv[2]);
    pqxx::work tx(conn);
    tx.exec("DROP TABLE IF EXISTS bench_insert");
    tx.exec("CREATE TABLE bench_insert (id bigserial PRIMARY KEY, client int, i int, payload text)");
    tx.commit();
  }
  InsertOp insert{argv[2]};
  RunClients(clients, 20, insert);
  Result inserted = RunClients(clients, per_client, insert);
  if (insert_only) {
    std::printf("single-row INSERT benchmark: %d clients, %d inserts\n", clients, n);
    Print("single-row INSERT (same Postgres):", n, inserted);
    return inserted.errors > 0 ? 1 : 0;
  }

  std::printf("durable submit benchmark: %d clients, %d operations each way\n", clients, n);
  Print("SubmitJob via gRPC (committed):", n, submitted);
  Print("single-row INSERT (same Postgres):", n, inserted);
  std::printf("  ratio submit/INSERT throughput:    %.2f\n",
              (n / submitted.seconds) / (n / inserted.seconds));
  std::printf("  for reference (published, not measured here): Kubernetes scheduler CI threshold "
              "680 pods/s, Slurm 500 jobs/s sustained\n");
  return submitted.errors + inserted.errors > 0 ? 1 : 0;
}
