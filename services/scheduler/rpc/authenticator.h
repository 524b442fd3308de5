// Authenticator: who is calling. Reads the `authorization: Bearer rmt_<id>_<secret>` metadata
// of a call, finds token <id> (PostgresIdentityStore, through a cache) and compares
// SHA-256(<secret>) with the stored hash in constant time (CRYPTO_memcmp). Then checks that the
// token is neither revoked nor expired. UNAUTHENTICATED otherwise, with a message that says
// which (never the token).
//
// The cache holds a token's row; once older than `cache_ttl_ms` the row is still used while a
// background read refreshes it, so no call on a known token waits for Postgres, and a token
// revoked by another process (or in SQL) stops working at most 2 x `cache_ttl_ms` (plus one
// read) later. RevokeToken through this scheduler drops it at once (Forget). While Postgres is
// unreachable a known token keeps the row last read (reads keep working through a database
// outage); a token never seen is UNAVAILABLE.
// An id that Postgres did not know is remembered as unknown for `cache_ttl_ms`, and at most
// kMaxTokenLookups ids not cached are read from Postgres at once (calls on other ids are
// UNAVAILABLE at once): made-up ids, which anyone can send, cost a bounded share of the RPC
// threads and of the database. Calls on an id being read wait for that read (at most
// kMaxTokenWaiters of them), so a burst of one client's calls costs one read and is not turned
// away, after a restart or a failover as much as for a new token.
// Expiry is checked on every call. Lookups run on the RPC's thread (CheckAsync: on a thread of
// their own), never under the scheduler's mutex.
//
// Also writes the audit trail: Audit() queues an entry after the action succeeded, and one
// thread stores whatever is queued in one transaction, so a burst of submits costs one commit,
// not one each. An entry reaches Postgres within milliseconds; a crash of the scheduler in
// that window loses the entries still queued (the actions themselves are stored). Stop() (or
// the destructor) stores what is queued. Thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_RPC_AUTHENTICATOR_H_
#define RINGMASTER_SERVICES_SCHEDULER_RPC_AUTHENTICATOR_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "scheduler/core/authz.h"
#include "scheduler/core/clock.h"
#include "scheduler/store/identity_store.h"

namespace ringmaster::scheduler {

inline constexpr int64_t kTokenCacheTtlMs = 2000;
inline constexpr int kMaxTokenLookups = 8;
inline constexpr int kMaxTokenWaiters = 4096;

// A new token: "rmt_" + 16 hex of id + "_" + 64 hex of a 256-bit secret (OpenSSL RAND_bytes).
struct NewToken {
  std::string id;
  std::string token;          // shown once
  std::string secret_sha256;  // 32 raw bytes, what is stored
};
NewToken GenerateToken();
// Splits "rmt_<id>_<secret>" into id and SHA-256 of the secret; UNAUTHENTICATED when malformed.
absl::Status ParseToken(const std::string& token, std::string* id, std::string* secret_sha256);

class Authenticator {
 public:
  Authenticator(PostgresIdentityStore* store, const Clock* clock,
                int64_t cache_ttl_ms = kTokenCacheTtlMs);
  ~Authenticator();
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;
  // Stores the audit entries still queued and stops the audit thread.
  void Stop();

  // --insecure-no-auth (only with --insecure, on loopback): a call without an authorization
  // header is an admin of team "anonymous". For benchmarks' baselines and throw-away local
  // experiments; a call that does send a token is still checked.
  void AllowAnonymous() { allow_anonymous_ = true; }

