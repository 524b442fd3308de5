#include "trainer/optimizer.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {

absl::StatusOr<Sgd> Sgd::Create(Compute& compute, size_t parameters, double lr, float momentum) {
  Sgd sgd(compute, parameters, lr, momentum);
  if (momentum != 0) {
    RM_ASSIGN_OR_RETURN(sgd.velocity_, DeviceBuffer::Allocate(compute, parameters));
    RM_RETURN_IF_ERROR(sgd.SetState(std::vector<float>(parameters, 0.0f)));
  }
  return sgd;
}

absl::Status Sgd::Step(const float* summed, int ranks, float* parameters) {
  if (momentum_ == 0) {
    // The scale in double, then rounded once: the bits plain SGD always had.
    return compute_->Axpy(static_cast<float>(-lr_ / ranks), summed, parameters_, parameters);
  }
  RM_RETURN_IF_ERROR(compute_->Scale(momentum_, velocity_.size(), velocity_.data()));
  RM_RETURN_IF_ERROR(
      compute_->Axpy(1.0f / static_cast<float>(ranks), summed, velocity_.size(), velocity_.data()));
  return compute_->Axpy(static_cast<float>(-lr_), velocity_.data(), parameters_, parameters);
}

absl::StatusOr<std::vector<float>> Sgd::StateToHost() {
  std::vector<float> host(velocity_.size());
  if (host.empty()) return host;
  RM_RETURN_IF_ERROR(compute_->CopyToHost(velocity_.data(), host.size(), host.data()));
  return host;
}

absl::Status Sgd::SetState(const std::vector<float>& host) {
  if (host.size() != velocity_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "got optimizer state of ", host.size(), " values, this optimizer has ", velocity_.size()));
  }
  if (host.empty()) return absl::OkStatus();
  return compute_->CopyFromHost(host.data(), host.size(), velocity_.data());
}

}  // namespace ringmaster::trainer
