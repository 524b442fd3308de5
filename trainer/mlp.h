// A multilayer perceptron (ReLU hidden layers, softmax cross-entropy output) with its forward
// pass, backward pass and SGD step, written once against Compute so the same code runs on the
// CPU and the GPU.
#ifndef RINGMASTER_TRAINER_MLP_H_
#define RINGMASTER_TRAINER_MLP_H_

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/compute.h"
#include "trainer/model.h"

namespace ringmaster::trainer {

// Owns the parameters, their gradients (same flat layout, see LayerShape) and the activations
// of one batch, all in the Compute's memory. The Compute must outlive the Mlp. Not
// thread-safe.
class Mlp {
 public:
  static absl::StatusOr<Mlp> Create(Compute& compute, const ModelSpec& spec, int batch_size);

  // Deterministic in `seed` alone, so every rank starts from the same weights: He-normal
  // weights, zero biases.
  absl::Status InitParameters(uint64_t seed);
  absl::Status SetParameters(const std::vector<float>& host);
  absl::StatusOr<std::vector<float>> ParametersToHost();
  absl::StatusOr<std::vector<float>> GradientsToHost();

  // inputs: batch x input_dim; labels: batch class indices as floats; both in Compute memory.
  absl::Status Forward(const float* inputs, const float* labels);
  // Writes every layer's gradient of the batch's mean loss, last layer first, calling
  // `on_layer_ready(l)` as soon as layer l's gradient is complete. Needs Forward first.
  absl::Status Backward(const std::function<absl::Status(int layer)>& on_layer_ready);
  // Mean loss of the last Forward (copies to the host, so it waits for the device).
  absl::StatusOr<double> Loss();

  const std::vector<LayerShape>& layers() const { return layers_; }
  size_t parameter_count() const { return parameters_.size(); }
  float* parameters() { return parameters_.data(); }
  float* gradients() { return gradients_.data(); }
  int batch_size() const { return batch_size_; }

 private:
  Mlp(Compute& compute, std::vector<LayerShape> layers, int batch_size)
      : compute_(&compute), layers_(std::move(layers)), batch_size_(batch_size) {}

  Compute* compute_;
  std::vector<LayerShape> layers_;
  int batch_size_;
  DeviceBuffer parameters_;
  DeviceBuffer gradients_;
  // activations_[l]: output of layer l (after ReLU for hidden layers; logits for the last).
  std::vector<DeviceBuffer> activations_;
  // Backward ping-pongs the gradient flowing down between these two.
  std::array<DeviceBuffer, 2> delta_;
  DeviceBuffer row_loss_;
  const float* inputs_ = nullptr;
  const float* labels_ = nullptr;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_MLP_H_
