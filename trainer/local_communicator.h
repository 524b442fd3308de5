// In-process ranks for unit tests: a real Communicator over host memory with no network, so
// the trainer's data-parallel logic (bucketing, averaging, identical weights) is testable in
// one process.
#ifndef RINGMASTER_TRAINER_LOCAL_COMMUNICATOR_H_
#define RINGMASTER_TRAINER_LOCAL_COMMUNICATOR_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "trainer/communicator.h"

namespace ringmaster::trainer {

// One rank of a group made by CreateGroup. Each member must be driven by its own thread
// (a group of one needs none); a collective completes when every member has called it.
// Allreduce starts are deferred: the reduction happens in Wait, in start order. Sums are
// taken in rank order, so every member gets bitwise the same result.
class LocalCommunicator : public Communicator {
 public:
  static std::vector<std::unique_ptr<LocalCommunicator>> CreateGroup(int size);

  absl::string_view name() const override { return "local"; }
  int rank() const override { return rank_; }
  int size() const override;
  MemoryKind memory() const override { return MemoryKind::kHost; }

  absl::StatusOr<Handle> StartAllreduceSum(float* data, size_t count) override;
  absl::Status Wait(Handle handle) override;
  absl::Status Synchronize() override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;

 private:
  struct Group;
  enum class Op { kAllreduceSum, kBroadcast, kBarrier };

  LocalCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  // Blocks until every member has arrived with the same op and size, then performs it.
  absl::Status Rendezvous(Op op, void* data, size_t size, int root);

  std::shared_ptr<Group> group_;
  int rank_;
  std::map<Handle, std::pair<float*, size_t>> started_;
  Handle next_handle_ = 1;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_LOCAL_COMMUNICATOR_H_
