#include "trainer/mpi_communicator.h"

#include <climits>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ringmaster::trainer {

absl::Status MpiError(const char* call, const char* file, int line, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  const char* base = file;
  for (const char* p = file; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  return absl::InternalError(absl::StrCat(call, " failed at ", base, ":", line, ": ",
                                          absl::string_view(text, length), " (code ", code, ")"));
}

absl::StatusOr<std::unique_ptr<MpiRuntime>> MpiRuntime::Create(int* argc, char*** argv) {
  int initialized = 0;
  RM_MPI_RETURN_IF_ERROR(MPI_Initialized(&initialized));
  if (initialized) return absl::FailedPreconditionError("MPI is already initialized");
  // MpiCommunicator makes its calls from a thread of its own, one call at a time.
  int provided = MPI_THREAD_SINGLE;
  RM_MPI_RETURN_IF_ERROR(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  std::unique_ptr<MpiRuntime> runtime(new MpiRuntime());
  if (provided < MPI_THREAD_SERIALIZED) {
    return absl::FailedPreconditionError(
        absl::StrCat("this MPI library offers thread level ", provided,
                     ", below MPI_THREAD_SERIALIZED, which the trainer needs"));
  }
  return runtime;
}

MpiRuntime::~MpiRuntime() { MPI_Finalize(); }

int MpiRuntime::world_size() const {
  int size = 1;
  if (MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS) return 1;
  return size;
}

void MpiRuntime::Abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

// Queues an MPI call for the communicator's thread, keeping its text and place for errors.
#define RM_MPI_ENQUEUE(call) (Enqueue([=, this] { return (call); }, #call, __FILE__, __LINE__))

absl::StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create() {
  std::unique_ptr<MpiCommunicator> mpi(new MpiCommunicator());
  RM_MPI_RETURN_IF_ERROR(MPI_Comm_dup(MPI_COMM_WORLD, &mpi->comm_));
  RM_MPI_RETURN_IF_ERROR(MPI_Comm_set_errhandler(mpi->comm_, MPI_ERRORS_RETURN));
  RM_MPI_RETURN_IF_ERROR(MPI_Comm_rank(mpi->comm_, &mpi->rank_));
  RM_MPI_RETURN_IF_ERROR(MPI_Comm_size(mpi->comm_, &mpi->size_));
  MPI_Comm local = MPI_COMM_NULL;
  RM_MPI_RETURN_IF_ERROR(
      MPI_Comm_split_type(mpi->comm_, MPI_COMM_TYPE_SHARED, mpi->rank_, MPI_INFO_NULL, &local));
  const int local_size_rc = MPI_Comm_size(local, &mpi->local_size_);
  MPI_Comm_free(&local);
  RM_MPI_RETURN_IF_ERROR(local_size_rc);
  // From here on only the thread calls MPI, until the destructor has joined it.
  mpi->thread_ = std::thread([m = mpi.get()] { m->Loop(); });
  return mpi;
}

MpiCommunicator::~MpiCommunicator() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    // Calls already queued still run: every rank queued the same ones.
    thread_.join();
  }
  if (!in_flight_.empty()) {
    RM_LOG(kWarning) << "MpiCommunicator destroyed with " << in_flight_.size()
                     << " allreduce(s) never waited for";
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::Loop() {
  while (true) {
    Call call;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      call = std::move(queue_.front());
      queue_.pop_front();
    }
    const int rc = call.run();
    call.done.set_value(rc == MPI_SUCCESS ? absl::OkStatus()
                                          : MpiError(call.text, call.file, call.line, rc));
  }
}

std::future<absl::Status> MpiCommunicator::Enqueue(std::function<int()> run, const char* text,
                                                   const char* file, int line) {
  Call call{std::move(run), text, file, line, {}};
  std::future<absl::Status> done = call.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(call));
  }
  wake_.notify_one();
  return done;
}

absl::StatusOr<Communicator::Handle> MpiCommunicator::StartAllreduceSum(float* data, size_t count) {
  if (count > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("allreduce of ", count, " floats exceeds MPI's int count"));
  }
  const int n = static_cast<int>(count);
  const Handle handle = next_handle_++;
  in_flight_[handle] =
      RM_MPI_ENQUEUE(MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, comm_));
  return handle;
}

absl::Status MpiCommunicator::Wait(Handle handle) {
  auto it = in_flight_.find(handle);
  if (it == in_flight_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown allreduce handle ", handle));
  }
  std::future<absl::Status> done = std::move(it->second);
  in_flight_.erase(it);
  return done.get();
}

absl::Status MpiCommunicator::Synchronize() {
  absl::Status first;
  while (!in_flight_.empty()) {
    absl::Status status = Wait(in_flight_.begin()->first);
    if (first.ok()) first = status;
  }
  return first;
}

absl::Status MpiCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast of ", bytes, " bytes is too large"));
  }
  const int n = static_cast<int>(bytes);
  return RM_MPI_ENQUEUE(MPI_Bcast(data, n, MPI_BYTE, root, comm_)).get();
}

absl::Status MpiCommunicator::Barrier() { return RM_MPI_ENQUEUE(MPI_Barrier(comm_)).get(); }

}  // namespace ringmaster::trainer
