// Synthetic training data with structure a model can learn quickly: each sample has a few
// latent factors z; its image-sized input is a fixed random projection of z plus as much
// noise, and its label is the argmax of a fixed random linear "teacher" of z. Every rank
// shares projection and teacher, so data-parallel ranks see different samples of one task, and
// the loss falls on data never seen before.
//
// Samples form one global sequence, each drawn from its own index alone: global batch g holds
// samples [g x G, (g + 1) x G) of a global batch of G, and rank r of W reads its slice
// [r x G / W, (r + 1) x G / W). The sequence is the same at every world size, so a job resumed
// at another size (an elastic resize) goes on with the samples it would have seen.
#ifndef RINGMASTER_TRAINER_SYNTHETIC_DATA_H_
#define RINGMASTER_TRAINER_SYNTHETIC_DATA_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/compute.h"

namespace ringmaster::trainer {

// splitmix64 of seed and stream: independent, reproducible seeds for each purpose and rank.
uint64_t MixSeed(uint64_t seed, uint64_t stream);

// A small generator defined here rather than std::normal_distribution, whose output differs
// between standard libraries: ranks built differently must still start identical.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform();
  // Standard normal (Box-Muller).
  float Normal();

 private:
  uint64_t state_;
  bool has_spare_ = false;
  float spare_ = 0;
};

// Latent factors per sample: few enough that a few hundred samples pin the task down.
inline constexpr int kLatentDim = 32;

// Rows x cols Gaussian matrix with entries of variance `variance`, drawn from `seed`.
std::vector<float> RandomMatrix(uint64_t seed, int rows, int cols, float variance);

// Index of the largest of each row of scores[rows x cols], as floats.
std::vector<float> ArgmaxRows(const std::vector<float>& scores, int rows, int cols);

// Sample `index` of the global sequence: `input_dim` inputs then its label (as a float). Host
// arithmetic in a fixed order, so the same bits on every rank, world size and device.
void SyntheticSample(uint64_t seed, const std::vector<float>& projection_by_latent,
                     const std::vector<float>& teacher, int num_classes, uint64_t index,
                     float* inputs, float* label);

// A fixed pool of `batches` global batches, of which this rank holds its slice, copied to the
// Compute's memory once and cycled, so the step time measures training, not data generation
// (as tf_cnn_benchmarks' synthetic data does).
class SyntheticDataset {
 public:
  // `batch_size` is per rank: the global batch is batch_size x world_size.
  static absl::StatusOr<SyntheticDataset> Create(Compute& compute, int input_dim, int num_classes,
                                                 int batch_size, int batches, uint64_t seed,
                                                 int rank, int world_size);

  // The batch for `step`: batch_size x input_dim inputs and batch_size labels.
  const float* inputs(int step) const;
  const float* labels(int step) const;

 private:
  int batches_ = 0;
  size_t input_stride_ = 0;
  size_t label_stride_ = 0;
  DeviceBuffer inputs_;
  DeviceBuffer labels_;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_SYNTHETIC_DATA_H_
