#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/checkpointing.h"
#include "trainer/gradient_buckets.h"
#include "trainer/host_collectives.h"
#include "trainer/mlp.h"
#include "trainer/optimizer.h"
#include "trainer/synthetic_data.h"

namespace ringmaster::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Mean over ranks of this rank's loss on its last batch.
absl::StatusOr<double> GlobalLoss(Mlp& mlp, Compute& compute, Communicator& communicator) {
  RM_ASSIGN_OR_RETURN(double local, mlp.Loss());
  std::vector<float> loss = {static_cast<float>(local)};
  RM_RETURN_IF_ERROR(AllreduceHostValues(compute, communicator, &loss));
  return loss[0] / communicator.size();
}

}  // namespace

absl::StatusOr<TrainResult> Train(const TrainerConfig& config, Compute& compute,
                                  Communicator& communicator, std::ostream* out,
                                  const StepObserver& on_step) {
  if (compute.memory() != communicator.memory()) {
    return absl::FailedPreconditionError("compute and communicator use different memory");
  }
  const int ranks = communicator.size();
  // A run restarted after a failure, a preemption or a resize goes on from the newest
  // checkpoint, with its global batch split over however many ranks this run has.
  RM_ASSIGN_OR_RETURN(ResumePoint resume, FindResumePoint(config, compute, communicator));
  // This run's configuration: the batch per rank is what the global batch makes it.
  TrainerConfig run = config;
  RM_ASSIGN_OR_RETURN(run.batch_size, GlobalBatchPerRank(resume.global_batch, ranks));
  run.global_batch_size = resume.global_batch;
  RM_ASSIGN_OR_RETURN(Mlp mlp, Mlp::Create(compute, run.model, run.batch_size));
  RM_RETURN_IF_ERROR(mlp.InitParameters(run.seed));
  RM_ASSIGN_OR_RETURN(
      SyntheticDataset data,
      SyntheticDataset::Create(compute, run.model.input_dim, run.model.num_classes, run.batch_size,
                               run.data_batches, run.seed, communicator.rank(), ranks));
  GradientReducer reducer(communicator, mlp.gradients(),
                          PlanBuckets(mlp.layers(), run.bucket_bytes));
  const auto on_layer_ready = [&reducer](int layer) { return reducer.OnLayerReady(layer); };
  RM_ASSIGN_OR_RETURN(Sgd sgd, Sgd::Create(compute, mlp.parameter_count(), run.lr,
                                           static_cast<float>(run.momentum)));
  const double global_batch = static_cast<double>(run.batch_size) * ranks;

  TrainResult result;
  result.buckets = static_cast<int>(reducer.plan().size());
  if (out != nullptr) {
    *out << absl::StrFormat(
        "model %s: %d layers, %.1fM parameters, %d gradient bucket(s) of at most %.1f MiB; "
        "batch %d per rank x %d rank(s); %d steps (%d warm-up)\n",
        run.model.name, static_cast<int>(mlp.layers().size()),
        static_cast<double>(mlp.parameter_count()) / 1e6, result.buckets,
        static_cast<double>(run.bucket_bytes) / (1 << 20), run.batch_size, ranks, run.steps,
        run.warmup_steps);
    out->flush();
  }
  RM_RETURN_IF_ERROR(LoadResumePoint(run, resume, mlp, sgd, compute, communicator, out));
  const int first_step = static_cast<int>(resume.step) + 1;
  result.resumed_from_step = static_cast<int>(resume.step);
  // The warm-up is counted from where this run starts.
  const int warm_until = std::min(run.steps, first_step - 1 + run.warmup_steps);

  // Start the clocks together.
  RM_RETURN_IF_ERROR(communicator.Barrier());
  Clock::time_point timed_start = Clock::now();
  Clock::time_point interval_start = timed_start;
  Clock::time_point step_start = timed_start;
  int interval_first_step = first_step;
  double last_loss = -1;
  int last_step = first_step - 1;
  // The end of the last step: the time the total counts stops where the steps' own rates stop,
  // not after the closing loss allreduce and printing (which a loaded host can stretch).
  Clock::time_point last_step_end = timed_start;
  for (int step = first_step; step <= run.steps; ++step) {
    RM_RETURN_IF_ERROR(mlp.Forward(data.inputs(step - 1), data.labels(step - 1)));
    RM_RETURN_IF_ERROR(mlp.Backward(on_layer_ready));
    RM_RETURN_IF_ERROR(reducer.WaitAll());
    RM_RETURN_IF_ERROR(sgd.Step(mlp.gradients(), ranks, mlp.parameters()));
    RM_RETURN_IF_ERROR(compute.Synchronize());
    const Clock::time_point now = Clock::now();
    if (step == warm_until) timed_start = now;
    last_step_end = now;

    if (step == first_step || step % run.log_every == 0 || step == run.steps) {
      // Every rank takes part: the loss is averaged over all of them.
      RM_ASSIGN_OR_RETURN(double loss, GlobalLoss(mlp, compute, communicator));
      last_loss = loss;
      if (step == first_step) result.initial_loss = loss;
      if (step == run.steps) result.final_loss = loss;
      const double images_per_sec =
          global_batch * (step - interval_first_step + 1) / Seconds(interval_start, now);
      if (out != nullptr) {
        *out << absl::StrFormat("step %d/%d loss %.6f images/sec %.1f\n", step, run.steps, loss,
                                images_per_sec);
        out->flush();
      }
      interval_start = Clock::now();
      interval_first_step = step + 1;
    }
    if (on_step) {
      // Throughput as total images/sec counts it: the average since the warm-up steps.
      const double seconds = Seconds(step_start, now);
      const double since = Seconds(timed_start, now);
      const double rate = step > warm_until && since > 0
                              ? run.batch_size * (step - warm_until) / since
                              : (seconds > 0 ? run.batch_size / seconds : 0);
      on_step(StepStats{step, seconds, rate, reducer.bytes_per_step(),
                        reducer.last_allreduce_seconds(), last_loss});
    }
    last_step = step;
    if (!run.checkpoint_dir.empty()) {
      RM_ASSIGN_OR_RETURN(
          bool stop, CheckpointAtStepBoundary(run, step, mlp, sgd, compute, communicator, out));
      if (stop) {
        result.stopped_at_step = step;
        return result;
      }
    }
    step_start = Clock::now();
  }
  const double timed_seconds = Seconds(timed_start, last_step_end);
  result.images_per_sec = last_step > warm_until && timed_seconds > 0
                              ? global_batch * (last_step - warm_until) / timed_seconds
                              : 0;
  result.allreduce_wait_seconds = reducer.wait_seconds();

  RM_ASSIGN_OR_RETURN(std::vector<float> weights, mlp.ParametersToHost());
  result.weights_fingerprint = Fingerprint(weights);
  RM_ASSIGN_OR_RETURN(
      result.ranks_differing,
      CountRanksDifferingFromRoot(compute, communicator, result.weights_fingerprint));
  if (out != nullptr) {
    *out << "----------------------------------------------------------------\n"
         << absl::StrFormat("total images/sec: %.2f\n", result.images_per_sec)
         << "----------------------------------------------------------------\n"
         << absl::StrFormat(
                "allreduce wait (not hidden by backward): %.3f ms/step on rank 0\n",
                1e3 * result.allreduce_wait_seconds / std::max(1, run.steps - first_step + 1))
         << absl::StrFormat("initial loss: %.4f\n", result.initial_loss)
         << absl::StrFormat("final loss: %.4f\n", result.final_loss)
         << absl::StrFormat("weights checksum: %016x\n", result.weights_fingerprint)
         << absl::StrFormat("weights consistent across %d ranks: %s\n", ranks,
                            result.ranks_differing == 0 ? "yes" : "no");
    out->flush();
  }
  return result;
}

}  // namespace ringmaster::trainer
