// Metrics ingest: samples/s absorbed by a running ringmaster-metrics from 64 concurrent gRPC
// streams (IngestBatches, BATCH samples per message, as the trainer flushes them), next to the
// rate of the same validation and bookkeeping in-process (JobMetrics::Add, no gRPC) measured
// in the same run as the baseline; then /metrics scrape time and size with 1,024 active ranks.
// Prints figures. Driven by bench/metrics_bench.sh, which starts the service.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "metrics/convert/sample_decode.h"
#include "metrics/core/job_metrics.h"
#include "ringmaster/v1/metrics.grpc.pb.h"

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kStreams = 64;
constexpr int kRanksPerStream = 16;  // 64 x 16 = 1,024 active ranks

std::string JobId(int stream) {
  char id[32];
  std::snprintf(id, sizeof(id), "j-%012x", 0xbe000 + stream);
  return id;
}

const std::vector<std::string>& JobIds() {
  static const auto* ids = [] {
    auto* v = new std::vector<std::string>;
    for (int s = 0; s < kStreams; ++s) v->push_back(JobId(s));
    return v;
  }();
  return *ids;
}

const std::vector<std::string>& WorkerIds() {
  static const auto* ids = [] {
    auto* v = new std::vector<std::string>;
    for (int w = 0; w < 8; ++w) v->push_back("w" + std::to_string(w));
    return v;
  }();
  return *ids;
}

ringmaster::metrics::SampleIn MakeSample(int stream, int i) {
  ringmaster::metrics::SampleIn s;
  s.job_id = JobIds()[stream];
  s.rank = i % kRanksPerStream;
  s.world_size = kRanksPerStream;
  s.queue = "bench";
  s.model = "mlp";
  s.gpu_type = "t4";
  s.worker_id = WorkerIds()[stream % 8];
  s.step = i / kRanksPerStream;
  s.step_seconds = 0.01 + 0.001 * (i % 7);
  s.samples_per_second = 1000 + i % 100;
  s.allreduce_bytes = 4e6;
  s.allreduce_seconds = 0.002;
  s.loss = 2.0;
  return s;
}

void ToProto(const ringmaster::metrics::SampleIn& s, ringmaster::v1::Sample* p) {
  p->set_job_id(s.job_id.data(), s.job_id.size());
  p->set_rank(s.rank);
  p->set_world_size(s.world_size);
  p->set_queue(s.queue.data(), s.queue.size());
  p->set_model(s.model.data(), s.model.size());
  p->set_gpu_type(s.gpu_type.data(), s.gpu_type.size());
  p->set_worker_id(s.worker_id.data(), s.worker_id.size());
  p->set_step(s.step);
  p->set_step_seconds(s.step_seconds);
  p->set_samples_per_second(s.samples_per_second);
  p->set_allreduce_bytes(s.allreduce_bytes);
  p->set_allreduce_seconds(s.allreduce_seconds);
  p->set_loss(s.loss);
}

// Returns the body size; -1 on failure.
long Scrape(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  long total = -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    if (write(fd, req, sizeof(req) - 1) > 0) {
      total = 0;
      char buf[65536];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) total += n;
    }
  }
  close(fd);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  int per_stream = 0, http_port = 0, batch_size = 256;
  if ((argc != 4 && argc != 5) || !absl::SimpleAtoi(argv[2], &http_port) ||
      !absl::SimpleAtoi(argv[3], &per_stream) || per_stream < kRanksPerStream ||
      (argc == 5 && (!absl::SimpleAtoi(argv[4], &batch_size) || batch_size < 1 ||
                     batch_size > ringmaster::metrics::kMaxSamplesPerBatch))) {
    std::fprintf(stderr,
                 "usage: metrics_bench GRPC_ADDR HTTP_PORT SAMPLES_PER_STREAM(>=16) "
                 "[BATCH(1..%d, default 256)]\n",
                 ringmaster::metrics::kMaxSamplesPerBatch);
    return 2;
  }
  const int64_t total = static_cast<int64_t>(kStreams) * per_stream;

  // Baseline: the same samples through the service's bookkeeping, in this process.
  ringmaster::metrics::JobMetrics local(ringmaster::metrics::Limits{});
  std::vector<ringmaster::metrics::SampleIn> samples;
  for (int i = 0; i < per_stream; ++i) samples.push_back(MakeSample(0, i));
  auto t0 = Clock::now();
  for (int s = 0; s < kStreams; ++s) {
    for (auto& sample : samples) {
      sample.job_id = JobIds()[s];
      local.Add(sample, 0);
    }
  }
  const double local_s = std::chrono::duration<double>(Clock::now() - t0).count();

  auto channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    std::fprintf(stderr, "cannot reach ringmaster-metrics at %s\n", argv[1]);
    return 1;
  }
  std::vector<std::thread> threads;
  std::vector<int64_t> accepted(kStreams, 0);
  t0 = Clock::now();
  for (int s = 0; s < kStreams; ++s) {
    threads.emplace_back([&, s] {
      auto stub = ringmaster::v1::MetricsService::NewStub(channel);
      grpc::ClientContext ctx;
      ringmaster::v1::IngestResponse resp;
      auto writer = stub->IngestBatches(&ctx, &resp);
      // One message reused: its cleared samples keep their strings, as a long-lived client's
      // would.
      ringmaster::v1::SampleBatch batch;
      for (int i = 0; i < per_stream;) {
        batch.Clear();
        for (int end = std::min(per_stream, i + batch_size); i < end; ++i) {
          ToProto(MakeSample(s, i), batch.add_samples());
        }
        if (!writer->Write(batch)) break;
      }
      writer->WritesDone();
      if (writer->Finish().ok()) accepted[s] = resp.accepted();
    });
  }
  for (auto& t : threads) t.join();
  const double grpc_s = std::chrono::duration<double>(Clock::now() - t0).count();
  int64_t kept = 0;
  for (int64_t a : accepted) kept += a;

  std::vector<double> scrape_ms;
  long bytes = 0;
  for (int i = 0; i < 20; ++i) {
    auto s0 = Clock::now();
    bytes = Scrape(http_port);
    scrape_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s0).count());
  }
  std::sort(scrape_ms.begin(), scrape_ms.end());

  std::printf("metrics ingest benchmark: %d concurrent streams, %lld samples, %d per message\n",
              kStreams, static_cast<long long>(total), batch_size);
  std::printf("  gRPC ingest (service):         %10.0f samples/s (%lld kept, %.2f s)\n",
              total / grpc_s, static_cast<long long>(kept), grpc_s);
  std::printf("  in-process bookkeeping (base): %10.0f samples/s\n", total / local_s);
  std::printf("  ratio service/in-process:      %10.3f\n", local_s / grpc_s);
  std::printf("  /metrics with %d active ranks: %ld bytes, scrape p50 %.1f ms, max %.1f ms\n",
              kStreams * kRanksPerStream, bytes, scrape_ms[scrape_ms.size() / 2],
              scrape_ms.back());
  return kept == total ? 0 : 1;
}
