// A burst of trivial one-rank jobs through a running cluster: C clients submit N jobs of `true`
// (one rank, one GPU of type t4, each with its own request id and the label burst=RUN), and
// the bench waits until none of them is live. Prints the rate from the first submit to the
// last end, the submit latencies, and how many ended in each state; exits 1 if any did not
// succeed. With --use-mpirun the jobs ask to start under mpirun (the spec's use_mpirun), the
// baseline bench/one_rank_burst.sh runs beside the default (started directly).
// Usage: one_rank_burst SCHEDULER CLIENTS JOBS RUN [--use-mpirun]   (plaintext, no token)
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ringmaster/v1/job.grpc.pb.h"

namespace v1 = ringmaster::v1;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Whether any job of the run is still PENDING, STARTING or RUNNING (one row asked per state).
bool AnyLive(v1::JobService::Stub& stub, const std::string& run) {
  for (v1::JobState state :
       {v1::JOB_STATE_PENDING, v1::JOB_STATE_STARTING, v1::JOB_STATE_RUNNING}) {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    req.set_state(state);
    req.set_limit(1);
    req.set_label_selector(absl::StrCat("burst=", run));
    v1::ListJobsResponse resp;
    if (!stub.ListJobs(&ctx, req, &resp).ok() || resp.jobs_size() > 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int clients = 0, jobs = 0;
  if (argc < 5 || !absl::SimpleAtoi(argv[2], &clients) || !absl::SimpleAtoi(argv[3], &jobs) ||
      clients < 1 || jobs < 1) {
    std::fprintf(stderr, "usage: one_rank_burst SCHEDULER CLIENTS JOBS RUN [--use-mpirun]\n");
    return 2;
  }
  const std::string target = argv[1], run = argv[4];
  const bool use_mpirun = argc > 5 && std::string(argv[5]) == "--use-mpirun";
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = v1::JobService::NewStub(channel);

  std::vector<std::string> ids(jobs);
  std::vector<double> latencies_ms(jobs, 0);
  std::atomic<int> next{0}, errors{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto client = v1::JobService::NewStub(channel);
      for (int i = next++; i < jobs; i = next++) {
        v1::SubmitJobRequest req;
        req.set_request_id(absl::StrCat("burst-", run, "-", i));
        v1::JobSpec* spec = req.mutable_spec();
        spec->set_name("burst");
        spec->set_replicas(1);
        spec->set_gpus_per_replica(1);
        spec->set_gpu_type("t4");
        spec->mutable_command()->add_argv("true");
        spec->set_use_mpirun(use_mpirun);
        (*spec->mutable_labels())["burst"] = run;
        const Clock::time_point t0 = Clock::now();
        for (int tries = 0;; ++tries) {  // the same request id: a retry makes no second job
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          v1::SubmitJobResponse resp;
          grpc::Status s = client->SubmitJob(&ctx, req, &resp);
          if (s.ok()) {
            ids[i] = resp.job().id();
            break;
          }
          if (tries == 5) {
            std::fprintf(stderr, "submit %d: %s\n", i, s.error_message().c_str());
            ++errors;
            break;
          }
        }
        latencies_ms[i] = 1000 * Seconds(Clock::now() - t0);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double submitted_s = Seconds(Clock::now() - start);
  while (AnyLive(*stub, run)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double ended_s = Seconds(Clock::now() - start);

  std::map<std::string, int> states;
  for (const std::string& id : ids) {
    if (id.empty()) continue;
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id(id);
    v1::Job job;
    grpc::Status s = stub->GetJob(&ctx, req, &job);
    ++states[s.ok() ? v1::JobState_Name(job.state()) : "unreadable"];
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  std::printf(
      "%s: %d one-rank jobs of `true`, %d clients: submitted in %.2f s, all ended in %.2f s"
      ": %.1f jobs/s submit to end (submit p50 %.1f ms, p99 %.1f ms)\n",
      use_mpirun ? "under mpirun" : "direct", jobs, clients, submitted_s, ended_s, jobs / ended_s,
      latencies_ms[jobs / 2], latencies_ms[jobs * 99 / 100]);
  std::string summary;
  for (const auto& [state, n] : states) absl::StrAppend(&summary, " ", state, "=", n);
  std::printf("states:%s; submit errors: %d\n", summary.c_str(), errors.load());
  return errors == 0 && states.size() == 1 && states.count("JOB_STATE_SUCCEEDED") ? 0 : 1;
}
