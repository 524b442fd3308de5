// Where a ring computes: the GPU only when every rank has one, as their collectives must
// match. Shared by ringmaster-train and ringmaster-check.
#ifndef RINGMASTER_TRAINER_DEVICE_AGREEMENT_H_
#define RINGMASTER_TRAINER_DEVICE_AGREEMENT_H_

#include "absl/status/statusor.h"
#include "trainer/config.h"
#include "trainer/cpu_compute.h"
#include "trainer/mpi_communicator.h"

namespace ringmaster::trainer {

// Every rank calls it together (one allreduce over `mpi`). FAILED_PRECONDITION when `request`
// is kGpu and some rank has no usable GPU; rank 0 logs why `auto` fell back to the CPU.
absl::StatusOr<DeviceKind> AgreeOnDevice(DeviceRequest request, CpuCompute& host_compute,
                                         MpiCommunicator& mpi);

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_DEVICE_AGREEMENT_H_
