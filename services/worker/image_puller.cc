#include "image_puller.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/utf8.h"
#include "core/container.h"
#include "core/image_cache.h"
#include "host/process.h"
#include "host/runtime.h"

namespace ringmaster::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kKeepFinished = std::chrono::minutes(10);

// Writes the runtime's auth file for one pull into `dir` (made mode 0700 if it is not there)
// with mkstemp, so mode 0600 and a name nobody could have guessed and planted; returns its path.
absl::StatusOr<std::string> WriteAuthFile(const std::string& dir, const std::string& content) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is not a directory of this worker's own user"));
  }
  if ((st.st_mode & 077) != 0 && chmod(dir.c_str(), 0700) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make ", dir, " private: ", std::strerror(errno)));
  }
  std::string path = dir + "/auth-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a file in ", dir, ": ", std::strerror(errno)));
  }
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      close(fd);
      unlink(path.c_str());
      return absl::FailedPreconditionError(absl::StrCat("cannot write ", path, ": ", why));
    }
    written += static_cast<size_t>(n);
  }
  close(fd);
  return path;
}

bool IsAuthenticationFailure(const std::string& lower) {
  return absl::StrContains(lower, "unauthorized") ||
         absl::StrContains(lower, "authentication required") ||
         absl::StrContains(lower, "invalid username/password") ||
         absl::StrContains(lower, "incorrect username or password");
}

// What a failed pull says when the job's team has a credential for `registry` that the
// scheduler could not read (RegistryAuth.problem): that none was sent, why, and how to mend it.
std::string UnreadableCredential(const std::string& registry, const RegistryAuth& auth) {
  return absl::StrCat(
      "the job's team has a credential for registry ", registry, " (user ", auth.username,
      "), but the scheduler could not read it, so the pull went without "
      "credentials (",
      auth.problem, "); setting it again with `ringctl registry set ", registry, "` mends it");
}

}  // namespace

std::string RegistryOfReference(const std::string& reference) {
  const size_t slash = reference.find('/');
  if (slash == std::string::npos) return "docker.io";
  const std::string first = reference.substr(0, slash);
  if (absl::StrContains(first, '.') || absl::StrContains(first, ':') || first == "localhost") {
    return first;
  }
  return "docker.io";
}

std::string AuthFileContent(const std::string& registry, const RegistryAuth& auth) {
  // The registry is HOST[:PORT] (checked by the scheduler and by the reference's parse): no
  // character of it needs escaping in JSON; the user and secret go in base64.
  return absl::StrCat("{\"auths\":{\"", registry, "\":{\"auth\":\"",
                      absl::Base64Escape(absl::StrCat(auth.username, ":", auth.secret)), "\"}}}\n");
}

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

absl::StatusOr<ImagePuller::Pulled> ImagePuller::Run(const std::string& reference,
                                                     const std::optional<RegistryAuth>& auth) {
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
  // A team's credential goes to the runtime in a file of its own for this pull, never on the
  // command line (which every user of the host can read in /proc), removed when the pull ends.
  const std::string registry = RegistryOfReference(reference);
  const bool for_this_registry = auth && absl::AsciiStrToLower(registry) == auth->registry;
  // A credential the scheduler could not read comes without its secret: nothing to pull with.
  const bool unreadable = for_this_registry && !auth->problem.empty();
  const bool with_auth = for_this_registry && !unreadable && !options_.auth_dir.empty();
  std::string auth_path;
  absl::Cleanup remove_auth = [&auth_path] {
    if (!auth_path.empty()) unlink(auth_path.c_str());
  };
  if (with_auth) {
    absl::StatusOr<std::string> path =
        WriteAuthFile(options_.auth_dir, AuthFileContent(registry, *auth));
    if (!path.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("cannot pull image ", reference,
                                                        " with the team's credentials for ",
                                                        registry, ": ", path.status().message()));
    }
    auth_path = *path;
    argv.insert(argv.end(), {"--authfile", auth_path});
  } else if (auth && !for_this_registry) {
    RM_LOG(kWarning) << "image " << reference << ": credentials for " << auth->registry
                     << " not used (the image is pulled from " << registry << ")";
  }
  argv.push_back(reference);
  CapturedRun pulled = RunCaptured(argv, options_.env, deadline);
  if (pulled.timed_out) {
    return absl::UnavailableError(absl::StrCat("cannot pull image ", reference, ": no pull within ",
                                               options_.timeout.count() / 1000, " s"));
  }
  if (pulled.exit.ShellCode() != 0) {
    std::string why = PullFailureReason(pulled.text, pulled.exit.ShellCode());
    // The runtime does not print the secret; should one ever do, it goes no further.
    if (with_auth) why = absl::StrReplaceAll(why, {{auth->secret, "[secret]"}});
    const std::string lower = absl::AsciiStrToLower(why);
    const std::string message = absl::StrCat("cannot pull image ", reference, ": ", why);
    if (IsAuthenticationFailure(lower)) {
      if (with_auth) {
        return absl::PermissionDeniedError(absl::StrCat(
            "cannot pull image ", reference, ": authentication failed at registry ", registry,
            " as user ", auth->username,
            " (the job's team's registry credentials; set them again with `ringctl registry "
            "set`): ",
            why));
      }
      if (unreadable) {
        return absl::PermissionDeniedError(absl::StrCat(
            "cannot pull image ", reference, ": authentication failed: registry ", registry,
            " wants credentials; ", UnreadableCredential(registry, *auth), ": ", why));
      }
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot pull image ", reference, ": authentication failed: registry ", registry,
          " wants credentials, and the job's team has none for it (`ringctl "
          "registry set`): ",
          why));
    }
    if (absl::StrContains(lower, "connection refused") || absl::StrContains(lower, "no such host") ||
        absl::StrContains(lower, "timeout")) {
      return absl::UnavailableError(message);
    }
    // Registries often answer a private image asked for without credentials as not found or
    // denied: the unreadable credential may be the cause, and the message says so.
    const std::string noted =
        unreadable ? absl::StrCat(message, " (", UnreadableCredential(registry, *auth), ")")
                   : message;
    if (absl::StrContains(lower, "manifest unknown") || absl::StrContains(lower, "not found") ||
        absl::StrContains(lower, "name unknown")) {
      return absl::NotFoundError(noted);
    }
    return absl::FailedPreconditionError(noted);
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

std::shared_ptr<ImagePuller::Pull> ImagePuller::StartLocked(
    const std::string& key, const std::string& reference, const std::optional<RegistryAuth>& auth) {
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
  pull->thread = std::thread([this, pull, reference, auth] {
    absl::StatusOr<Pulled> result = Run(reference, auth);
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

void ImagePuller::Start(const std::string& reference, const std::string& generation,
                        const std::optional<RegistryAuth>& auth) {
  MutexLock lock(&mu_);
  (void)StartLocked(absl::StrCat(reference, "\n", generation), reference, auth);
}

absl::StatusOr<std::string> ImagePuller::Wait(const std::string& reference,
                                              const std::string& generation,
                                              std::chrono::milliseconds wait,
                                              const std::optional<RegistryAuth>& auth) {
  MutexLock lock(&mu_);
  std::shared_ptr<Pull> pull =
      StartLocked(absl::StrCat(reference, "\n", generation), reference, auth);
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
