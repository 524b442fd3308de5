// AsideWriter: the round trips a worker's stream must not wait on: its heartbeat's liveness key
// (Redis) and a check baseline its check taught us (Postgres). The streams are served by
// gRPC's few callback threads, so a hung Redis would otherwise stall every worker's messages.
//
// It owns the due beats, kept by worker (a slow Redis lets them pile up by worker, not by
// heartbeat), and the due baselines, in order.
//
// Threads: one, the aside thread (Start to Stop), which does them in order; without background
// work (tests: no loop thread) there is none and they are done inline, on the caller's thread.
// Locks: mu_ guards what is due, and is held across nothing else.
#ifndef RINGMASTER_SERVICES_SCHEDULER_ASIDE_WRITER_H_
#define RINGMASTER_SERVICES_SCHEDULER_ASIDE_WRITER_H_

#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "core/health_check.h"
#include "store/coordination.h"
#include "store/job_store.h"

namespace ringmaster::scheduler {

class AsideWriter {
 public:
  // The stores must outlive the writer. `background`: a thread does the writes; else inline.
  AsideWriter(JobStore* store, Liveness* liveness, int64_t heartbeat_timeout_ms, bool background);
  ~AsideWriter() { Stop(); }
  AsideWriter(const AsideWriter&) = delete;
  AsideWriter& operator=(const AsideWriter&) = delete;

  void Start();
  // A baseline learned before the stop is still stored; due beats are not (a hung Redis would
  // hold the stop a command timeout per worker, and a new leader re-beats).
  void Stop();

  // Renews the worker's liveness key (TTL = the heartbeat timeout).
  void Beat(const std::string& worker_id);
  void StoreBaseline(const CheckBaseline& baseline);

 private:
  void Loop();

  JobStore* const store_;
  Liveness* const liveness_;
  const int64_t heartbeat_timeout_ms_;
  const bool background_;
  Mutex mu_;
  CondVar cv_;
  std::set<std::string> beats_due_ ABSL_GUARDED_BY(mu_);
  std::deque<CheckBaseline> baselines_due_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_ASIDE_WRITER_H_
