// Runs a function once per rank of an in-process LocalCommunicator group, each on its own
// thread, as mpirun would run processes.
#ifndef RINGMASTER_TESTS_TRAINER_LOCAL_RANKS_H_
#define RINGMASTER_TESTS_TRAINER_LOCAL_RANKS_H_

#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "trainer/local_communicator.h"

namespace ringmaster::trainer::testing {

inline std::vector<absl::Status> RunOnLocalRanks(
    int ranks, const std::function<absl::Status(LocalCommunicator&)>& body) {
  std::vector<std::unique_ptr<LocalCommunicator>> group = LocalCommunicator::CreateGroup(ranks);
  std::vector<absl::Status> statuses(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] { statuses[r] = body(*group[r]); });
  }
  for (std::thread& thread : threads) thread.join();
  return statuses;
}

}  // namespace ringmaster::trainer::testing

#endif  // RINGMASTER_TESTS_TRAINER_LOCAL_RANKS_H_
