#include "image_puller.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/utf8.h"
#include "common/log.h"
#include "core/container.h"
#include "core/image_cache.h"
#include "host/process.h"
#include "host/runtime.h"

namespace ringmaster::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kKeepFinished = std::chrono::minutes(10);

}  // namespace

std::string PullFailureReason(const std::string& output, int exit_code) {
  std::string reason;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    absl::ConsumePrefix(&line, "Error: ");
    reason = std::string(line);
  }
  if (reason.empty()) return absl::StrCat("the runtime exited with code ", exit_code);
  return Utf8Prefix(reason, 512);
}

ImagePuller::~ImagePuller() {
  std::map<std::string, std::shared_ptr<Pull>> pulls;
  {
    MutexLock lock(&mu_);
    pulls.swap(pulls_);
  }
  for (auto& [key, pull] : pulls) {
    if (pull->thread.joinable()) pull->thread.join();
  }
}

absl::StatusOr<ImagePuller::Pulled> ImagePuller::Run(const std::string& reference) {
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  absl::StatusOr<ImageReference> ref = ParseImageReference(reference);
  if (!ref.ok()) return ref.status();
  // "ID DIGEST" of the reference in the store.
  auto inspect = [&]() -> absl::StatusOr<Pulled> {
    CapturedRun run = RunCaptured(
        {options_.runtime, "image", "inspect", "--format", "{{.Id}} {{.Digest}}", reference},
        options_.env, deadline);
    std::vector<std::string> words =
        absl::StrSplit(absl::StripAsciiWhitespace(run.text), ' ', absl::SkipEmpty());
    if (run.exit.ShellCode() != 0 || words.size() != 2 || !IsImageDigest(words[1])) {
      return absl::NotFoundError(PullFailureReason(run.text, run.exit.ShellCode()));
    }
    return Pulled{words[1], words[0]};
  };
  // An image named by its digest that is here already needs no registry.
  if (!ref->digest.empty()) {
    if (absl::StatusOr<Pulled> here = inspect(); here.ok()) return Pulled{ref->digest, here->id};
  }
  // localhost/NAME is an image of this worker's own store (`podman build`, `podman import`):
  // never pulled, and it must be on every worker that runs the job.
  if (absl::StartsWith(ref->repository, "localhost/")) {
    absl::StatusOr<Pulled> here = inspect();
    if (!here.ok()) {
      return absl::NotFoundError(absl::StrCat(
          "image ", reference, " is not in this worker's image store (localhost/ images are "
          "never pulled: build or import it on every worker, or push it to a registry)"));
    }
    if (!ref->digest.empty()) here->digest = ref->digest;
    return here;
  }
  std::vector<std::string> argv = {options_.runtime, "pull", "--quiet"};
  argv.insert(argv.end(), options_.pull_args.begin(), options_.pull_args.end());
  argv.push_back(reference);
  CapturedRun pulled = RunCaptured(argv, options_.env, deadline);
  if (pulled.timed_out) {
    return absl::UnavailableError(absl::StrCat("cannot pull image ", reference, ": no pull within ",
                                               options_.timeout.count() / 1000, " s"));
  }
  if (pulled.exit.ShellCode() != 0) {
    const std::string why = PullFailureReason(pulled.text, pulled.exit.ShellCode());
    const std::string lower = absl::AsciiStrToLower(why);
    const std::string message = absl::StrCat("cannot pull image ", reference, ": ", why);
    if (absl::StrContains(lower, "manifest unknown") || absl::StrContains(lower, "not found") ||
        absl::StrContains(lower, "name unknown")) {
      return absl::NotFoundError(message);
    }
    if (absl::StrContains(lower, "connection refused") || absl::StrContains(lower, "no such host") ||
        absl::StrContains(lower, "timeout")) {
      return absl::UnavailableError(message);
    }
    return absl::FailedPreconditionError(message);
  }
  absl::StatusOr<Pulled> pulled_image = inspect();
  if (!pulled_image.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("pulled image ", reference,
                                                      " but cannot read its digest: ",
                                                      pulled_image.status().message()));
  }
  if (!ref->digest.empty()) pulled_image->digest = ref->digest;
  return pulled_image;
}

