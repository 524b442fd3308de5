#include "trainer/synthetic_data.h"

#include <algorithm>
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

absl::StatusOr<SyntheticDataset> SyntheticDataset::Create(Compute& compute, int input_dim,
                                                          int num_classes, int batch_size,
                                                          int batches, uint64_t seed, int rank) {
  SyntheticDataset data;
  data.batches_ = batches;
  data.input_stride_ = static_cast<size_t>(batch_size) * input_dim;
  data.label_stride_ = batch_size;
  RM_ASSIGN_OR_RETURN(data.inputs_, DeviceBuffer::Allocate(compute, data.input_stride_ * batches));
  RM_ASSIGN_OR_RETURN(data.labels_, DeviceBuffer::Allocate(compute, data.label_stride_ * batches));
  // x = P z + noise: P's variance 1/k gives the signal unit variance per input, like the noise.
  const int k = kLatentDim;
  const std::vector<float> teacher = RandomMatrix(MixSeed(seed, 0x7eac), num_classes, k, 1.0f);
  const std::vector<float> projection = RandomMatrix(MixSeed(seed, 0x9201), input_dim, k, 1.0f / k);
  RM_ASSIGN_OR_RETURN(DeviceBuffer projection_buffer,
                      DeviceBuffer::Allocate(compute, projection.size()));
  RM_RETURN_IF_ERROR(
      compute.CopyFromHost(projection.data(), projection.size(), projection_buffer.data()));
  RM_ASSIGN_OR_RETURN(DeviceBuffer latent_buffer,
                      DeviceBuffer::Allocate(compute, size_t{1} * batch_size * k));
  std::vector<float> inputs(data.input_stride_);
  std::vector<float> latent(latent_buffer.size());
  std::vector<float> scores(static_cast<size_t>(batch_size) * num_classes);
  Rng rng(MixSeed(seed, 0x1000 + static_cast<uint64_t>(rank)));
  for (int b = 0; b < batches; ++b) {
    for (float& z : latent) z = rng.Normal();
    for (float& noise : inputs) noise = rng.Normal();
    float* device_inputs = data.inputs_.data() + b * data.input_stride_;
    RM_RETURN_IF_ERROR(compute.CopyFromHost(inputs.data(), inputs.size(), device_inputs));
    RM_RETURN_IF_ERROR(compute.CopyFromHost(latent.data(), latent.size(), latent_buffer.data()));
    // The projection is a GEMM on the Compute: quick even for large batches on a GPU.
    RM_RETURN_IF_ERROR(compute.Gemm(false, true, batch_size, input_dim, k, 1.0f,
                                    latent_buffer.data(), projection_buffer.data(), 1.0f,
                                    device_inputs));
    for (int s = 0; s < batch_size; ++s) {
      for (int c = 0; c < num_classes; ++c) {
        float score = 0;
        for (int i = 0; i < k; ++i) {
          score += teacher[static_cast<size_t>(c) * k + i] * latent[static_cast<size_t>(s) * k + i];
        }
        scores[static_cast<size_t>(s) * num_classes + c] = score;
      }
    }
    const std::vector<float> labels = ArgmaxRows(scores, batch_size, num_classes);
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
