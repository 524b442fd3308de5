// Compute on the host: OpenBLAS for the GEMMs, plain loops for the rest.
#ifndef RINGMASTER_TRAINER_CPU_COMPUTE_H_
#define RINGMASTER_TRAINER_CPU_COMPUTE_H_

#include <string>

#include "trainer/compute.h"

namespace ringmaster::trainer {

// Buffers are 64-byte aligned host memory. OpenBLAS's thread count is process-wide, so
// constructing a CpuCompute with threads > 0 sets it for the whole process; threads == 0
// leaves OpenBLAS's own choice (OPENBLAS_NUM_THREADS, else one per core). Not thread-safe.
class CpuCompute : public Compute {
 public:
  explicit CpuCompute(int threads = 0);

  std::string name() const override;
  MemoryKind memory() const override { return MemoryKind::kHost; }

  absl::StatusOr<float*> Allocate(size_t count) override;
  void Free(float* data) override;
  absl::Status CopyFromHost(const float* host, size_t count, float* dst) override;
  absl::Status CopyToHost(const float* src, size_t count, float* host) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status Gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                    const float* a, const float* b, float beta, float* c) override;
  absl::Status AddBias(const float* bias, int rows, int cols, bool relu, float* y) override;
  absl::Status ReluBackward(const float* y, size_t count, float* dy) override;
  absl::Status ColumnSums(const float* x, int rows, int cols, float* out) override;
  absl::Status SoftmaxCrossEntropy(const float* logits, const float* labels, int rows, int cols,
                                   float* row_loss, float* dlogits) override;
  absl::Status Axpy(float alpha, const float* x, size_t count, float* y) override;
  absl::Status Scale(float alpha, size_t count, float* x) override;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_CPU_COMPUTE_H_
