#include "scheduler/convert/convert.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "scheduler/core/array.h"

namespace ringmaster::scheduler {

absl::StatusOr<JobSpec> FromProto(const v1::JobSpec& spec) {
  JobSpec out;
  out.name = spec.name();
  out.queue = spec.queue();
  out.priority = spec.priority();
  out.replicas = spec.replicas();
  out.min_replicas = spec.min_replicas();
  out.max_replicas = spec.max_replicas();
  out.sizes_divide = spec.sizes_divide();
  out.gpus_per_replica = spec.gpus_per_replica();
  out.gpu_type = spec.gpu_type();
  out.gpu_share = spec.gpu_share();
  out.gpu_memory = spec.gpu_memory();
  if (spec.has_trainer()) {
    out.trainer = TrainerWorkload{spec.trainer().model(), spec.trainer().batch_size(),
                                  spec.trainer().steps(), std::nullopt};
    if (spec.trainer().has_checkpoint_every()) {
      out.trainer->checkpoint_every = spec.trainer().checkpoint_every();
    }
  }
  if (spec.has_command()) {
    CommandWorkload command;
    command.argv.assign(spec.command().argv().begin(), spec.command().argv().end());
    command.env.insert(spec.command().env().begin(), spec.command().env().end());
    command.check_in_mpi_init = spec.command().check_in_mpi_init();
    out.command = std::move(command);
  }
  switch (spec.restart_policy()) {
    case v1::RESTART_POLICY_UNSPECIFIED:
    case v1::RESTART_POLICY_NEVER:
      out.restart_policy = RestartPolicy::kNever;
      break;
    case v1::RESTART_POLICY_ON_FAILURE:
      out.restart_policy = RestartPolicy::kOnFailure;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("restart_policy: unknown value ", static_cast<int>(spec.restart_policy()),
                       "; allowed: NEVER, ON_FAILURE"));
  }
  if (spec.has_backoff_limit()) out.backoff_limit = spec.backoff_limit();
  out.max_runtime_seconds = spec.max_runtime_seconds();
  if (spec.has_progress_timeout_seconds()) {
    out.progress_timeout_seconds = spec.progress_timeout_seconds();
  }
  out.labels.insert(spec.labels().begin(), spec.labels().end());
  if (spec.has_health_check()) out.health_check = spec.health_check();
  out.use_mpirun = spec.use_mpirun();
  for (int i = 0; i < spec.after_size(); ++i) {
    const v1::JobDependency& d = spec.after(i);
    Dependency dep{d.job_id()};
    switch (d.condition()) {
      case v1::DEPENDENCY_CONDITION_SUCCEEDED:
        dep.condition = AfterCondition::kSucceeded;
        break;
      case v1::DEPENDENCY_CONDITION_ENDED:
        dep.condition = AfterCondition::kEnded;
        break;
      case v1::DEPENDENCY_CONDITION_FAILED:
        dep.condition = AfterCondition::kFailed;
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("after[", i, "].condition: must be SUCCEEDED, ENDED or FAILED, got ",
                         static_cast<int>(d.condition())));
    }
    out.after.push_back(std::move(dep));
  }
  if (spec.has_array()) out.array = ArraySpec{spec.array().count(), spec.array().parallelism()};
  out.image = spec.image();
  for (const v1::Mount& m : spec.mounts()) out.mounts.push_back({m.volume(), m.path(), m.read_only()});
  out.shm_size_bytes = spec.shm_size_bytes();
  out.workdir = spec.workdir();
  return out;
}

v1::JobSpec ToProto(const JobSpec& spec) {
  v1::JobSpec out;
  out.set_name(spec.name);
  out.set_queue(spec.queue);
  out.set_priority(spec.priority);
  out.set_replicas(spec.replicas);
  out.set_min_replicas(spec.min_replicas);
  out.set_max_replicas(spec.max_replicas);
  out.set_sizes_divide(spec.sizes_divide);
  out.set_gpus_per_replica(spec.gpus_per_replica);
  out.set_gpu_type(spec.gpu_type);
  out.set_gpu_share(spec.gpu_share);
  out.set_gpu_memory(spec.gpu_memory);
  if (spec.trainer) {
    auto* t = out.mutable_trainer();
    t->set_model(spec.trainer->model);
    t->set_batch_size(spec.trainer->batch_size);
    t->set_steps(spec.trainer->steps);
    if (spec.trainer->checkpoint_every) t->set_checkpoint_every(*spec.trainer->checkpoint_every);
  }
  if (spec.command) {
    auto* c = out.mutable_command();
    for (const auto& arg : spec.command->argv) c->add_argv(arg);
    c->mutable_env()->insert(spec.command->env.begin(), spec.command->env.end());
    c->set_check_in_mpi_init(spec.command->check_in_mpi_init);
  }
  out.set_restart_policy(spec.restart_policy == RestartPolicy::kOnFailure
                             ? v1::RESTART_POLICY_ON_FAILURE
                             : v1::RESTART_POLICY_NEVER);
  if (spec.backoff_limit) out.set_backoff_limit(*spec.backoff_limit);
  out.set_max_runtime_seconds(spec.max_runtime_seconds);
  if (spec.progress_timeout_seconds) {
    out.set_progress_timeout_seconds(*spec.progress_timeout_seconds);
  }
  out.mutable_labels()->insert(spec.labels.begin(), spec.labels.end());
  if (spec.health_check) out.set_health_check(*spec.health_check);
  out.set_use_mpirun(spec.use_mpirun);
  for (const Dependency& d : spec.after) {
    v1::JobDependency* dep = out.add_after();
    dep->set_job_id(d.job_id);
    dep->set_condition(d.condition == AfterCondition::kSucceeded
                           ? v1::DEPENDENCY_CONDITION_SUCCEEDED
                       : d.condition == AfterCondition::kEnded ? v1::DEPENDENCY_CONDITION_ENDED
                                                               : v1::DEPENDENCY_CONDITION_FAILED);
  }
  if (spec.array) {
    out.mutable_array()->set_count(spec.array->count);
    out.mutable_array()->set_parallelism(spec.array->parallelism);
  }
  out.set_image(spec.image);
  for (const Mount& m : spec.mounts) {
    v1::Mount* mount = out.add_mounts();
    mount->set_volume(m.volume);
    mount->set_path(m.path);
    mount->set_read_only(m.read_only);
  }
  out.set_shm_size_bytes(spec.shm_size_bytes);
  out.set_workdir(spec.workdir);
  return out;
}

