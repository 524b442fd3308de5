// A simulated worker for benchmarks: one Connect stream over gRPC's callback API, so a single
// process drives a thousand workers on a few threads (the test harness's TestWorker spends two
// threads on each). It registers with N simulated GPUs, heartbeats when told to, and on every
// Assignment reports each of its ranks STARTED and then EXITED 0 at once, so capacity churns as
// fast as the scheduler can turn it over.
//
// Thread-safe: gRPC's callback threads and the caller's heartbeat thread call in concurrently.
#ifndef RINGMASTER_BENCH_BENCH_WORKER_H_
#define RINGMASTER_BENCH_BENCH_WORKER_H_

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "ringmaster/v1/worker.grpc.pb.h"

namespace ringmaster::bench {

class BenchWorker : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::SchedulerMessage> {
 public:
  // Called from a gRPC thread for every Assignment, before the rank reports are queued.
  using OnAssignment = std::function<void(const std::string& worker_id, const v1::Assignment&)>;

  BenchWorker(v1::WorkerService::Stub* stub, std::string id, int gpus, std::string gpu_type,
              OnAssignment on_assignment)
      : id_(std::move(id)), on_assignment_(std::move(on_assignment)) {
    v1::WorkerMessage reg;
    v1::RegisterWorker* r = reg.mutable_register_();
    r->set_worker_id(id_);
    r->set_address("127.0.0.1");
    r->set_port(7071);
    for (int i = 0; i < gpus; ++i) {
      v1::Gpu* g = r->add_gpus();
      g->set_index(i);
      g->set_type(gpu_type);
      g->set_memory_bytes(16LL << 30);
      g->set_simulated(true);
    }
    stub->async()->Connect(&ctx_, this);
    Send(std::move(reg));
    StartRead(&in_);
    StartCall();
  }

  void Heartbeat() {
    if (!registered()) return;
    v1::WorkerMessage msg;
    msg.mutable_heartbeat();
    Send(std::move(msg));
  }

  bool registered() {
    std::lock_guard<std::mutex> lock(mu_);
    return registered_ && !done_;
  }

  // Cancels the stream and waits until gRPC is done with this reactor.
  void Shutdown() {
    ctx_.TryCancel();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }

  // Waits until Registered arrived or the stream ended; true when registered.
  bool WaitRegistered() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return registered_ || done_; });
    return registered_ && !done_;
  }

  const std::string& id() const { return id_; }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    if (in_.has_registered()) {
      std::lock_guard<std::mutex> lock(mu_);
      registered_ = true;
      cv_.notify_all();
    } else if (in_.has_assignment()) {
      const v1::Assignment& a = in_.assignment();
      on_assignment_(id_, a);
      // As the worker does: the statuses queued at once go in one RankStatuses message.
      for (int kind : {v1::RankStatus::KIND_STARTED, v1::RankStatus::KIND_EXITED}) {
        v1::WorkerMessage msg;
        for (const v1::RankPlacement& r : a.placement()) {
          if (r.worker_id() != id_) continue;
          v1::RankStatus* s = msg.mutable_rank_statuses()->add_statuses();
          s->set_job_id(a.job_id());
          s->set_attempt(a.attempt());
          s->set_rank(r.rank());
          s->set_kind(static_cast<v1::RankStatus::Kind>(kind));
        }
        if (msg.has_rank_statuses()) Send(std::move(msg));
      }
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    const v1::WorkerMessage* next = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      out_.pop_front();
      if (!ok) out_.clear();
      if (out_.empty()) {
        writing_ = false;
      } else {
        next = &out_.front();
      }
    }
    if (next != nullptr) StartWrite(next);
  }

  void OnDone(const grpc::Status&) override {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

 private:
  // One write in flight at a time (the callback API's rule); the rest wait in out_, whose
  // front stays put until its OnWriteDone. StartWrite is called outside mu_: gRPC may run
  // OnWriteDone before it returns.
  void Send(v1::WorkerMessage msg) {
    const v1::WorkerMessage* first = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return;
      out_.push_back(std::move(msg));
      if (!writing_) {
        writing_ = true;
        first = &out_.front();
      }
    }
    if (first != nullptr) StartWrite(first);
  }

  const std::string id_;
  const OnAssignment on_assignment_;
  grpc::ClientContext ctx_;
  v1::SchedulerMessage in_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::WorkerMessage> out_;
  bool writing_ = false;
  bool registered_ = false;
  bool done_ = false;
};

}  // namespace ringmaster::bench

#endif  // RINGMASTER_BENCH_BENCH_WORKER_H_
