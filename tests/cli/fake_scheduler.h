// The scheduler of ringctl's command tests (app_test, logs_test, queue_test): it answers every
// call from answers the test scripted, one per call in order, and records what it was asked.
// A call with nothing scripted fails INTERNAL "no scripted answer". RunCli owns the client it
// connects to; a ForwardingClient hands every call to the fake the test keeps. Not thread-safe.
#ifndef RINGMASTER_TESTS_CLI_FAKE_SCHEDULER_H_
#define RINGMASTER_TESTS_CLI_FAKE_SCHEDULER_H_

#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "client.h"

namespace ringmaster::cli {

class FakeScheduler : public SchedulerClient {
 public:
  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& request) override {
    submits.push_back(request);
    return Next(submit_results);
  }
  absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& request) override {
    gets.push_back(request);
    return Next(get_results);
  }
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request) override {
    lists.push_back(request);
    return Next(list_results);
  }
  absl::StatusOr<v1::CancelJobResponse> CancelJob(const v1::CancelJobRequest& request) override {
    cancels.push_back(request);
    return Next(cancel_results);
  }
  absl::Status WatchJob(const v1::WatchJobRequest& request,
                        const std::function<void(const v1::JobEvent&)>& on_event) override {
    watches.push_back(request);
    if (watch_streams.empty()) return absl::InternalError("no scripted stream");
    WatchStream stream = watch_streams.front();
    watch_streams.pop_front();
    for (const v1::JobEvent& event : stream.events) on_event(event);
    return stream.end;
  }
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest&) override {
    return Next(worker_results);
  }
  // The next scripted stream (one chunk of its data, when it has any); with none left, every
  // read gets `log_pieces`, a chunk each, and ends with `log_end`.
  absl::Status ReadJobLogs(const v1::ReadJobLogsRequest& request,
                           const std::function<void(const v1::LogChunk&)>& on_chunk) override {
    log_reads.push_back(request);
    if (log_streams.empty()) {
      for (const std::string& piece : log_pieces) {
        v1::LogChunk chunk;
        chunk.set_data(piece);
        on_chunk(chunk);
      }
      return log_end;
    }
    LogStream stream = log_streams.front();
    log_streams.pop_front();
    v1::LogChunk chunk;
    chunk.set_data(stream.data);
    if (!stream.data.empty()) on_chunk(chunk);
    return stream.end;
  }

  absl::StatusOr<v1::QueueWithStatus> CreateQueue(const v1::CreateQueueRequest& r) override {
    queue_creates.push_back(r);
    return Next(queue_results);
  }
  absl::StatusOr<v1::QueueWithStatus> UpdateQueue(const v1::UpdateQueueRequest& r) override {
    queue_updates.push_back(r);
    return Next(queue_results);
  }
  absl::StatusOr<v1::QueueWithStatus> GetQueue(const v1::GetQueueRequest& r) override {
    queue_gets.push_back(r);
    return Next(queue_results);
  }
  absl::StatusOr<v1::ListQueuesResponse> ListQueues(const v1::ListQueuesRequest&) override {
    return Next(queue_list_results);
  }
  absl::StatusOr<v1::DeleteQueueResponse> DeleteQueue(const v1::DeleteQueueRequest& r) override {
    queue_deletes.push_back(r);
    if (queue_delete_results.empty()) return absl::InternalError("no scripted answer");
    absl::Status next = queue_delete_results.front();
    queue_delete_results.pop_front();
    if (!next.ok()) return next;
    return v1::DeleteQueueResponse();
  }

  struct LogStream {
    std::string data;
    absl::Status end;
  };
  struct WatchStream {
    std::vector<v1::JobEvent> events;
    absl::Status end;
  };

  std::deque<absl::StatusOr<v1::SubmitJobResponse>> submit_results;
  std::deque<absl::StatusOr<v1::Job>> get_results;
  std::deque<absl::StatusOr<v1::ListJobsResponse>> list_results;
  std::deque<absl::StatusOr<v1::CancelJobResponse>> cancel_results;
  std::deque<WatchStream> watch_streams;
  std::deque<absl::StatusOr<v1::ListWorkersResponse>> worker_results;
  std::deque<LogStream> log_streams;
  std::vector<std::string> log_pieces;
  absl::Status log_end = absl::NotFoundError("no worker has a log of job j-1");
  // CreateQueue, UpdateQueue and GetQueue take from one list.
  std::deque<absl::StatusOr<v1::QueueWithStatus>> queue_results;
  std::deque<absl::StatusOr<v1::ListQueuesResponse>> queue_list_results;
  std::deque<absl::Status> queue_delete_results;

  std::vector<v1::SubmitJobRequest> submits;
  std::vector<v1::ReadJobLogsRequest> log_reads;
  std::vector<v1::GetJobRequest> gets;
  std::vector<v1::ListJobsRequest> lists;
  std::vector<v1::CancelJobRequest> cancels;
  std::vector<v1::WatchJobRequest> watches;
  std::vector<v1::CreateQueueRequest> queue_creates;
  std::vector<v1::UpdateQueueRequest> queue_updates;
  std::vector<v1::GetQueueRequest> queue_gets;
  std::vector<v1::DeleteQueueRequest> queue_deletes;

 private:
  template <typename T>
  static T Next(std::deque<T>& queue) {
    if (queue.empty()) return absl::InternalError("no scripted answer");
    T next = queue.front();
    queue.pop_front();
    return next;
  }
};

