#include "trainer/local_communicator.h"

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {

struct LocalCommunicator::Group {
  explicit Group(int size) : size(size), buffers(size) {}

  const int size;
  std::mutex mu;
  std::condition_variable done;
  // The round being gathered: what the first arriver asked for, and everyone's buffer.
  uint64_t generation = 0;
  int arrived = 0;
  Op op = Op::kBarrier;
  size_t op_size = 0;
  int op_root = 0;
  bool mismatch = false;
  std::vector<void*> buffers;
  // Outcome of the last completed round.
  absl::Status status;
};

std::vector<std::unique_ptr<LocalCommunicator>> LocalCommunicator::CreateGroup(int size) {
  RM_CHECK(size >= 1);
  auto group = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<LocalCommunicator>> members;
  for (int rank = 0; rank < size; ++rank) {
    members.push_back(std::unique_ptr<LocalCommunicator>(new LocalCommunicator(group, rank)));
  }
  return members;
}

int LocalCommunicator::size() const { return group_->size; }

absl::StatusOr<Communicator::Handle> LocalCommunicator::StartAllreduceSum(float* data,
                                                                          size_t count) {
  Handle handle = next_handle_++;
  started_[handle] = {data, count};
  return handle;
}

absl::Status LocalCommunicator::Wait(Handle handle) {
  if (handle == 0 || handle >= next_handle_) {
    return absl::InvalidArgumentError(absl::StrCat("unknown allreduce handle ", handle));
  }
  // Earlier starts complete first, as they would on a real network.
  while (!started_.empty() && started_.begin()->first <= handle) {
    auto [data, count] = started_.begin()->second;
    started_.erase(started_.begin());
    RM_RETURN_IF_ERROR(Rendezvous(Op::kAllreduceSum, data, count, 0));
  }
  return absl::OkStatus();
}

absl::Status LocalCommunicator::Synchronize() {
  if (started_.empty()) return absl::OkStatus();
  return Wait(started_.rbegin()->first);
}

absl::Status LocalCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " of ", size()));
  }
  return Rendezvous(Op::kBroadcast, data, bytes, root);
}

absl::Status LocalCommunicator::Barrier() { return Rendezvous(Op::kBarrier, nullptr, 0, 0); }

absl::Status LocalCommunicator::Rendezvous(Op op, void* data, size_t size, int root) {
  Group& g = *group_;
  std::unique_lock<std::mutex> lock(g.mu);
  if (g.arrived == 0) {
    g.op = op;
    g.op_size = size;
    g.op_root = root;
    g.mismatch = false;
  } else if (g.op != op || g.op_size != size || g.op_root != root) {
    g.mismatch = true;
  }
  g.buffers[rank_] = data;
  if (++g.arrived < g.size) {
    const uint64_t generation = g.generation;
    g.done.wait(lock, [&] { return g.generation != generation; });
    return g.status;
  }
  // The last to arrive performs the collective while the others wait.
  g.status = absl::OkStatus();
  if (g.mismatch) {
    g.status = absl::InvalidArgumentError(
        "ranks called different collectives (or sizes) in the same round");
  } else if (op == Op::kAllreduceSum) {
    for (size_t i = 0; i < size; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < g.size; ++r) sum += static_cast<float*>(g.buffers[r])[i];
      for (int r = 0; r < g.size; ++r) static_cast<float*>(g.buffers[r])[i] = sum;
    }
  } else if (op == Op::kBroadcast) {
    for (int r = 0; r < g.size; ++r) {
      if (r != root && size > 0) std::memcpy(g.buffers[r], g.buffers[root], size);
    }
  }
  g.arrived = 0;
  ++g.generation;
  g.done.notify_all();
  return g.status;
}

}  // namespace ringmaster::trainer
