// The MLPs the trainer knows by name, and the layout of their parameters.
#ifndef RINGMASTER_TRAINER_MODEL_H_
#define RINGMASTER_TRAINER_MODEL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::trainer {

struct ModelSpec {
  std::string name;
  int input_dim = 3 * 32 * 32;  // a CIFAR-sized image, flattened
  std::vector<int> hidden;      // widths of the ReLU layers, input side first
  int num_classes = 10;
};

// "mlp-small", "mlp", "mlp-large"; INVALID_ARGUMENT listing the known names otherwise.
absl::StatusOr<ModelSpec> FindModel(absl::string_view name);
std::vector<std::string> ModelNames();

// One fully connected layer y = x W^T + b. Parameters of all layers sit in one flat buffer,
// layer after layer in forward order, each as [W (out x in, row-major) | b (out)]: a run of
// consecutive layers is one contiguous range, so a gradient bucket is a slice, never a copy.
struct LayerShape {
  int in = 0;
  int out = 0;
  size_t offset = 0;  // index of W's first element in the flat buffer

  size_t weight_count() const { return static_cast<size_t>(in) * out; }
  size_t bias_offset() const { return offset + weight_count(); }
  size_t param_count() const { return weight_count() + out; }
};

std::vector<LayerShape> LayerShapes(const ModelSpec& spec);
size_t ParameterCount(const ModelSpec& spec);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_MODEL_H_
