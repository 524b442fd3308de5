// SchedulerSession: the worker's long-lived Connect stream to the scheduler, kept up for the
// life of the process.
//
// Protocol (the worker's half of WorkerService.Connect):
//  1. open the stream and send RegisterWorker: the inventory and every rank the agent holds
//     (Agent::TakeRegistration, which also drops statuses not yet sent: the list carries them);
//  2. wait for Registered, which gives the heartbeat interval;
//  3. from then on, send the agent's rank statuses as they come and a Heartbeat whenever the
//     interval passes without one; hand every Assignment and StopJob to the agent;
//  4. when the stream breaks (scheduler restart, network), wait with jittered exponential
//     backoff (100 ms .. 1 s: a restarted scheduler gives known workers one heartbeat timeout
//     to return) and start again at 1. Ranks keep running meanwhile.
// Thread-safe: Start/Stop from one thread; the session runs its own threads.
#ifndef RINGMASTER_SERVICES_WORKER_RPC_SCHEDULER_SESSION_H_
#define RINGMASTER_SERVICES_WORKER_RPC_SCHEDULER_SESSION_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "ringmaster/v1/worker.grpc.pb.h"
#include "worker/agent.h"

namespace ringmaster::worker {

class SchedulerSession {
 public:
  // `credentials` from MakeChannelCredentials: the worker's certificate is its identity.
  SchedulerSession(std::string scheduler_addr,
                   std::shared_ptr<grpc::ChannelCredentials> credentials, Agent* agent);
  ~SchedulerSession();
  SchedulerSession(const SchedulerSession&) = delete;
  SchedulerSession& operator=(const SchedulerSession&) = delete;

  void Start();
  void Stop();

 private:
  void Run();
  // One stream's life; true when it got as far as Registered.
  bool RunOnce();

  const std::string scheduler_addr_;
  Agent* const agent_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* current_ ABSL_GUARDED_BY(mu_) = nullptr;  // for Stop()
  std::thread thread_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_RPC_SCHEDULER_SESSION_H_
