// Compute on one CUDA device: cuBLAS for the GEMMs and AXPY, small kernels for the rest.
#ifndef RINGMASTER_TRAINER_CUDA_COMPUTE_H_
#define RINGMASTER_TRAINER_CUDA_COMPUTE_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "trainer/compute.h"

namespace ringmaster::trainer {

// Owns a CUDA stream and a cuBLAS handle bound to it on the device it was created for; all
// work is enqueued on that stream in call order. Makes its device current at creation (the
// process uses one device). Not thread-safe.
class CudaCompute : public Compute {
 public:
  static absl::StatusOr<std::unique_ptr<CudaCompute>> Create(int device);
  ~CudaCompute() override;

  cudaStream_t stream() const { return stream_; }

  std::string name() const override { return name_; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }

  absl::StatusOr<float*> Allocate(size_t count) override;
  void Free(float* data) override;
  absl::Status CopyFromHost(const float* host, size_t count, float* dst) override;
  absl::Status CopyToHost(const float* src, size_t count, float* host) override;
  absl::Status Synchronize() override;

  absl::Status Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                    const float* a, const float* b, float beta, float* c) override;
  absl::Status AddBias(const float* bias, int rows, int cols, bool relu, float* y) override;
  absl::Status ReluBackward(const float* y, size_t count, float* dy) override;
  absl::Status ColumnSums(const float* x, int rows, int cols, float* out) override;
  absl::Status SoftmaxCrossEntropy(const float* logits, const float* labels, int rows, int cols,
                                   float* row_loss, float* dlogits) override;
  absl::Status Axpy(float alpha, const float* x, size_t count, float* y) override;
  absl::Status Scale(float alpha, size_t count, float* x) override;

 private:
  CudaCompute() = default;

  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_CUDA_COMPUTE_H_
