// Checks of CUDA, cuBLAS and NCCL return codes at the call, in the shape of NCCL's checks.h:
// on failure the enclosing function returns an absl::Status with the call's text, file:line
// and the library's own message.
#ifndef RINGMASTER_TRAINER_CUDA_CHECKS_H_
#define RINGMASTER_TRAINER_CUDA_CHECKS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/status/status.h"

namespace ringmaster::trainer {

absl::Status CudaError(const char* call, const char* file, int line, cudaError_t error);
absl::Status CublasError(const char* call, const char* file, int line, cublasStatus_t status);
absl::Status NcclError(const char* call, const char* file, int line, ncclResult_t result);

}  // namespace ringmaster::trainer

#define RM_CUDA_RETURN_IF_ERROR(call)                                                     \
  do {                                                                                    \
    const cudaError_t rm_cuda_error_ = (call);                                            \
    if (rm_cuda_error_ != cudaSuccess) {                                                  \
      return ::ringmaster::trainer::CudaError(#call, __FILE__, __LINE__, rm_cuda_error_); \
    }                                                                                     \
  } while (false)

#define RM_CUBLAS_RETURN_IF_ERROR(call)                                                        \
  do {                                                                                         \
    const cublasStatus_t rm_cublas_status_ = (call);                                           \
    if (rm_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                          \
      return ::ringmaster::trainer::CublasError(#call, __FILE__, __LINE__, rm_cublas_status_); \
    }                                                                                          \
  } while (false)

#define RM_NCCL_RETURN_IF_ERROR(call)                                                      \
  do {                                                                                     \
    const ncclResult_t rm_nccl_result_ = (call);                                           \
    if (rm_nccl_result_ != ncclSuccess) {                                                  \
      return ::ringmaster::trainer::NcclError(#call, __FILE__, __LINE__, rm_nccl_result_); \
    }                                                                                      \
  } while (false)

#endif  // RINGMASTER_TRAINER_CUDA_CHECKS_H_
