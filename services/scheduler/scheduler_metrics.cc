#include "scheduler_metrics.h"

namespace ringmaster::scheduler {

namespace {
// Sub-millisecond stages on a fast disk, seconds while Postgres is away.
const prometheus::Histogram::BucketBoundaries kSubmitWaitBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.1, 1, 10};
}  // namespace

SchedulerMetrics::SchedulerMetrics(prometheus::Registry& r)
    : jobs(prometheus::BuildGauge()
               .Name("ringmaster_jobs")
               .Help("Live jobs by state and queue (PENDING, STARTING, RUNNING)")
               .Register(r)),
      finished(prometheus::BuildCounter()
                   .Name("ringmaster_jobs_finished_total")
                   .Help("Jobs that reached a terminal state, by state and queue")
                   .Register(r)),
      pending(prometheus::BuildGauge()
                  .Name("ringmaster_queue_pending_jobs")
                  .Help("Jobs waiting for a placement, by queue")
                  .Register(r)),
      gpus(prometheus::BuildGauge()
               .Name("ringmaster_gpus")
               .Help("GPUs of ready workers, by type")
               .Register(r)),
      gpus_allocated(prometheus::BuildGauge()
                         .Name("ringmaster_gpus_allocated")
                         .Help("GPUs held by placements, by type")
                         .Register(r)),
      cpu_slots(prometheus::BuildGauge()
                    .Name("ringmaster_cpu_slots")
                    .Help("CPU rank slots of ready workers, total and allocated")
                    .Register(r)),
      workers(prometheus::BuildGauge()
                  .Name("ringmaster_workers")
                  .Help("Registered workers by state")
                  .Register(r)),
      submissions(prometheus::BuildCounter()
                      .Name("ringmaster_job_submissions_total")
                      .Help("Jobs accepted by SubmitJob (repeats of a request id excluded)")
                      .Register(r)),
      commit_seconds(prometheus::BuildHistogram()
                         .Name("ringmaster_store_commit_seconds")
                         .Help("Time to store one batch of decisions (one transaction)")
                         .Register(r)
                         .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.002, 0.005, 0.01,
                                                                          0.02, 0.05, 0.1, 0.25,
                                                                          0.5, 1, 2.5, 5, 10})),
      batch_writes(prometheus::BuildHistogram()
                       .Name("ringmaster_store_batch_writes")
                       .Help("Decisions stored per transaction (group commit)")
                       .Register(r)
                       .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128,
                                                                        256, 512, 1024})),
      submit_wait(prometheus::BuildHistogram()
                      .Name("ringmaster_submit_wait_seconds")
                      .Help("Where a stored submit's wait went, by stage: queued (for the "
                            "commit in flight), commit (its batch's), apply (taking the "
                            "batch into memory until the submit is answered)")
                      .Register(r)),
      submit_queued(&submit_wait.Add({{"stage", "queued"}}, kSubmitWaitBuckets)),
      submit_commit(&submit_wait.Add({{"stage", "commit"}}, kSubmitWaitBuckets)),
      submit_apply(&submit_wait.Add({{"stage", "apply"}}, kSubmitWaitBuckets)),
      placement_latency(
          prometheus::BuildHistogram()
              .Name("ringmaster_placement_latency_seconds")
              .Help("Time from a job entering PENDING to its placement")
              .Register(r)
              .Add({},
                   prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                           1, 2.5, 5, 10, 30, 60, 300, 1800})),
      preemptions(prometheus::BuildCounter()
                      .Name("ringmaster_preemptions_total")
                      .Help("Jobs preempted whole, by the victim's queue and reason "
                            "(reclaim, priority)")
                      .Register(r)),
      resizes(prometheus::BuildCounter()
                  .Name("ringmaster_resizes_total")
                  .Help("Elastic jobs restarted at another size, by queue and direction (grow, "
                        "shrink)")
                  .Register(r)),
      queue_quota(prometheus::BuildGauge()
                      .Name("ringmaster_queue_resources")
                      .Help("Per queue and resource (a GPU type or cpu): nominal quota, in "
                            "use, borrowed from the cohort, lent to it (kind label)")
                      .Register(r)),
      queue_share(prometheus::BuildGauge()
                      .Name("ringmaster_queue_dominant_share")
                      .Help("Weighted dominant resource share of the queue's borrowing "
                            "(0 within nominal)")
                      .Register(r)),
      queue_usage(prometheus::BuildCounter()
                      .Name("ringmaster_queue_resource_seconds_total")
                      .Help("Resource-seconds used by the queue's jobs (GPU-seconds per GPU "
                            "type, CPU-slot-seconds for cpu) from RUNNING to their end; "
                            "stored in Postgres, so it survives restarts")
                      .Register(r)),
      watch_actions(prometheus::BuildCounter()
                        .Name("ringmaster_run_watch_actions_total")
                        .Help("Running jobs ended by the run watch: hung (failed, "
                              "progress_timeout_seconds) or idle (cancelled, "
                              "idle_timeout_seconds)")
                        .Register(r)),
      hangs_detected(&watch_actions.Add({{"action", "hung"}})),
      idle_reclaimed(&watch_actions.Add({{"action", "idle"}})),
      check_busbw(prometheus::BuildGauge()
                      .Name("ringmaster_check_busbw_gbps")
                      .Help("Bus bandwidth of the latest pre-run allreduce check, by gang "
                            "shape (workers x ranks per worker / transport), GB/s")
                      .Register(r)),
      check_baseline(prometheus::BuildGauge()
                         .Name("ringmaster_check_baseline_busbw_gbps")
                         .Help("Learned baseline bus bandwidth of pre-run checks, by shape, "
                               "GB/s")
                         .Register(r)),
      checks(prometheus::BuildCounter()
                 .Name("ringmaster_checks_total")
                 .Help("Pre-run allreduce checks by result (passed, failed, error)")
                 .Register(r)),
      check_seconds(prometheus::BuildHistogram()
                        .Name("ringmaster_check_seconds")
                        .Help("Wall time of pre-run allreduce checks, mpirun start to end")
                        .Register(r)
                        .Add({}, prometheus::Histogram::BucketBoundaries{0.1, 0.25, 0.5, 0.75, 1,
                                                                         1.5, 2, 3, 5, 10})),
      unhealthy(prometheus::BuildGauge()
                    .Name("ringmaster_workers_unhealthy")
                    .Help("Workers out of placement after a failed pre-run check")
                    .Register(r)
                    .Add({})),
      gpus_shared(prometheus::BuildGauge()
                      .Name("ringmaster_gpus_shared")
                      .Help("GPUs of ready workers that ranks with a gpu_share hold, by type")
                      .Register(r)),
      gpu_share_held(prometheus::BuildGauge()
                         .Name("ringmaster_gpu_share_allocated")
                         .Help("Of the shared GPUs, the GPUs' worth the shares hold, by type")
                         .Register(r)),
      gpus_fragmented(prometheus::BuildGauge()
                          .Name("ringmaster_gpus_fragmented")
                          .Help("Free capacity on shared GPUs, in GPUs, by type: only shares "
                                "may use it, never a whole-GPU rank")
                          .Register(r)),
      device_share(prometheus::BuildGauge()
                       .Name("ringmaster_gpu_device_share")
                       .Help("Per GPU of a worker: the fraction of it shares hold (0..1)")
                       .Register(r)),
      device_memory_promised(prometheus::BuildGauge()
                                 .Name("ringmaster_gpu_device_memory_promised_bytes")
                                 .Help("Per GPU of a worker: device memory promised to shares")
                                 .Register(r)) {}

