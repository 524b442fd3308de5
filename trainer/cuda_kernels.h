// The few element-wise and reduction kernels CudaCompute needs beside cuBLAS. Each launcher
// enqueues on `stream` and returns the launch's error.
#ifndef RINGMASTER_TRAINER_CUDA_KERNELS_H_
#define RINGMASTER_TRAINER_CUDA_KERNELS_H_

#include <cuda_runtime.h>

#include <cstddef>

namespace ringmaster::trainer {

cudaError_t LaunchAddBias(const float* bias, int rows, int cols, bool relu, float* y,
                          cudaStream_t stream);
cudaError_t LaunchReluBackward(const float* y, size_t count, float* dy, cudaStream_t stream);
cudaError_t LaunchColumnSums(const float* x, int rows, int cols, float* out, cudaStream_t stream);
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const float* labels, int rows, int cols,
                                      float* row_loss, float* dlogits, cudaStream_t stream);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_CUDA_KERNELS_H_