// Hands every call to `to`, which the test keeps (RunCli deletes the client it was given).
class ForwardingClient : public SchedulerClient {
 public:
  explicit ForwardingClient(SchedulerClient* to) : to_(to) {}

  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& r) override {
    return to_->SubmitJob(r);
  }
  absl::StatusOr<v1::Job> GetJob(const v1::GetJobRequest& r) override { return to_->GetJob(r); }
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& r) override {
    return to_->ListJobs(r);
  }
  absl::StatusOr<v1::CancelJobResponse> CancelJob(const v1::CancelJobRequest& r) override {
    return to_->CancelJob(r);
  }
  absl::Status WatchJob(const v1::WatchJobRequest& r,
                        const std::function<void(const v1::JobEvent&)>& f) override {
    return to_->WatchJob(r, f);
  }
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers(const v1::ListWorkersRequest& r) override {
    return to_->ListWorkers(r);
  }
  absl::Status ReadJobLogs(const v1::ReadJobLogsRequest& r,
                           const std::function<void(const v1::LogChunk&)>& f) override {
    return to_->ReadJobLogs(r, f);
  }
  absl::StatusOr<v1::ClearWorkerHealthResponse> ClearWorkerHealth(
      const v1::ClearWorkerHealthRequest& r) override {
    return to_->ClearWorkerHealth(r);
  }
  void AwaitRetry(std::chrono::milliseconds wait,
                  const std::function<void(std::chrono::milliseconds)>& sleep) override {
    to_->AwaitRetry(wait, sleep);
  }
  absl::StatusOr<v1::QueueWithStatus> CreateQueue(const v1::CreateQueueRequest& r) override {
    return to_->CreateQueue(r);
  }
  absl::StatusOr<v1::QueueWithStatus> UpdateQueue(const v1::UpdateQueueRequest& r) override {
    return to_->UpdateQueue(r);
  }
  absl::StatusOr<v1::QueueWithStatus> GetQueue(const v1::GetQueueRequest& r) override {
    return to_->GetQueue(r);
  }
  absl::StatusOr<v1::ListQueuesResponse> ListQueues(const v1::ListQueuesRequest& r) override {
    return to_->ListQueues(r);
  }
  absl::StatusOr<v1::DeleteQueueResponse> DeleteQueue(const v1::DeleteQueueRequest& r) override {
    return to_->DeleteQueue(r);
  }

 private:
  SchedulerClient* to_;
};

}  // namespace ringmaster::cli

#endif  // RINGMASTER_TESTS_CLI_FAKE_SCHEDULER_H_
