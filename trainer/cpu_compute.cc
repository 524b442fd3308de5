#include "trainer/cpu_compute.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {

CpuCompute::CpuCompute(int threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

std::string CpuCompute::name() const {
  int threads = openblas_get_num_threads();
  return absl::StrCat("cpu (OpenBLAS, ", threads, threads == 1 ? " thread)" : " threads)");
}

absl::StatusOr<float*> CpuCompute::Allocate(size_t count) {
  // aligned_alloc wants a multiple of the alignment; 64 bytes suits AVX-512 loads.
  size_t bytes = std::max<size_t>(64, (count * sizeof(float) + 63) / 64 * 64);
  void* data = std::aligned_alloc(64, bytes);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes"));
  }
  return static_cast<float*>(data);
}

void CpuCompute::Free(float* data) { std::free(data); }

absl::Status CpuCompute::CopyFromHost(const float* host, size_t count, float* dst) {
  if (count > 0) std::memcpy(dst, host, count * sizeof(float));
  return absl::OkStatus();
}

absl::Status CpuCompute::CopyToHost(const float* src, size_t count, float* host) {
  if (count > 0) std::memcpy(host, src, count * sizeof(float));
  return absl::OkStatus();
}

absl::Status CpuCompute::Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                              const float* a, const float* b, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, transpose_a ? m : k, b,
              transpose_b ? k : n, beta, c, n);
  return absl::OkStatus();
}

absl::Status CpuCompute::AddBias(const float* bias, int rows, int cols, bool relu, float* y) {
  for (int r = 0; r < rows; ++r) {
    float* row = y + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) {
      float v = row[c] + bias[c];
      row[c] = relu && v < 0.0f ? 0.0f : v;
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::ReluBackward(const float* y, size_t count, float* dy) {
  for (size_t i = 0; i < count; ++i) {
    if (y[i] <= 0.0f) dy[i] = 0.0f;
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::ColumnSums(const float* x, int rows, int cols, float* out) {
  std::fill(out, out + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) out[c] += row[c];
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::SoftmaxCrossEntropy(const float* logits, const float* labels, int rows,
                                             int cols, float* row_loss, float* dlogits) {
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<size_t>(r) * cols;
    float* dz = dlogits + static_cast<size_t>(r) * cols;
    const int label = static_cast<int>(labels[r]);
    if (label < 0 || label >= cols) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", labels[r], " of row ", r, " is outside [0, ", cols, ")"));
    }
    // Subtracting the row's maximum keeps exp() from overflowing.
    const float max = *std::max_element(z, z + cols);
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) {
      dz[c] = std::exp(z[c] - max);
      sum += dz[c];
    }
    row_loss[r] = std::log(sum) + max - z[label];
    const float scale = inv_rows / sum;
    for (int c = 0; c < cols; ++c) dz[c] *= scale;
    dz[label] -= inv_rows;
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::Axpy(float alpha, const float* x, size_t count, float* y) {
  // cblas takes an int count; gradients of the largest model are well below 2^31.
  size_t done = 0;
  while (done < count) {
    const int chunk = static_cast<int>(std::min<size_t>(count - done, 1u << 30));
    cblas_saxpy(chunk, alpha, x + done, 1, y + done, 1);
    done += chunk;
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::Scale(float alpha, size_t count, float* x) {
  size_t done = 0;
  while (done < count) {
    const int chunk = static_cast<int>(std::min<size_t>(count - done, 1u << 30));
    cblas_sscal(chunk, alpha, x + done, 1);
    done += chunk;
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
