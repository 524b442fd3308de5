#include "trainer/cuda_kernels.h"

namespace ringmaster::trainer {
namespace {

constexpr int kThreads = 256;

int BlocksFor(size_t count) {
  // Grid-stride loops below cover any count; cap the grid at a size every GPU accepts.
  size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks == 0 ? 1 : blocks) : 65535);
}

__global__ void AddBiasKernel(const float* bias, int rows, int cols, bool relu, float* y) {
  const size_t total = static_cast<size_t>(rows) * cols;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = y[i] + bias[i % cols];
    y[i] = relu && v < 0.0f ? 0.0f : v;
  }
}

__global__ void ReluBackwardKernel(const float* y, size_t count, float* dy) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if (y[i] <= 0.0f) dy[i] = 0.0f;
  }
}

// One thread per column: neighbouring threads read neighbouring floats of each row.
__global__ void ColumnSumsKernel(const float* x, int rows, int cols, float* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum += x[static_cast<size_t>(r) * cols + c];
  out[c] = sum;
}

// One thread per row; rows are a batch (hundreds) and classes at most a thousand or so.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const float* labels, int rows,
                                          int cols, float* row_loss, float* dlogits) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* z = logits + static_cast<size_t>(r) * cols;
  float* dz = dlogits + static_cast<size_t>(r) * cols;
  const int label = static_cast<int>(labels[r]);
  float max = z[0];
  for (int c = 1; c < cols; ++c) max = fmaxf(max, z[c]);
  float sum = 0.0f;
  for (int c = 0; c < cols; ++c) {
    dz[c] = expf(z[c] - max);
    sum += dz[c];
  }
  row_loss[r] = logf(sum) + max - z[label];
  const float inv_rows = 1.0f / rows;
  const float scale = inv_rows / sum;
  for (int c = 0; c < cols; ++c) dz[c] *= scale;
  dz[label] -= inv_rows;
}

}  // namespace

cudaError_t LaunchAddBias(const float* bias, int rows, int cols, bool relu, float* y,
                          cudaStream_t stream) {
  AddBiasKernel<<<BlocksFor(static_cast<size_t>(rows) * cols), kThreads, 0, stream>>>(
      bias, rows, cols, relu, y);
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(const float* y, size_t count, float* dy, cudaStream_t stream) {
  ReluBackwardKernel<<<BlocksFor(count), kThreads, 0, stream>>>(y, count, dy);
  return cudaGetLastError();
}

cudaError_t LaunchColumnSums(const float* x, int rows, int cols, float* out, cudaStream_t stream) {
  ColumnSumsKernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, stream>>>(x, rows, cols, out);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const float* labels, int rows, int cols,
                                      float* row_loss, float* dlogits, cudaStream_t stream) {
  SoftmaxCrossEntropyKernel<<<(rows + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      logits, labels, rows, cols, row_loss, dlogits);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer
