// Listing jobs page by page (AIP-158) and selecting them by label (kubectl's selector syntax).
// Plain functions on plain structs: the scheduler validates a ListJobs request with them, the
// stores apply the resulting JobFilter, and the tests drive them directly. Stateless and
// thread-safe.
//
// Paging protocol (ListJobs in proto/ringmaster/v1/job.proto):
//   1. A request without page_token starts at the newest job. page_size 0 means
//      kDefaultPageSize; above kMaxPageSize is read as kMaxPageSize; negative is invalid.
//   2. The scheduler asks the store for page_size + 1 jobs, newest first, with seq below the
//      cursor (keyset pagination on the unique submit order `seq`: no OFFSET, so a page costs
//      the same at job 100,000 as at job 1, and jobs submitted meanwhile do not shift pages).
//   3. When the extra job came back there is a next page: next_page_token encodes the seq of
//      the page's last job and the request's filters; otherwise it is empty (the last page).
//   4. A later request with that token must repeat the same filters; a token that is not one
//      of ours, or that was issued for other filters, is INVALID_ARGUMENT naming page_token.
#ifndef RINGMASTER_SERVICES_SCHEDULER_CORE_JOB_LIST_H_
#define RINGMASTER_SERVICES_SCHEDULER_CORE_JOB_LIST_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/core/types.h"

namespace ringmaster::scheduler {

inline constexpr int32_t kDefaultPageSize = 100;
inline constexpr int32_t kMaxPageSize = 1000;

// One requirement of a label selector.
struct LabelRequirement {
  enum class Op {
    kEquals,     // key=value or key==value
    kNotEquals,  // key!=value: also true when the key is absent (as in Kubernetes)
    kExists,     // key
    kNotExists,  // !key
  };
  std::string key;
  Op op = Op::kEquals;
  std::string value;
  bool operator==(const LabelRequirement&) const = default;
};

// Parses "team=vision,env!=prod,gpu,!preemptible": requirements separated by commas, all of
// which must hold. Keys follow JobSpec.labels' rules ([A-Za-z0-9._/-], 1..63); spaces around
// keys, operators and values are ignored. An empty selector selects everything. Errors are
// INVALID_ARGUMENT naming label_selector and the requirement.
absl::StatusOr<std::vector<LabelRequirement>> ParseLabelSelector(absl::string_view selector);

// True when `labels` meets every requirement.
bool MatchesLabels(const std::vector<LabelRequirement>& requirements,
                   const std::map<std::string, std::string>& labels);

// Where a page starts and what the list was asked for; what a page token carries.
struct PageCursor {
  // Jobs with seq below this come next.
  int64_t before_seq = 0;
  // The request's filters, as given: a token only continues the list it came from.
  std::optional<JobState> state;
  std::string queue;
  std::string label_selector;
  std::string array_id;
  bool operator==(const PageCursor&) const = default;
};

// A ListJobs request as the scheduler takes it.
struct JobListQuery {
  std::optional<JobState> state;
  std::string queue;  // empty: any
  // Only this team's jobs (set from the caller's token, not by the caller); nullopt: any.
  std::optional<std::string> team;
  std::string label_selector;
  // Only the tasks of this array; empty: no tasks of arrays.
  std::string array_id;
  int32_t page_size = 0;
  std::string page_token;
};

struct JobPage {
  std::vector<Job> jobs;        // newest first
  std::string next_page_token;  // empty on the last page
};

// Opaque to clients: URL-safe base64 of a versioned encoding of the cursor.
std::string EncodePageToken(const PageCursor& cursor);
// INVALID_ARGUMENT ("page_token: ...") for anything EncodePageToken did not make.
absl::StatusOr<PageCursor> DecodePageToken(absl::string_view token);

// The effective page size of a request: 0 -> kDefaultPageSize, capped at kMaxPageSize;
// INVALID_ARGUMENT naming `field` when negative.
absl::StatusOr<int32_t> EffectivePageSize(int32_t page_size, absl::string_view field);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_CORE_JOB_LIST_H_
