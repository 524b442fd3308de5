#include "trainer/mlp.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/synthetic_data.h"

namespace ringmaster::trainer {

absl::StatusOr<Mlp> Mlp::Create(Compute& compute, const ModelSpec& spec, int batch_size) {
  if (batch_size < 1 || spec.input_dim < 1 || spec.num_classes < 2) {
    return absl::InvalidArgumentError(absl::StrCat("bad MLP shape: batch ", batch_size, ", input ",
                                                   spec.input_dim, ", classes ", spec.num_classes));
  }
  Mlp mlp(compute, LayerShapes(spec), batch_size);
  const size_t params = ParameterCount(spec);
  RM_ASSIGN_OR_RETURN(mlp.parameters_, DeviceBuffer::Allocate(compute, params));
  RM_ASSIGN_OR_RETURN(mlp.gradients_, DeviceBuffer::Allocate(compute, params));
  int widest = 0;
  for (const LayerShape& layer : mlp.layers_) {
    RM_ASSIGN_OR_RETURN(DeviceBuffer activation,
                        DeviceBuffer::Allocate(compute, size_t{1} * batch_size * layer.out));
    mlp.activations_.push_back(std::move(activation));
    widest = std::max({widest, layer.in, layer.out});
  }
  for (DeviceBuffer& delta : mlp.delta_) {
    RM_ASSIGN_OR_RETURN(delta, DeviceBuffer::Allocate(compute, size_t{1} * batch_size * widest));
  }
  RM_ASSIGN_OR_RETURN(mlp.row_loss_, DeviceBuffer::Allocate(compute, batch_size));
  return mlp;
}

absl::Status Mlp::InitParameters(uint64_t seed) {
  std::vector<float> host(parameters_.size(), 0.0f);
  Rng rng(MixSeed(seed, 0x1417));
  for (const LayerShape& layer : layers_) {
    // He initialisation keeps activations' variance steady through the ReLU layers; the output
    // layer gets half that (LeCun), so the first loss is near log(classes).
    const bool output = &layer == &layers_.back();
    const float stddev = std::sqrt((output ? 1.0f : 2.0f) / static_cast<float>(layer.in));
    for (size_t i = 0; i < layer.weight_count(); ++i) {
      host[layer.offset + i] = stddev * rng.Normal();
    }
  }
  return SetParameters(host);
}

absl::Status Mlp::SetParameters(const std::vector<float>& host) {
  if (host.size() != parameters_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", host.size(), " parameters, model has ", parameters_.size()));
  }
  return compute_->CopyFromHost(host.data(), host.size(), parameters_.data());
}

absl::StatusOr<std::vector<float>> Mlp::ParametersToHost() {
  std::vector<float> host(parameters_.size());
  RM_RETURN_IF_ERROR(compute_->CopyToHost(parameters_.data(), host.size(), host.data()));
  return host;
}

absl::StatusOr<std::vector<float>> Mlp::GradientsToHost() {
  std::vector<float> host(gradients_.size());
  RM_RETURN_IF_ERROR(compute_->CopyToHost(gradients_.data(), host.size(), host.data()));
  return host;
}

absl::Status Mlp::Forward(const float* inputs, const float* labels) {
  inputs_ = inputs;
  labels_ = labels;
  const float* x = inputs;
  const int last = static_cast<int>(layers_.size()) - 1;
  for (int l = 0; l <= last; ++l) {
    const LayerShape& layer = layers_[l];
    float* y = activations_[l].data();
    const float* w = parameters_.data() + layer.offset;
    // y[B x out] = x[B x in] * W^T
    RM_RETURN_IF_ERROR(
        compute_->Gemm(false, true, batch_size_, layer.out, layer.in, 1.0f, x, w, 0.0f, y));
    RM_RETURN_IF_ERROR(compute_->AddBias(parameters_.data() + layer.bias_offset(), batch_size_,
                                         layer.out, /*relu=*/l != last, y));
    x = y;
  }
  return compute_->SoftmaxCrossEntropy(activations_[last].data(), labels, batch_size_,
                                       layers_[last].out, row_loss_.data(), delta_[0].data());
}

absl::Status Mlp::Backward(const std::function<absl::Status(int layer)>& on_layer_ready) {
  if (inputs_ == nullptr) return absl::FailedPreconditionError("Backward before Forward");
  int current = 0;  // delta_[current] holds dLoss/dy of the layer being processed
  for (int l = static_cast<int>(layers_.size()) - 1; l >= 0; --l) {
    const LayerShape& layer = layers_[l];
    const float* dy = delta_[current].data();
    const float* x = l == 0 ? inputs_ : activations_[l - 1].data();
    float* dw = gradients_.data() + layer.offset;
    // dW[out x in] = dy^T[out x B] * x[B x in]; db = column sums of dy.
    RM_RETURN_IF_ERROR(
        compute_->Gemm(true, false, layer.out, layer.in, batch_size_, 1.0f, dy, x, 0.0f, dw));
    RM_RETURN_IF_ERROR(
        compute_->ColumnSums(dy, batch_size_, layer.out, gradients_.data() + layer.bias_offset()));
    // Hand the layer to the reducer before computing dx, so its allreduce overlaps that GEMM.
    RM_RETURN_IF_ERROR(on_layer_ready(l));
    if (l == 0) break;
    // dx[B x in] = dy[B x out] * W[out x in], then through the ReLU that produced x.
    float* dx = delta_[1 - current].data();
    RM_RETURN_IF_ERROR(compute_->Gemm(false, false, batch_size_, layer.in, layer.out, 1.0f, dy,
                                      parameters_.data() + layer.offset, 0.0f, dx));
    RM_RETURN_IF_ERROR(compute_->ReluBackward(x, size_t{1} * batch_size_ * layer.in, dx));
    current = 1 - current;
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Mlp::Loss() {
  std::vector<float> losses(batch_size_);
  RM_RETURN_IF_ERROR(compute_->CopyToHost(row_loss_.data(), losses.size(), losses.data()));
  double sum = 0;
  for (float loss : losses) sum += loss;
  return sum / batch_size_;
}

}  // namespace ringmaster::trainer
