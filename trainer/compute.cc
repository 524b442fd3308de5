#include "trainer/compute.h"

#include "common/status_macros.h"

namespace ringmaster::trainer {

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(Compute& compute, size_t count) {
  DeviceBuffer buffer;
  RM_ASSIGN_OR_RETURN(buffer.data_, compute.Allocate(count));
  buffer.compute_ = &compute;
  buffer.size_ = count;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    compute_ = std::exchange(other.compute_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (data_ != nullptr) compute_->Free(data_);
  compute_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ringmaster::trainer
