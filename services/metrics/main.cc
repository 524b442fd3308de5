// ringmaster-metrics: flags and wiring only. Ingests throughput samples from running rings
// (gRPC) and serves them to Prometheus.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <prometheus/exposer.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "common/flags.h"
#include "common/job_token.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/tls.h"
#include "rpc/metrics_service.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int Fail(const std::string& message) {
  std::fprintf(stderr, "ringmaster-metrics: %s\n", message.c_str());
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace ringmaster;
  ringmaster::TurnOffAbslDeadlockDetection();
  Flags flags("ringmaster-metrics", "Throughput ingest of Ringmaster rings, for Prometheus.");
  flags.Add("listen", "0.0.0.0:7072", "gRPC ingest address");
  flags.Add("metrics-listen", "0.0.0.0:9466", "address of the Prometheus /metrics endpoint");
  flags.Add("series-ttl-s", "300", "a job's series go away this long after its last sample");
  flags.Add("max-jobs", "1000", "jobs with live series at most; samples of more are dropped");
  flags.Add("max-ranks", "65536", "ranks with live series at most, over all jobs");
  flags.Add("max-streams", "4096",
            "ingest streams served at once (every rank of a running job holds one); more are "
            "RESOURCE_EXHAUSTED at once. 1..1000000");
  AddTlsFlags(flags);
  if (auto s = flags.Parse(argc, argv); !s.ok()) return Fail(std::string(s.message()));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  int64_t ttl_s = 0, max_jobs = 0, max_ranks = 0, max_streams = 0;
  for (auto s : {flags.GetInt("series-ttl-s", &ttl_s), flags.GetInt("max-jobs", &max_jobs),
                 flags.GetInt("max-ranks", &max_ranks),
                 flags.GetInt("max-streams", &max_streams)}) {
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  if (ttl_s < 1 || max_jobs < 1 || max_ranks < 1) {
    return Fail("--series-ttl-s, --max-jobs and --max-ranks must be positive");
  }
  if (max_streams < 1 || max_streams > 1'000'000) return Fail("--max-streams must be 1..1000000");
  absl::StatusOr<TlsOptions> tls = TlsOptionsFromFlags(flags);
  if (!tls.ok()) return Fail(std::string(tls.status().message()));
  // Ranks stream here, and a rank runs a team's program: it gets the CA to check this server,
  // not the worker's own certificate, so a client certificate is verified when given but not
  // required (docs/security.md).
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(
      *tls, ClientCertificates::kVerifyIfPresent, "--listen", flags.Get("listen"));
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
  if (tls->insecure) WarnInsecure("ringmaster-metrics");
  metrics::Limits limits{ttl_s * 1000, static_cast<size_t>(max_jobs),
                         static_cast<size_t>(max_ranks)};
  metrics::MetricsState state(limits, [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  });

  auto exposition = std::make_shared<metrics::Exposition>(&state);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(flags.Get("metrics-listen"));
    exposer->RegisterCollectable(exposition);
  } catch (const std::exception& e) {
    return Fail("cannot serve /metrics on " + flags.Get("metrics-listen") + ": " + e.what());
  }

  // Ranks prove their job with a token their worker signed; the CA is all it takes to check.
  std::optional<JobTokenVerifier> tokens;
  if (!tls->insecure) {
    std::ifstream in(tls->ca_file);
    std::stringstream ca;
    ca << in.rdbuf();
    absl::StatusOr<JobTokenVerifier> verifier = JobTokenVerifier::FromCaPem(ca.str());
    if (!verifier.ok()) return Fail("--tls-ca: " + std::string(verifier.status().message()));
    tokens = std::move(*verifier);
  }
  metrics::MetricsServiceImpl service(&state, static_cast<int>(max_streams), std::move(tokens));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(flags.Get("listen"), *credentials, &port);
  builder.RegisterService(&service);
  // The streams hold no thread (callback API, bounded by --max-streams in the service); the
  // unary DeclareBaseline holds one while it runs, and without a bound gRPC would start one
  // for every call that finds none idle.
  grpc::ResourceQuota quota("ringmaster-metrics");
  quota.SetMaxThreads(64);
  builder.SetResourceQuota(quota);
  auto server = builder.BuildAndStart();
  if (!server || port == 0) return Fail("cannot listen on " + flags.Get("listen"));
  RM_LOG(kInfo) << "ringmaster-metrics ingesting" << (tls->insecure ? " in PLAINTEXT" : " over TLS")
                << " on " << flags.Get("listen") << ", /metrics on "
                << flags.Get("metrics-listen");
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
