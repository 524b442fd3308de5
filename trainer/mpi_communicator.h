// Collectives over MPI on host buffers; also the job's bootstrap (rank, size, NCCL's id).
#ifndef RINGMASTER_TRAINER_MPI_COMMUNICATOR_H_
#define RINGMASTER_TRAINER_MPI_COMMUNICATOR_H_

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/communicator.h"

// Checks an MPI return code at the call, in the shape of NCCL's checks.h: on failure, returns
// an absl::Status holding the call's text, file:line and MPI's own message.
#define RM_MPI_RETURN_IF_ERROR(call)                                                 \
  do {                                                                               \
    const int rm_mpi_rc_ = (call);                                                   \
    if (rm_mpi_rc_ != MPI_SUCCESS) {                                                 \
      return ::ringmaster::trainer::MpiError(#call, __FILE__, __LINE__, rm_mpi_rc_); \
    }                                                                                \
  } while (false)

namespace ringmaster::trainer {

absl::Status MpiError(const char* call, const char* file, int line, int code);

// MPI's lifetime in this process: MPI_Init on Create, MPI_Finalize on destruction. Create
// one in main() before any communicator and destroy it after all of them.
class MpiRuntime {
 public:
  static absl::StatusOr<std::unique_ptr<MpiRuntime>> Create(int* argc, char*** argv);
  ~MpiRuntime();

  int world_size() const;
  // Ends every rank of the job (MPI_Abort). For a failure the other ranks do not know of: they
  // may be blocked in a collective this rank will never join, and MPI_Finalize would wait.
  [[noreturn]] void Abort(int exit_code);
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

 private:
  MpiRuntime() = default;
};

// Owns a duplicate of MPI_COMM_WORLD whose errors are returned rather than fatal, and one
// thread that makes every MPI call on it, in the order the collectives were started (as
// Horovod's background thread does). An allreduce start queues a blocking MPI_Allreduce for
// that thread and returns, so the transfer runs while the caller computes the next layers;
// Open MPI's non-blocking collectives would advance only inside MPI calls, and slower. Needs
// MPI_THREAD_SERIALIZED (MpiRuntime asks for it). Not thread-safe: one caller thread.
class MpiCommunicator : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<MpiCommunicator>> Create();
  ~MpiCommunicator() override;

  absl::string_view name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemoryKind memory() const override { return MemoryKind::kHost; }

  absl::StatusOr<Handle> StartAllreduceSum(float* data, size_t count) override;
  absl::Status Wait(Handle handle) override;
  absl::Status Synchronize() override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;

  // Ranks on this machine (sharing memory with this one), to split its cores among them.
  int local_size() const { return local_size_; }

 private:
  struct Call {
    std::function<int()> run;    // returns the MPI error code
    const char* text = nullptr;  // the call as written, for the error message
    const char* file = nullptr;
    int line = 0;
    std::promise<absl::Status> done;
  };

  MpiCommunicator() = default;
  // Queues `run` for the MPI thread; the future holds its outcome.
  std::future<absl::Status> Enqueue(std::function<int()> run, const char* text, const char* file,
                                    int line);
  void Loop();

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int local_size_ = 1;
  std::map<Handle, std::future<absl::Status>> in_flight_;
  Handle next_handle_ = 1;

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Call> queue_;  // guarded by mu_
  bool stop_ = false;       // guarded by mu_
  std::thread thread_;
};

}  // namespace ringmaster::trainer

#endif  // RINGMASTER_TRAINER_MPI_COMMUNICATOR_H_
