// checkpoint_diff A B [MAX_ABS]: how far apart the weights of two ringmaster-train checkpoint
// files are, for check_elastic.sh. Prints one line of figures (and the optimizer state's
// largest difference, when there is one); exits 1 when the files do not read back, hold
// different models, steps or optimizer state sizes, or differ by more than MAX_ABS in some
// weight (given 0, any difference at all fails: a bit-identical check).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/checkpoint.h"

namespace {

absl::StatusOr<ringmaster::trainer::TrainingCheckpoint> Read(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return ringmaster::trainer::DecodeCheckpoint(bytes.str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s A.rmck B.rmck [MAX_ABS]\n", argv[0]);
    return 2;
  }
  auto a = Read(argv[1]);
  auto b = Read(argv[2]);
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "cannot read: %s / %s\n", a.status().ToString().c_str(),
                 b.status().ToString().c_str());
    return 1;
  }
  if (a->model != b->model || a->step != b->step || a->parameters.size() != b->parameters.size() ||
      a->optimizer_state.size() != b->optimizer_state.size()) {
    std::fprintf(stderr, "not comparable: %s step %lld (%zu weights) vs %s step %lld (%zu)\n",
                 a->model.c_str(), static_cast<long long>(a->step), a->parameters.size(),
                 b->model.c_str(), static_cast<long long>(b->step), b->parameters.size());
    return 1;
  }
  double max_abs = 0, max_weight = 0, sum_sq = 0;
  size_t differing = 0;
  for (size_t i = 0; i < a->parameters.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a->parameters[i]) - b->parameters[i]);
    max_abs = std::max(max_abs, d);
    max_weight = std::max(max_weight, std::fabs(static_cast<double>(a->parameters[i])));
    sum_sq += d * d;
    if (std::bit_cast<uint32_t>(a->parameters[i]) != std::bit_cast<uint32_t>(b->parameters[i])) {
      ++differing;
    }
  }
  const double rms = std::sqrt(sum_sq / std::max<size_t>(1, a->parameters.size()));
  std::printf(
      "step %lld: %zu of %zu weights differ; max |a-b| %.3g (largest |weight| %.3g), rms %.3g; "
      "written at %d x %d and %d x %d (ranks x batch)\n",
      static_cast<long long>(a->step), differing, a->parameters.size(), max_abs, max_weight, rms,
      a->world_size, a->batch_size, b->world_size, b->batch_size);
  if (!a->optimizer_state.empty()) {
    double state_max = 0;
    for (size_t i = 0; i < a->optimizer_state.size(); ++i) {
      state_max = std::max(
          state_max, std::fabs(static_cast<double>(a->optimizer_state[i]) - b->optimizer_state[i]));
    }
    std::printf("  optimizer state (momentum %g): max |a-b| %.3g\n", a->momentum, state_max);
  }
  if (argc == 4) {
    const double bound = std::atof(argv[3]);
    // 0 asks for the same bits (so -0 is not 0).
    if (bound == 0 ? differing != 0 || std::isnan(max_abs) : !(max_abs <= bound)) {
      std::fprintf(stderr, "FAIL: max |a-b| %.3g is above %s\n", max_abs, argv[3]);
      return 1;
    }
  }
  return 0;
}
