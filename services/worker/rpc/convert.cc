#include "worker/rpc/convert.h"

#include "common/utf8.h"

namespace ringmaster::worker {

Assignment FromProto(const v1::Assignment& proto) {
  Assignment a;
  a.job_id = proto.job_id();
  a.attempt = proto.attempt();
  a.token = proto.token();
  a.team = proto.team();
  const v1::JobSpec& spec = proto.spec();
  a.queue = spec.queue();
  if (spec.has_trainer()) {
    a.trainer = TrainerWorkload{spec.trainer().model(), spec.trainer().batch_size(),
                                spec.trainer().steps(), std::nullopt};
    if (spec.trainer().has_checkpoint_every()) {
      a.trainer->checkpoint_every = spec.trainer().checkpoint_every();
    }
  } else if (spec.has_command()) {
    CommandWorkload command;
    command.argv.assign(spec.command().argv().begin(), spec.command().argv().end());
    for (const auto& [k, v] : spec.command().env()) command.env[k] = v;
    command.check_in_mpi_init = spec.command().check_in_mpi_init();
    a.command = std::move(command);
  }
  for (const v1::RankPlacement& r : proto.placement()) {
    a.placement.push_back(RankPlacement{r.rank(),
                                        r.worker_id(),
                                        r.worker_address(),
                                        r.worker_port(),
                                        {r.gpu_indices().begin(), r.gpu_indices().end()}});
  }
  a.run_check = proto.run_check();
  a.check_policy.baseline_gbps = proto.check_baseline_gbps();
  if (proto.check_min_ratio() > 0) a.check_policy.min_ratio = proto.check_min_ratio();
  a.check_on_gpus = proto.check_transport() == "gpu";
  a.check_separately = proto.check_separately();
  a.check_token = proto.check_token();
  a.start_directly = proto.start_directly();
  a.elastic = spec.min_replicas() > 0 && spec.max_replicas() > 0;
  a.gpu_share = spec.gpu_share();
  a.gpu_memory = spec.gpu_memory();
  if (!spec.image().empty()) {
    JobImage image;
    image.reference = spec.image();
    image.digest = proto.image_digest();
    for (const v1::AssignedMount& m : proto.mounts()) {
      image.mounts.push_back({m.volume(), m.host_path(), m.container_path(), m.read_only()});
    }
    image.shm_size_bytes = spec.shm_size_bytes();
    image.workdir = spec.workdir();
    if (proto.has_registry_auth()) {
      image.registry_auth =
          RegistryAuth{proto.registry_auth().registry(), proto.registry_auth().username(),
                       proto.registry_auth().secret(), proto.registry_auth().problem()};
    }
    a.image = std::move(image);
  }
  return a;
}

v1::CheckResult ToProto(const CheckReport& report) {
  v1::CheckResult proto;
  proto.set_job_id(report.job_id);
  proto.set_attempt(report.attempt);
  proto.set_completed(report.completed);
  proto.set_busbw_gbps(report.busbw_gbps);
  proto.set_seconds(report.seconds);
  proto.set_transport(report.transport);
  for (const CheckRankTiming& r : report.ranks) {
    v1::CheckRank* rank = proto.add_ranks();
    rank->set_rank(r.rank);
    rank->set_worker_id(r.worker_id);
    rank->set_wait_seconds(r.wait_seconds);
  }
  proto.set_passed(report.passed);
  proto.set_culprit_worker_id(report.culprit_worker_id);
  proto.set_message(Utf8Prefix(report.message, 2048));
  proto.set_in_session(report.in_session);
  return proto;
}

v1::RankStatus ToProto(const RankStatus& status) {
  v1::RankStatus proto;
  proto.set_job_id(status.job_id);
  proto.set_attempt(status.attempt);
  proto.set_rank(status.rank);
  switch (status.kind) {
    case RankStatus::Kind::kStarted:
      proto.set_kind(v1::RankStatus::KIND_STARTED);
      break;
    case RankStatus::Kind::kExited:
      proto.set_kind(v1::RankStatus::KIND_EXITED);
      break;
    case RankStatus::Kind::kLaunchFailed:
      proto.set_kind(v1::RankStatus::KIND_LAUNCH_FAILED);
      break;
    case RankStatus::Kind::kCheckpoint:
      proto.set_kind(v1::RankStatus::KIND_CHECKPOINT);
      proto.set_checkpoint_step(status.checkpoint_step);
      proto.set_checkpoint_time_ms(status.checkpoint_time_ms);
      break;
    case RankStatus::Kind::kProgress: {
      proto.set_kind(v1::RankStatus::KIND_PROGRESS);
      v1::RankProgress* p = proto.mutable_progress();
      p->set_collectives_entered(status.progress.collectives_entered);
      p->set_collectives_completed(status.progress.collectives_completed);
      p->set_step(status.progress.step);
      p->set_progress_reports(status.progress.progress_reports);
      p->set_stopped(status.progress.stopped);
      if (status.progress.mpi) {
        v1::MpiPosition* mpi = p->mutable_mpi();
        mpi->set_inside(status.progress.mpi->inside);
        mpi->set_call(status.progress.mpi->call);
        mpi->set_for_ms(status.progress.mpi->for_ms);
        mpi->set_calls_entered(status.progress.mpi->calls_entered);
      }
      if (status.progress.step_images_per_second) {
        p->set_images_per_second(*status.progress.step_images_per_second);
      }
      if (status.progress.images_per_second) {
        proto.set_images_per_second(*status.progress.images_per_second);
      }
      break;
    }
    case RankStatus::Kind::kImageResolved:
      proto.set_kind(v1::RankStatus::KIND_IMAGE_RESOLVED);
      proto.set_image_digest(status.image_digest);
      break;
    case RankStatus::Kind::kChecked:  // sent as a CheckResult (scheduler_session.cc)
      break;
  }
  proto.set_exit_code(status.exit_code);
  proto.set_signal(status.signal);
  proto.set_message(Utf8Prefix(status.message, 2048));
  return proto;
}

v1::RegisterWorker ToProto(const Inventory& inventory, const std::vector<HeldRank>& held) {
  v1::RegisterWorker proto;
  proto.set_worker_id(inventory.worker_id);
  proto.set_address(inventory.address);
  proto.set_port(inventory.port);
  proto.set_cpu_slots(inventory.cpu_slots);
  proto.set_shares_one_team(inventory.shares_one_team);
  for (const Gpu& g : inventory.gpus) {
    v1::Gpu* gpu = proto.add_gpus();
    gpu->set_index(g.index);
    gpu->set_type(g.type);
    gpu->set_memory_bytes(g.memory_bytes);
    gpu->set_simulated(g.simulated);
  }
  for (const HeldRank& h : held) {
    v1::RunningRank* r = proto.add_ranks();
    r->set_job_id(h.job_id);
    r->set_attempt(h.attempt);
    r->set_rank(h.rank);
    r->set_exited(h.exited);
    r->set_exit_code(h.exit_code);
    r->set_stopping(h.stopping);
    for (int32_t gpu : h.gpu_indices) r->add_gpu_indices(gpu);
  }
  return proto;
}

}  // namespace ringmaster::worker
