// The arithmetic of one device, behind one interface so that the MLP, the synthetic data and
// the allreduce benchmark are written once for the CPU (OpenBLAS) and the GPU (cuBLAS plus a
// few CUDA kernels).
#ifndef RINGMASTER_TRAINER_COMPUTE_H_
#define RINGMASTER_TRAINER_COMPUTE_H_

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/communicator.h"

namespace ringmaster::trainer {

// Math on buffers of floats that live in memory(). All matrices are row-major. Work may run
// asynchronously on a device stream in call order; CopyToHost and Synchronize wait for it.
// A Compute owns its library handles (cuBLAS handle, CUDA stream); buffers from Allocate are
// returned through Free. Not thread-safe.
class Compute {
 public:
  virtual ~Compute() = default;

  // e.g. "cpu (OpenBLAS, 2 threads)"; for the start-up line.
  virtual std::string name() const = 0;
  virtual MemoryKind memory() const = 0;

  // RESOURCE_EXHAUSTED when the device is full. The contents are unspecified.
  virtual absl::StatusOr<float*> Allocate(size_t count) = 0;
  virtual void Free(float* data) = 0;
  virtual absl::Status CopyFromHost(const float* host, size_t count, float* dst) = 0;
  // Waits for earlier work, then copies.
  virtual absl::Status CopyToHost(const float* src, size_t count, float* host) = 0;
  // Blocks until all work issued so far has finished.
  virtual absl::Status Synchronize() = 0;

  // c[m x n] = alpha * op(a) * op(b) + beta * c, where op(a) is m x k and op(b) is k x n.
  virtual absl::Status Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                            const float* a, const float* b, float beta, float* c) = 0;
  // y[rows x cols] += bias (broadcast over rows), then max(y, 0) when `relu`.
  virtual absl::Status AddBias(const float* bias, int rows, int cols, bool relu, float* y) = 0;
  // dy[i] = 0 wherever y[i] <= 0: the ReLU's backward, from its output.
  virtual absl::Status ReluBackward(const float* y, size_t count, float* dy) = 0;
  // out[c] = sum over rows of x[r][c].
  virtual absl::Status ColumnSums(const float* x, int rows, int cols, float* out) = 0;
  // Softmax cross-entropy of logits[rows x cols] against labels (class indices stored as
  // floats). Writes each row's loss, and the gradient of the mean loss over the rows.
  virtual absl::Status SoftmaxCrossEntropy(const float* logits, const float* labels, int rows,
                                           int cols, float* row_loss, float* dlogits) = 0;
  // y += alpha * x.
  virtual absl::Status Axpy(float alpha, const float* x, size_t count, float* y) = 0;
  // x *= alpha.
  virtual absl::Status Scale(float alpha, size_t count, float* x) = 0;
};

// A buffer owned through the Compute that allocated it. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Allocate(Compute& compute, size_t count);
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  float* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void Reset();

  Compute* compute_ = nullptr;
  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_COMPUTE_H_