void SchedulerMetrics::UpdateGauges(const LiveView& live) {
  std::map<std::pair<std::string, std::string>, int64_t> job_counts;
  std::map<std::string, int64_t> pending_counts;
  for (const auto& [key, n] : live.live_counts) {
    job_counts[{JobStateName(key.first), key.second}] += n;
    if (key.first == JobState::kPending) pending_counts[key.second] += n;
    queue_labels_.insert(key.second);
  }
  for (const auto& key : job_labels_) job_counts.try_emplace(key, 0);
  for (const auto& [key, n] : job_counts) {
    job_labels_.insert(key);
    jobs.Add({{"state", key.first}, {"queue", key.second}}).Set(n);
  }
  for (const auto& q : queue_labels_) {
    pending.Add({{"queue", q}}).Set(pending_counts.count(q) ? pending_counts[q] : 0);
  }
  std::set<std::string> queue_names = queue_labels_;
  for (const auto& [name, q] : live.queues) queue_names.insert(name);
  for (const auto& [q, resource] : quota_labels_) {
    for (const char* kind : {"nominal", "used", "borrowed", "lent"}) {
      queue_quota.Add({{"queue", q}, {"resource", resource}, {"kind", kind}}).Set(0);
    }
  }
  for (const std::string& q : queue_names) {
    queue_labels_.insert(q);
    // Counters exist from the start, so that "no preemption" reads 0 rather than nothing.
    for (const char* reason : {"reclaim", "priority"}) {
      preemptions.Add({{"queue", q}, {"reason", reason}});
    }
    for (const char* direction : {"grow", "shrink"}) {
      resizes.Add({{"queue", q}, {"direction", direction}});
    }
    queue_share.Add({{"queue", q}}).Set(live.ledger.Share(q));
    for (const auto& [resource, u] : live.ledger.UsageOf(q)) {
      quota_labels_.insert({q, resource});
      for (auto [kind, value] : {std::pair{"nominal", u.nominal},
                                 {"used", u.used},
                                 {"borrowed", u.borrowed},
                                 {"lent", u.lent}}) {
        queue_quota.Add({{"queue", q}, {"resource", resource}, {"kind", kind}})
            .Set(static_cast<double>(value) / static_cast<double>(QuotaScale(resource)));
      }
    }
  }
  // Counters only go up: a running attempt's share is counted as it runs and again (exactly)
  // when it ends, so the total never falls.
  for (const auto& [key, ms] : live.used_ms) {
    prometheus::Counter& c = queue_usage.Add({{"queue", key.first}, {"resource", key.second}});
    const double seconds = static_cast<double>(ms) / 1000.0;
    if (seconds > c.Value()) c.Increment(seconds - c.Value());
  }
  auto totals = live.cluster.GpuTotals();
  for (const auto& type : gpu_labels_) totals.try_emplace(type);
  const auto shares = live.cluster.ShareTotalsByType();
  for (const auto& [type, t] : totals) {
    gpu_labels_.insert(type);
    gpus.Add({{"gpu_type", type}}).Set(t.total);
    gpus_allocated.Add({{"gpu_type", type}}).Set(t.allocated);
    auto s = shares.find(type);
    const double shared = s == shares.end() ? 0 : s->second.devices;
    const double held = s == shares.end() ? 0 : s->second.held / double{kWholeGpuShare};
    gpus_shared.Add({{"gpu_type", type}}).Set(shared);
    gpu_share_held.Add({{"gpu_type", type}}).Set(held);
    gpus_fragmented.Add({{"gpu_type", type}}).Set(shared - held);
  }
  for (const auto& [worker, gpu] : device_labels_) {
    device_share.Add({{"worker", worker}, {"gpu", gpu}}).Set(0);
    device_memory_promised.Add({{"worker", worker}, {"gpu", gpu}}).Set(0);
  }
  for (const auto& [id, w] : live.workers) {
    for (const ClusterState::GpuUse& use : live.cluster.GpuUses(id)) {
      if (use.share == 0) continue;
      const std::string gpu = std::to_string(use.index);
      device_labels_.insert({id, gpu});
      device_share.Add({{"worker", id}, {"gpu", gpu}}).Set(use.share / double{kWholeGpuShare});
      device_memory_promised.Add({{"worker", id}, {"gpu", gpu}})
          .Set(static_cast<double>(use.memory));
    }
  }
  auto cpu = live.cluster.CpuTotals();
  cpu_slots.Add({{"kind", "total"}}).Set(cpu.total);
  cpu_slots.Add({{"kind", "allocated"}}).Set(cpu.allocated);
  int ready = 0;
  for (const auto& [id, w] : live.workers) ready += w.state == WorkerState::kReady;
  workers.Add({{"state", "READY"}}).Set(ready);
  workers.Add({{"state", "LOST"}}).Set(static_cast<double>(live.workers.size()) - ready);
  int unhealthy_workers = 0;
  for (const auto& [id, w] : live.workers) unhealthy_workers += !w.unhealthy_reason.empty();
  unhealthy.Set(unhealthy_workers);
}

void SchedulerMetrics::ObserveSubmitWait(std::chrono::steady_clock::time_point handed,
                                         std::chrono::steady_clock::time_point commit_begun,
                                         std::chrono::steady_clock::time_point committed,
                                         std::chrono::steady_clock::time_point told) {
  auto seconds = [](auto from, auto to) {
    return std::chrono::duration<double>(to - from).count();
  };
  submit_queued->Observe(seconds(handed, commit_begun));
  submit_commit->Observe(seconds(commit_begun, committed));
  submit_apply->Observe(seconds(committed, told));
}

}  // namespace ringmaster::scheduler
