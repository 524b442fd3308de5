// ImagePuller: brings job images onto this worker with the container runtime, one pull per
// image however many attempts and ranks want it at once, and says which digest each reference
// resolved to (docs/environments.md, "Images").
//
// Threads: each pull runs on a thread of its own, which Pull starts and the destructor joins;
// callers wait on the pull's result with a deadline. Locks: mu_ guards the table of pulls; the
// runtime runs without it.
#ifndef RINGMASTER_SERVICES_WORKER_IMAGE_PULLER_H_
#define RINGMASTER_SERVICES_WORKER_IMAGE_PULLER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "worker/core/types.h"

namespace ringmaster::worker {

struct ImagePullerOptions {
  std::string runtime = "podman";
  // Added to every `RUNTIME pull` (the operator's --image-pull-args, e.g. --tls-verify=false
  // for a plain-HTTP registry on loopback).
  std::vector<std::string> pull_args;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // The runtime's environment (PATH, and REGISTRY_AUTH_FILE where credentials are kept).
  std::map<std::string, std::string> env;
  // The image store's disk bound: after a pull, the least recently used images go until the
  // store is within it (core/image_cache.h); 0: no bound.
  int64_t cache_bytes = 0;
  // Where a pull with a team's registry credentials writes the runtime's auth file (mode 0600,
  // in this directory of mode 0700, removed after the pull); empty: credentials are not used.
  std::string auth_dir;
};

class ImagePuller {
 public:
  explicit ImagePuller(ImagePullerOptions options) : options_(std::move(options)) {}
  ~ImagePuller();
  ImagePuller(const ImagePuller&) = delete;
  ImagePuller& operator=(const ImagePuller&) = delete;

  // Starts pulling `reference` unless a pull of it for `generation` (the job) is under way or
  // done: each job that names a tag pulls it, so that it runs what the tag points at when it is
  // first placed; a reference with a digest that is here already is not pulled at all.
  // `auth`: the job's team's credential for the reference's registry, passed to the runtime in
  // an auth file (--authfile) that only this worker's user can read, never on its command line.
  void Start(const std::string& reference, const std::string& generation,
             const std::optional<RegistryAuth>& auth = std::nullopt);
  // Waits up to `wait` for the pull Start began (starting one if none) and returns the digest
  // the reference resolved to. The error names the image and the runtime's reason
  // (UNAVAILABLE for a registry that cannot be reached or a time limit, NOT_FOUND for no such
  // image, PERMISSION_DENIED when the registry refused the credentials or wanted some,
  // FAILED_PRECONDITION otherwise). No message carries the secret.
  absl::StatusOr<std::string> Wait(const std::string& reference, const std::string& generation,
                                   std::chrono::milliseconds wait,
                                   const std::optional<RegistryAuth>& auth = std::nullopt);

 private:
  struct Pulled {
    std::string digest;
    std::string id;  // the runtime's image id
  };
  struct Pull {
    bool done = false;
    std::chrono::steady_clock::time_point done_at;
    absl::StatusOr<Pulled> result = Pulled{};
    std::thread thread;
  };
  absl::StatusOr<Pulled> Run(const std::string& reference, const std::optional<RegistryAuth>& auth);
  // Removes least recently used images until the store is within cache_bytes, keeping `id`.
  // Skipped while another pull is under way (it may be writing layers an image shares).
  void Evict(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<Pull> StartLocked(const std::string& key, const std::string& reference,
                                    const std::optional<RegistryAuth>& auth)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ImagePullerOptions options_;
  Mutex mu_;
  CondVar changed_;
  std::map<std::string, std::shared_ptr<Pull>> pulls_ ABSL_GUARDED_BY(mu_);
  // When a rank last started in each image (by id).
  std::map<std::string, std::chrono::steady_clock::time_point> last_used_ ABSL_GUARDED_BY(mu_);
};

// The runtime's own words on a failed pull, cut to what a user needs: the last line that says
// something, without the runtime's "Error: " prefix; `code` 125 with nothing printed says so.
std::string PullFailureReason(const std::string& output, int exit_code);

// The registry a reference is pulled from, as the reference spells it: its first component
// when that has a '.' or ':' or is "localhost", else docker.io.
std::string RegistryOfReference(const std::string& reference);

// The runtime's auth file (containers-auth.json) with one entry: `registry` and the base64 of
// USER:SECRET.
std::string AuthFileContent(const std::string& registry, const RegistryAuth& auth);

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_IMAGE_PULLER_H_
