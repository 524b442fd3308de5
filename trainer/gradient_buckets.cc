#include "trainer/gradient_buckets.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {

std::vector<Bucket> PlanBuckets(const std::vector<LayerShape>& layers, size_t bucket_bytes) {
  std::vector<Bucket> plan;
  for (int l = static_cast<int>(layers.size()) - 1; l >= 0; --l) {
    const size_t count = layers[l].param_count();
    const bool fits = !plan.empty() && (plan.back().count + count) * sizeof(float) <= bucket_bytes;
    if (!fits) plan.push_back(Bucket{l, l, layers[l].offset, 0});
    Bucket& bucket = plan.back();
    bucket.first_layer = l;
    bucket.offset = layers[l].offset;
    bucket.count += count;
  }
  return plan;
}

GradientReducer::GradientReducer(Communicator& communicator, float* gradients,
                                 std::vector<Bucket> plan)
    : communicator_(communicator), gradients_(gradients), plan_(std::move(plan)) {
  int layers = 0;
  for (const Bucket& bucket : plan_) layers = std::max(layers, bucket.last_layer + 1);
  bucket_of_layer_.assign(layers, -1);
  for (int b = 0; b < static_cast<int>(plan_.size()); ++b) {
    for (int l = plan_[b].first_layer; l <= plan_[b].last_layer; ++l) bucket_of_layer_[l] = b;
  }
}

absl::Status GradientReducer::OnLayerReady(int layer) {
  RM_CHECK(layer >= 0 && layer < static_cast<int>(bucket_of_layer_.size()));
  const Bucket& bucket = plan_[bucket_of_layer_[layer]];
  // Backward runs top-down, so a bucket is complete once its lowest layer is.
  if (layer == bucket.first_layer) {
    if (in_flight_.empty()) first_start_ = std::chrono::steady_clock::now();
    RM_ASSIGN_OR_RETURN(Communicator::Handle handle,
                        communicator_.StartAllreduceSum(gradients_ + bucket.offset, bucket.count));
    in_flight_.push_back(handle);
  }
  return absl::OkStatus();
}

absl::Status GradientReducer::WaitAll() {
  if (in_flight_.size() != plan_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("WaitAll with ", in_flight_.size(), " of ", plan_.size(), " buckets started"));
  }
  const auto start = std::chrono::steady_clock::now();
  absl::Status status;
  for (Communicator::Handle handle : in_flight_) {
    absl::Status wait = communicator_.Wait(handle);
    if (status.ok()) status = wait;
  }
  in_flight_.clear();
  const auto end = std::chrono::steady_clock::now();
  wait_seconds_ += std::chrono::duration<double>(end - start).count();
  last_allreduce_seconds_ = std::chrono::duration<double>(end - first_start_).count();
  return status;
}

double GradientReducer::bytes_per_step() const {
  double bytes = 0;
  for (const Bucket& bucket : plan_) bytes += static_cast<double>(bucket.count) * sizeof(float);
  return bytes;
}

}  // namespace ringmaster::trainer