void ImagePuller::Evict(const std::string& id) {
  if (options_.cache_bytes <= 0) return;
  std::map<std::string, Clock::time_point> used;
  {
    MutexLock lock(&mu_);
    int running = 0;
    for (const auto& [key, pull] : pulls_) running += pull->done ? 0 : 1;
    if (running > 1) return;  // this pull's own thread counts itself
    used = last_used_;
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  CapturedRun ids =
      RunCaptured({options_.runtime, "image", "ls", "--quiet", "--no-trunc"}, options_.env, deadline);
  if (ids.exit.ShellCode() != 0) return;
  std::vector<std::string> argv = {options_.runtime, "image", "inspect", "--format",
                                   "{{.Id}} {{.Size}}"};
  for (absl::string_view line : absl::StrSplit(ids.text, '\n', absl::SkipWhitespace())) {
    argv.emplace_back(absl::StripAsciiWhitespace(line));
  }
  CapturedRun sizes = RunCaptured(argv, options_.env, deadline);
  std::vector<CachedImage> images;
  for (absl::string_view line : absl::StrSplit(sizes.text, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    CachedImage image;
    if (words.size() != 2 || !absl::SimpleAtoi(words[1], &image.size_bytes)) continue;
    image.id = words[0];
    if (auto it = used.find(image.id); it != used.end()) image.last_used = it->second;
    images.push_back(std::move(image));
  }
  for (const std::string& victim : ImagesToEvict(images, options_.cache_bytes, {id})) {
    // An image a container still uses is refused by the runtime: it stays, and is tried later.
    CapturedRun removed = RunCaptured({options_.runtime, "image", "rm", victim}, options_.env, deadline);
    RM_LOG(kInfo) << "image cache: " << (removed.exit.ShellCode() == 0 ? "removed " : "kept ")
                  << victim << " (least recently used; bound " << options_.cache_bytes << " bytes)";
  }
}

std::shared_ptr<ImagePuller::Pull> ImagePuller::StartLocked(const std::string& key,
                                                            const std::string& reference) {
  // Finished pulls are kept a while for the ranks that ask after the launcher; then forgotten.
  const Clock::time_point now = Clock::now();
  for (auto old = pulls_.begin(); old != pulls_.end();) {
    if (old->first != key && old->second->done && now - old->second->done_at > kKeepFinished) {
      if (old->second->thread.joinable()) old->second->thread.join();
      old = pulls_.erase(old);
    } else {
      ++old;
    }
  }
  auto it = pulls_.find(key);
  if (it != pulls_.end()) {
    // A failed pull is tried again by the next attempt that asks; a good one is kept.
    if (!it->second->done || it->second->result.ok()) return it->second;
    if (it->second->thread.joinable()) it->second->thread.join();
    pulls_.erase(it);
  }
  auto pull = std::make_shared<Pull>();
  pulls_[key] = pull;
  pull->thread = std::thread([this, pull, reference] {
    absl::StatusOr<Pulled> result = Run(reference);
    if (result.ok()) Evict(result->id);
    MutexLock lock(&mu_);
    if (result.ok()) last_used_[result->id] = Clock::now();
    pull->result = std::move(result);
    pull->done = true;
    pull->done_at = Clock::now();
    changed_.NotifyAll();
  });
  return pull;
}

void ImagePuller::Start(const std::string& reference, const std::string& generation) {
  MutexLock lock(&mu_);
  (void)StartLocked(absl::StrCat(reference, "\n", generation), reference);
}

absl::StatusOr<std::string> ImagePuller::Wait(const std::string& reference,
                                              const std::string& generation,
                                              std::chrono::milliseconds wait) {
  MutexLock lock(&mu_);
  std::shared_ptr<Pull> pull = StartLocked(absl::StrCat(reference, "\n", generation), reference);
  if (!changed_.WaitFor(&mu_, wait,
                        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pull->done; })) {
    return absl::UnavailableError(
        absl::StrCat("image ", reference, " is still being pulled on this worker"));
  }
  if (!pull->result.ok()) return pull->result.status();
  last_used_[pull->result->id] = Clock::now();
  return pull->result->digest;
}

}  // namespace ringmaster::worker
