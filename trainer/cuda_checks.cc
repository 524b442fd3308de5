#include "trainer/cuda_checks.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ringmaster::trainer {
namespace {

absl::string_view BaseName(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash == nullptr ? file : slash + 1;
}

}  // namespace

absl::Status CudaError(const char* call, const char* file, int line, cudaError_t error) {
  // Launch errors are sticky until read; read it so the next check sees its own.
  cudaGetLastError();
  std::string message = absl::StrCat(call, " failed at ", BaseName(file), ":", line, ": ",
                                     cudaGetErrorString(error), " (", cudaGetErrorName(error), ")");
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status CublasError(const char* call, const char* file, int line, cublasStatus_t status) {
  std::string message = absl::StrCat(call, " failed at ", BaseName(file), ":", line, ": ",
                                     cublasGetStatusString(status));
  if (status == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status NcclError(const char* call, const char* file, int line, ncclResult_t result) {
  std::string message = absl::StrCat(call, " failed at ", BaseName(file), ":", line, ": ",
                                     ncclGetErrorString(result));
  // NCCL keeps a more specific message for the last failure; it names the peer or the call.
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && last[0] != '\0') {
    absl::StrAppend(&message, " (", last, ")");
  }
  // A remote or system error is a peer or the network going away, not this rank's input.
  if (result == ncclRemoteError || result == ncclSystemError) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

}  // namespace ringmaster::trainer