  // The caller of `ctx`, from its bearer token.
  absl::StatusOr<Principal> Authenticate(const grpc::ServerContextBase& ctx);
  // Authenticate(ctx) for gRPC's callback handlers, as CheckAsync without the right's check.
  void AuthenticateAsync(const grpc::ServerContextBase& ctx,
                         std::function<void(absl::StatusOr<Principal>)> done) {
    Start(ctx, /*read_here=*/false, std::move(done));
  }
  // Check(ctx, action) for gRPC's callback handlers, whose threads must not wait on Postgres
  // (they also serve the workers' streams): `done` runs at once when no read is needed, else
  // on the thread that reads the token (one of its own, or another call's).
  void CheckAsync(const grpc::ServerContextBase& ctx, Action action,
                  std::function<void(absl::StatusOr<Principal>)> done);
  // Authenticate, then Authorize(action, resource_team).
  absl::StatusOr<Principal> Check(const grpc::ServerContextBase& ctx, Action action,
                                  const std::string& resource_team = "");
  // Drops a token from the cache (after RevokeToken).
  void Forget(const std::string& token_id);

  // An entry of the audit trail, not stored: a submit's goes into the job's own transaction.
  AuditRecord Record(const Principal& who, const grpc::ServerContextBase& ctx, Action action,
                     const std::string& resource, const std::string& detail = "") const;
  // Queues an entry of the audit trail; a failure to store it is logged, not returned (the
  // action is done).
  void Audit(const Principal& who, const grpc::ServerContextBase& ctx, Action action,
             const std::string& resource, const std::string& detail = "");

  PostgresIdentityStore* store() const { return store_; }
  const Clock* clock() const { return clock_; }

 private:
  struct Cached {
    TokenRecord token;
    int64_t fetched_at_ms = 0;
  };
  PostgresIdentityStore* const store_;
  const Clock* const clock_;
  const int64_t cache_ttl_ms_;
  bool allow_anonymous_ = false;
  Mutex mu_;
  absl::flat_hash_map<std::string, Cached> cache_ ABSL_GUARDED_BY(mu_);
  // token id -> when Postgres had none
  absl::flat_hash_map<std::string, int64_t> unknown_ ABSL_GUARDED_BY(mu_);
  // The reads of Postgres in flight, by token id, each with the calls waiting for it; and how
  // many calls wait in all.
  using Found = absl::StatusOr<std::optional<TokenRecord>>;
  using Waiter = std::function<void(const Found&)>;
  absl::flat_hash_map<std::string, std::vector<Waiter>> lookups_ ABSL_GUARDED_BY(mu_);
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;

  using Done = std::function<void(absl::StatusOr<Principal>)>;
  // Who the caller of `ctx` is, told to `done`: from the cache, or after a read of Postgres
  // (on this thread when `read_here`, else on one of its own), or after another call's read.
  void Start(const grpc::ServerContextBase& ctx, bool read_here, Done done);
  // Ends the read of token `id`: caches what it found and returns the calls that waited on it.
  std::vector<Waiter> Settle(const std::string& id, const Found& found);

  void AuditLoop();
  // Reads token `id` again into the cache (on the audit thread).
  void Refresh(const std::string& id);
  Mutex audit_mu_;
  CondVar audit_cv_;
  std::vector<AuditRecord> audit_queue_ ABSL_GUARDED_BY(audit_mu_);
  // Token ids whose cached row is stale.
  std::vector<std::string> refresh_queue_ ABSL_GUARDED_BY(audit_mu_);
  bool stopping_ ABSL_GUARDED_BY(audit_mu_) = false;
  std::thread audit_thread_;
};

// The bootstrap admin token, so a fresh cluster is usable without an extra step:
//  1. `file` names a token file that exists: its token is registered as an admin token of team
//     "admin" when its id is unknown (an operator or test harness chose it); a known id whose
//     secret differs is FAILED_PRECONDITION.
//  2. the file does not exist and no active admin token does either: a new admin token is made
//     and written to the file with mode 0600 (the file's directory must exist).
//  3. the file does not exist but an admin token does: nothing is made (logged).
absl::Status EnsureBootstrapAdmin(PostgresIdentityStore* store, const Clock& clock,
                                  const std::string& file);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_RPC_AUTHENTICATOR_H_