v1::JobState ToProto(JobState state) {
  switch (state) {
    case JobState::kPending: return v1::JOB_STATE_PENDING;
    case JobState::kStarting: return v1::JOB_STATE_STARTING;
    case JobState::kRunning: return v1::JOB_STATE_RUNNING;
    case JobState::kSucceeded: return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed: return v1::JOB_STATE_FAILED;
    case JobState::kCancelled: return v1::JOB_STATE_CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

std::optional<JobState> FromProto(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_PENDING: return JobState::kPending;
    case v1::JOB_STATE_STARTING: return JobState::kStarting;
    case v1::JOB_STATE_RUNNING: return JobState::kRunning;
    case v1::JOB_STATE_SUCCEEDED: return JobState::kSucceeded;
    case v1::JOB_STATE_FAILED: return JobState::kFailed;
    case v1::JOB_STATE_CANCELLED: return JobState::kCancelled;
    default: return std::nullopt;
  }
}

v1::RankPlacement ToProto(const RankPlacement& rank) {
  v1::RankPlacement out;
  out.set_rank(rank.rank);
  out.set_worker_id(rank.worker_id);
  out.set_worker_address(rank.worker_address);
  for (int32_t gpu : rank.gpu_indices) out.add_gpu_indices(gpu);
  out.set_worker_port(rank.worker_port);
  out.set_gpu_share(rank.gpu_share);
  out.set_gpu_memory(rank.gpu_memory);
  return out;
}

RankPlacement FromProto(const v1::RankPlacement& rank) {
  RankPlacement out;
  out.rank = rank.rank();
  out.worker_id = rank.worker_id();
  out.worker_address = rank.worker_address();
  out.gpu_indices.assign(rank.gpu_indices().begin(), rank.gpu_indices().end());
  out.worker_port = rank.worker_port();
  out.gpu_share = rank.gpu_share();
  out.gpu_memory = rank.gpu_memory();
  return out;
}

v1::Job ToProto(const Job& job) {
  v1::Job out;
  out.set_id(job.id);
  *out.mutable_spec() = ToProto(job.spec);
  out.set_state(ToProto(job.state));
  out.set_attempt(job.attempt);
  out.set_request_id(job.request_id);
  out.set_pending_reason(job.pending_reason);
  for (const auto& rank : job.placement) *out.add_placement() = ToProto(rank);
  out.set_created_at_ms(job.created_at_ms);
  out.set_updated_at_ms(job.updated_at_ms);
  out.set_started_at_ms(job.started_at_ms);
  out.set_finished_at_ms(job.finished_at_ms);
  out.set_exit_code(job.exit_code);
  out.set_message(job.message);
  out.set_last_checkpoint_step(job.last_checkpoint_step);
  out.set_last_checkpoint_time_ms(job.last_checkpoint_time_ms);
  out.set_image_digest(job.image_digest);
  if (const auto& a = job.array_status) {
    v1::ArrayStatus* status = out.mutable_array_status();
    status->set_count(a->count);
    status->set_waiting(a->waiting);
    status->set_pending(a->pending);
    status->set_running(a->running);
    status->set_succeeded(a->succeeded);
    status->set_failed(a->failed);
    status->set_cancelled(a->cancelled);
    for (int32_t i : a->failed_indices) status->add_failed_indices(i);
  }
  if (auto task = ParseTaskId(job.id)) {
    out.set_array_id(task->first);
    out.set_array_index(task->second);
  }
  for (const JobEvent& e : job.resizes) *out.add_resizes() = ToProto(e);
  return out;
}

v1::JobEvent ToProto(const JobEvent& event) {
  v1::JobEvent out;
  out.set_job_id(event.job_id);
  out.set_seq(event.seq);
  out.set_state(ToProto(event.state));
  out.set_attempt(event.attempt);
  out.set_reason(event.reason);
  out.set_exit_code(event.exit_code);
  out.set_time_ms(event.time_ms);
  return out;
}

v1::Gpu ToProto(const Gpu& gpu) {
  v1::Gpu out;
  out.set_index(gpu.index);
  out.set_type(gpu.type);
  out.set_memory_bytes(gpu.memory_bytes);
  out.set_simulated(gpu.simulated);
  return out;
}

Gpu FromProto(const v1::Gpu& gpu) {
  return Gpu{gpu.index(), gpu.type(), gpu.memory_bytes(), gpu.simulated()};
}

std::string SpecToJson(const JobSpec& spec) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Serializing a message we built cannot fail.
  (void)google::protobuf::util::MessageToJsonString(ToProto(spec), &json, options);
  return json;
}

absl::StatusOr<JobSpec> SpecFromJson(const std::string& json) {
  v1::JobSpec spec;
  auto status = google::protobuf::util::JsonStringToMessage(json, &spec);
  if (!status.ok()) {
    return absl::DataLossError(absl::StrCat("stored job spec does not parse: ", status.ToString()));
  }
  return FromProto(spec);
}

}  // namespace ringmaster::scheduler
