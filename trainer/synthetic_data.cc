#include "trainer/synthetic_data.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "common/status_macros.h"

namespace ringmaster::trainer {

uint64_t MixSeed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Rng::Next() {
  state_ += 0x9e3779b97f4a7c15ull;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

float Rng::Normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - Uniform();  // (0, 1]: log stays finite
  const double u2 = Uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = static_cast<float>(r * std::sin(2.0 * std::numbers::pi * u2));
  has_spare_ = true;
  return static_cast<float>(r * std::cos(2.0 * std::numbers::pi * u2));
}

std::vector<float> RandomMatrix(uint64_t seed, int rows, int cols, float variance) {
  Rng rng(seed);
  const float stddev = std::sqrt(variance);
  std::vector<float> matrix(static_cast<size_t>(rows) * cols);
  for (float& w : matrix) w = stddev * rng.Normal();
  return matrix;
}

std::vector<float> ArgmaxRows(const std::vector<float>& scores, int rows, int cols) {
  std::vector<float> labels(rows);
  for (int r = 0; r < rows; ++r) {
    const float* row = scores.data() + static_cast<size_t>(r) * cols;
    labels[r] = static_cast<float>(std::max_element(row, row + cols) - row);
  }
  return labels;
}

void SyntheticSample(uint64_t seed, const std::vector<float>& projection_by_latent,
                     const std::vector<float>& teacher, int num_classes, uint64_t index,
                     float* inputs, float* label) {
  const int k = kLatentDim;
  const size_t input_dim = projection_by_latent.size() / k;
  Rng rng(MixSeed(MixSeed(seed, 0x5a3b1e), index));
  std::array<float, kLatentDim> latent;
  for (float& z : latent) z = rng.Normal();
  for (size_t j = 0; j < input_dim; ++j) inputs[j] = rng.Normal();
  // x = noise + P z, latent factor by factor: each input sums in the same order everywhere.
  for (int i = 0; i < k; ++i) {
    const float* column = projection_by_latent.data() + static_cast<size_t>(i) * input_dim;
    for (size_t j = 0; j < input_dim; ++j) inputs[j] += column[j] * latent[i];
  }
  std::vector<float> scores(num_classes);
  for (int c = 0; c < num_classes; ++c) {
    float score = 0;
    for (int i = 0; i < k; ++i) score += teacher[static_cast<size_t>(c) * k + i] * latent[i];
    scores[c] = score;
  }
  *label = ArgmaxRows(scores, 1, num_classes)[0];
}

absl::StatusOr<SyntheticDataset> SyntheticDataset::Create(Compute& compute, int input_dim,
                                                          int num_classes, int batch_size,
                                                          int batches, uint64_t seed, int rank,
                                                          int world_size) {
  SyntheticDataset data;
  data.batches_ = batches;
  data.input_stride_ = static_cast<size_t>(batch_size) * input_dim;
  data.label_stride_ = batch_size;
  RM_ASSIGN_OR_RETURN(data.inputs_, DeviceBuffer::Allocate(compute, data.input_stride_ * batches));
  RM_ASSIGN_OR_RETURN(data.labels_, DeviceBuffer::Allocate(compute, data.label_stride_ * batches));
  // P's variance 1/k gives the signal unit variance per input, like the noise. Kept transposed
  // (one row per latent factor) for the sample loop.
  const int k = kLatentDim;
  const std::vector<float> teacher = RandomMatrix(MixSeed(seed, 0x7eac), num_classes, k, 1.0f);
  const std::vector<float> projection = RandomMatrix(MixSeed(seed, 0x9201), input_dim, k, 1.0f / k);
  std::vector<float> projection_by_latent(projection.size());
  for (int j = 0; j < input_dim; ++j) {
    for (int i = 0; i < k; ++i) {
      projection_by_latent[static_cast<size_t>(i) * input_dim + j] =
          projection[static_cast<size_t>(j) * k + i];
    }
  }
  const uint64_t global_batch = static_cast<uint64_t>(batch_size) * world_size;
  std::vector<float> inputs(data.input_stride_);
  std::vector<float> labels(batch_size);
  for (int b = 0; b < batches; ++b) {
    const uint64_t first = b * global_batch + static_cast<uint64_t>(rank) * batch_size;
    for (int s = 0; s < batch_size; ++s) {
      SyntheticSample(seed, projection_by_latent, teacher, num_classes, first + s,
                      inputs.data() + static_cast<size_t>(s) * input_dim, &labels[s]);
    }
    RM_RETURN_IF_ERROR(compute.CopyFromHost(inputs.data(), inputs.size(),
                                            data.inputs_.data() + b * data.input_stride_));
    RM_RETURN_IF_ERROR(compute.CopyFromHost(labels.data(), labels.size(),
                                            data.labels_.data() + b * data.label_stride_));
  }
  return data;
}

const float* SyntheticDataset::inputs(int step) const {
  return inputs_.data() + static_cast<size_t>(step % batches_) * input_stride_;
}

const float* SyntheticDataset::labels(int step) const {
  return labels_.data() + static_cast<size_t>(step % batches_) * label_stride_;
}

}  // namespace ringmaster::trainer
