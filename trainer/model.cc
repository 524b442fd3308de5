#include "trainer/model.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::trainer {
namespace {

// Widths chosen so the three sizes take one, two and four default (25 MiB) gradient buckets.
std::vector<ModelSpec> KnownModels() {
  return {
      {"mlp-small", 3 * 32 * 32, {512, 256}, 10},            // 1.7M parameters, 6.8 MB
      {"mlp", 3 * 32 * 32, {2048, 1024, 512}, 10},           // 8.9M parameters, 36 MB
      {"mlp-large", 3 * 32 * 32, {4096, 4096, 4096}, 1000},  // 50M parameters, 201 MB
  };
}

}  // namespace

absl::StatusOr<ModelSpec> FindModel(absl::string_view name) {
  for (ModelSpec& spec : KnownModels()) {
    if (spec.name == name) return std::move(spec);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model '", name, "'; known: ", absl::StrJoin(ModelNames(), ", ")));
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const ModelSpec& spec : KnownModels()) names.push_back(spec.name);
  return names;
}

std::vector<LayerShape> LayerShapes(const ModelSpec& spec) {
  std::vector<LayerShape> layers;
  int in = spec.input_dim;
  size_t offset = 0;
  auto add = [&](int out) {
    LayerShape layer{in, out, offset};
    offset += layer.param_count();
    layers.push_back(layer);
    in = out;
  };
  for (int width : spec.hidden) add(width);
  add(spec.num_classes);
  return layers;
}

size_t ParameterCount(const ModelSpec& spec) {
  size_t total = 0;
  for (const LayerShape& layer : LayerShapes(spec)) total += layer.param_count();
  return total;
}

}  // namespace ringmaster::trainer
