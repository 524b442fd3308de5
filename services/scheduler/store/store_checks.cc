#include "scheduler/store/store_checks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::scheduler::store_internal {

absl::Status CheckJobAndEvent(const Job& job, const JobEvent* event) {
  if (job.id.empty()) return absl::InvalidArgumentError("job id is empty");
  if (event != nullptr && !event->job_id.empty() && event->job_id != job.id) {
    return absl::InvalidArgumentError(
        absl::StrCat("event of job ", event->job_id, " written with job ", job.id));
  }
  return absl::OkStatus();
}

absl::Status CheckBatch(const WriteBatch& batch, int64_t epoch) {
  if (epoch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("leader epoch must be at least 1, got ", epoch));
  }
  for (const JobWrite& w : batch.jobs) {
    if (auto s = CheckJobAndEvent(w.job, &w.event); !s.ok()) return s;
    if (w.kind == JobWrite::Kind::kCreate &&
        (!w.job.placement.empty() || w.job.attempt != 0 || w.job.last_event_seq != 1 ||
         !w.job.token.empty() || w.event.seq != 1 || w.event.state != w.job.state ||
         w.event.attempt != 0 || w.job.started_at_ms != 0 || w.job.finished_at_ms != 0 ||
         w.job.updated_at_ms != w.job.created_at_ms || w.job.exit_code != 0 ||
         !w.job.message.empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "new job ", w.job.id, " must be unplaced, at attempt 0, with only its first event"));
    }
    if (w.kind == JobWrite::Kind::kCheckpoint &&
        (w.job.last_checkpoint_step < 0 || w.job.last_checkpoint_time_ms <= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint of job ", w.job.id, " must have a step >= 0 and a time > 0, got step ",
          w.job.last_checkpoint_step, " at ", w.job.last_checkpoint_time_ms));
    }
    if (w.kind == JobWrite::Kind::kImageDigest && w.job.image_digest.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("image digest of job ", w.job.id, " must not be empty"));
    }
    if (w.usage && (w.kind != JobWrite::Kind::kUpdate || w.usage->queue.empty() ||
                    w.usage->resource.empty() || w.usage->used_ms < 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "usage of job ", w.job.id,
          " must name a queue and a resource, be non-negative, and come with an update"));
    }
  }
  for (const Worker& w : batch.workers) {
    if (w.id.empty()) return absl::InvalidArgumentError("worker id is empty");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RankPlacement>> SortedPlacement(std::vector<RankPlacement> placement) {
  std::sort(placement.begin(), placement.end(),
            [](const RankPlacement& a, const RankPlacement& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < placement.size(); ++i) {
    if (placement[i].rank == placement[i - 1].rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement names rank ", placement[i].rank, " twice"));
    }
  }
  return placement;
}

absl::Status CheckQueueEntry(const QueueEntry& entry) {
  if (entry.job_id.empty()) return absl::InvalidArgumentError("queue entry has no job id");
  if (entry.priority < kMinPriority || entry.priority > kMaxPriority) {
    return absl::InvalidArgumentError(absl::StrCat("job ", entry.job_id, ": priority ",
                                                   entry.priority, " is outside ", kMinPriority,
                                                   "..", kMaxPriority));
  }
  if (entry.seq < 0 || entry.seq >= kSeqLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", entry.job_id, ": seq ", entry.seq, " is outside 0..2^40-1"));
  }
  return absl::OkStatus();
}

namespace {

// A named key with an expiry: `what` ("heartbeat", "lease") names it in the messages.
absl::Status CheckExpiring(const char* what, const char* name_field, const std::string& name,
                           int64_t ttl_ms) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " has no ", name_field));
  if (ttl_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of ", name, ": ttl ", ttl_ms, " ms is not positive"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckBeat(const std::string& worker_id, int64_t ttl_ms) {
  return CheckExpiring("heartbeat", "worker id", worker_id, ttl_ms);
}

absl::Status CheckLease(const std::string& holder, int64_t ttl_ms) {
  return CheckExpiring("lease", "holder", holder, ttl_ms);
}

bool SameCreate(const Job& stored, const Job& write) {
  return stored.id == write.id && stored.request_id == write.request_id &&
         stored.team == write.team && stored.created_at_ms == write.created_at_ms &&
         stored.spec == write.spec;
}

std::optional<CommitResult> StoredBefore(
    const WriteBatch& batch, const std::map<std::pair<std::string, int64_t>, JobEvent>& stored,
    const std::set<std::string>& ended) {
  CommitResult result;
  std::set<std::string> skipped;
  bool any = false;
  for (const JobWrite& w : batch.jobs) {
    if (w.kind == JobWrite::Kind::kCreate) return std::nullopt;
    if (w.kind != JobWrite::Kind::kUpdate) continue;
    auto it = stored.find({w.job.id, w.event.seq});
    if (it != stored.end()) {
      JobEvent mine = w.event;
      mine.job_id = w.job.id;
      if (!(it->second == mine)) return std::nullopt;
      any = true;
    } else if (ended.contains(w.job.id)) {
      if (skipped.insert(w.job.id).second) result.skipped.push_back(w.job.id);
    } else {
      return std::nullopt;
    }
  }
  if (!any) return std::nullopt;
  return result;
}

}  // namespace ringmaster::scheduler::store_internal

namespace ringmaster::scheduler {
namespace {
constexpr const char* kFencedPayload = "type.ringmaster.dev/fenced";
}  // namespace

absl::Status FencedError(int64_t epoch, int64_t current) {
  absl::Status s = absl::FailedPreconditionError(
      absl::StrCat("fenced: another scheduler leads (epoch ", current, ", this one holds ", epoch,
                   "); nothing was written"));
  s.SetPayload(kFencedPayload, absl::Cord(absl::StrCat(current)));
  return s;
}

bool IsFenced(const absl::Status& status) {
  return status.GetPayload(kFencedPayload).has_value();
}

absl::Status PendingQueue::Apply(const Changes& changes) {
  for (const auto& [id, entry] : changes) {
    if (entry) RM_RETURN_IF_ERROR(store_internal::CheckQueueEntry(*entry));
  }
  for (const auto& [id, entry] : changes) {
    RM_RETURN_IF_ERROR(entry ? Push(*entry) : Remove(id));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
