#include "trainer/cuda_compute.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trainer/cuda_checks.h"
#include "trainer/cuda_kernels.h"

namespace ringmaster::trainer {

absl::StatusOr<std::unique_ptr<CudaCompute>> CudaCompute::Create(int device) {
  std::unique_ptr<CudaCompute> compute(new CudaCompute());
  RM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaDeviceProp props{};
  RM_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, device));
  compute->name_ =
      absl::StrFormat("gpu %d (%s, sm_%d%d, %.0f GiB; cuBLAS)", device, props.name, props.major,
                      props.minor, static_cast<double>(props.totalGlobalMem) / (1 << 30));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&compute->stream_, cudaStreamNonBlocking));
  RM_CUBLAS_RETURN_IF_ERROR(cublasCreate(&compute->cublas_));
  RM_CUBLAS_RETURN_IF_ERROR(cublasSetStream(compute->cublas_, compute->stream_));
  return compute;
}

CudaCompute::~CudaCompute() {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::StatusOr<float*> CudaCompute::Allocate(size_t count) {
  void* data = nullptr;
  RM_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, std::max<size_t>(1, count) * sizeof(float)));
  return static_cast<float*>(data);
}

void CudaCompute::Free(float* data) {
  // cudaFree waits for the device; buffers are freed at the end of a phase, not per step.
  cudaFree(data);
}

absl::Status CudaCompute::CopyFromHost(const float* host, size_t count, float* dst) {
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, host, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
  // The host buffer may be reused as soon as this returns.
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaCompute::CopyToHost(const float* src, size_t count, float* host) {
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host, src, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaCompute::Synchronize() {
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaCompute::Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                               const float* a, const float* b, float beta, float* c) {
  // cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major C^T = op(B)^T
  // op(A)^T, so swap the operands and the m/n roles; leading dimensions stay the row lengths.
  const int lda = transpose_a ? m : k;
  const int ldb = transpose_b ? k : n;
  RM_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                                        ldb, a, lda, &beta, c, n));
  return absl::OkStatus();
}

absl::Status CudaCompute::AddBias(const float* bias, int rows, int cols, bool relu, float* y) {
  RM_CUDA_RETURN_IF_ERROR(LaunchAddBias(bias, rows, cols, relu, y, stream_));
  return absl::OkStatus();
}

absl::Status CudaCompute::ReluBackward(const float* y, size_t count, float* dy) {
  RM_CUDA_RETURN_IF_ERROR(LaunchReluBackward(y, count, dy, stream_));
  return absl::OkStatus();
}

absl::Status CudaCompute::ColumnSums(const float* x, int rows, int cols, float* out) {
  RM_CUDA_RETURN_IF_ERROR(LaunchColumnSums(x, rows, cols, out, stream_));
  return absl::OkStatus();
}

absl::Status CudaCompute::SoftmaxCrossEntropy(const float* logits, const float* labels, int rows,
                                              int cols, float* row_loss, float* dlogits) {
  RM_CUDA_RETURN_IF_ERROR(
      LaunchSoftmaxCrossEntropy(logits, labels, rows, cols, row_loss, dlogits, stream_));
  return absl::OkStatus();
}

absl::Status CudaCompute::Axpy(float alpha, const float* x, size_t count, float* y) {
  size_t done = 0;
  while (done < count) {
    const int chunk = static_cast<int>(std::min<size_t>(count - done, 1u << 30));
    RM_CUBLAS_RETURN_IF_ERROR(cublasSaxpy(cublas_, chunk, &alpha, x + done, 1, y + done, 1));
    done += chunk;
  }
  return absl::OkStatus();
}

absl::Status CudaCompute::Scale(float alpha, size_t count, float* x) {
  size_t done = 0;
  while (done < count) {
    const int chunk = static_cast<int>(std::min<size_t>(count - done, 1u << 30));
    RM_CUBLAS_RETURN_IF_ERROR(cublasSscal(cublas_, chunk, &alpha, x + done, 1));
    done += chunk;
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
