#include "worker/rpc/scheduler_session.h"

#include <algorithm>
#include <random>
#include <vector>

#include "common/log.h"
#include "worker/core/backoff.h"
#include "worker/rpc/convert.h"

namespace ringmaster::worker {

namespace {
// Statuses in one RankStatuses message; the scheduler takes up to 1,024.
constexpr size_t kMaxStatusesPerMessage = 256;
}  // namespace

SchedulerSession::SchedulerSession(std::string scheduler_addr,
                                   std::shared_ptr<grpc::ChannelCredentials> credentials,
                                   Agent* agent)
    : scheduler_addr_(std::move(scheduler_addr)), agent_(agent) {
  grpc::ChannelArguments args;
  // gRPC's own reconnect backoff grows to two minutes; a restarted scheduler should see its
  // workers again within seconds.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  stub_ = v1::WorkerService::NewStub(
      grpc::CreateCustomChannel(scheduler_addr_, std::move(credentials), args));
}

SchedulerSession::~SchedulerSession() { Stop(); }

void SchedulerSession::Start() {
  thread_ = std::thread([this] { Run(); });
}

void SchedulerSession::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    if (current_ != nullptr) current_->TryCancel();
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void SchedulerSession::Run() {
  Backoff backoff(std::chrono::milliseconds(100), std::chrono::seconds(1));
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(0.0, 1.0);
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (RunOnce()) backoff.Reset();
    MutexLock lock(&mu_);
    if (cv_.WaitFor(&mu_, backoff.Next(jitter(rng)),
                    [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; })) {
      return;
    }
  }
}

bool SchedulerSession::RunOnce() {
  grpc::ClientContext ctx;
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
    current_ = &ctx;
  }
  auto clear_current = [&] {
    MutexLock lock(&mu_);
    current_ = nullptr;
  };
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::SchedulerMessage>> stream =
      stub_->Connect(&ctx);
  v1::WorkerMessage hello;
  *hello.mutable_register_() = ToProto(agent_->inventory(), agent_->TakeRegistration());
  v1::SchedulerMessage first;
  if (!stream->Write(hello) || !stream->Read(&first) || !first.has_registered()) {
    grpc::Status status = stream->Finish();
    RM_LOG(kWarning) << "cannot register with the scheduler at " << scheduler_addr_ << ": "
                     << (status.ok() ? "unexpected first message" : status.error_message());
    clear_current();
    return false;
  }
  const auto interval =
      std::chrono::milliseconds(std::max(50, first.registered().heartbeat_interval_ms()));
  RM_LOG(kInfo) << "registered with the scheduler at " << scheduler_addr_ << " as "
                << first.registered().worker_id() << " (" << hello.register_().ranks_size()
                << " held ranks; heartbeat every " << interval.count() << " ms)";
  agent_->SetSchedulerConnected(true);

  std::atomic<bool> done{false};
  std::thread reader([&] {
    v1::SchedulerMessage msg;
    while (stream->Read(&msg)) {
      if (msg.has_assignment()) {
        agent_->OnAssignment(FromProto(msg.assignment()));
      } else if (msg.has_stop()) {
        agent_->OnStop(msg.stop().job_id(), msg.stop().attempt(), msg.stop().reason(),
                       std::chrono::milliseconds(
                           std::clamp<int64_t>(msg.stop().grace_ms(), 0, 3'600'000)));
      }
    }
    done = true;
  });
  // Heartbeats go out on their own clock: the scheduler renews liveness on them alone.
  auto last_beat = std::chrono::steady_clock::now();
  while (!done) {
    const auto now = std::chrono::steady_clock::now();
    v1::WorkerMessage msg;
    if (now - last_beat >= interval) {
      msg.mutable_heartbeat();
      last_beat = now;
    } else {
      const auto wait = std::clamp(
          std::chrono::duration_cast<std::chrono::milliseconds>(interval - (now - last_beat)),
          std::chrono::milliseconds(1), std::chrono::milliseconds(100));
      // Whatever is queued goes in one message, not one per rank (an 8-rank job's life: 2
      // messages instead of 16).
      std::vector<RankStatus> statuses = agent_->NextStatuses(kMaxStatusesPerMessage, wait);
      if (statuses.empty()) continue;
      const RankStatus& first = statuses.front();
      if (first.kind == RankStatus::Kind::kChecked && first.check) {
        *msg.mutable_check_result() = ToProto(*first.check);
      } else if (statuses.size() == 1) {
        *msg.mutable_rank_status() = ToProto(first);
      } else {
        for (const RankStatus& s : statuses) {
          *msg.mutable_rank_statuses()->add_statuses() = ToProto(s);
        }
      }
    }
    // A status lost with a broken stream is not lost: the next registration lists its rank.
    if (!stream->Write(msg)) break;
  }
  ctx.TryCancel();
  reader.join();
  grpc::Status status = stream->Finish();
  agent_->SetSchedulerConnected(false);
  clear_current();
  RM_LOG(kWarning) << "stream to the scheduler ended ("
                   << (status.ok() ? "closed" : status.error_message()) << "); reconnecting";
  return true;
}

}  // namespace ringmaster::worker
