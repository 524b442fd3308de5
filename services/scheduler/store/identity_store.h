// IdentityStore: bearer tokens (only their secrets' SHA-256 hashes) and the audit trail, in
// PostgreSQL (tables api_tokens and audit_log, migration 7). Its own small connection pool, so
// token lookups never wait behind the scheduler's job writes. Every method is one short
// transaction; none is called with the scheduler's mutex held. Thread-safe.
#ifndef RINGMASTER_SERVICES_SCHEDULER_STORE_IDENTITY_STORE_H_
#define RINGMASTER_SERVICES_SCHEDULER_STORE_IDENTITY_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/core/authz.h"
#include "scheduler/core/types.h"
#include "scheduler/store/postgres_pool.h"

namespace ringmaster::scheduler {

struct TokenRecord {
  std::string id;
  std::string secret_sha256;  // 32 raw bytes
  std::string team;
  Role role = Role::kViewer;
  std::string description;
  std::string created_by;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;  // 0: never
  bool revoked = false;
  int64_t revoked_at_ms = 0;
};

class PostgresIdentityStore {
 public:
  // Opens a pool of `connections` to `url` (the schema is migrated by PostgresJobStore first).
  static absl::StatusOr<std::unique_ptr<PostgresIdentityStore>> Connect(
      const std::string& url, int connections, PostgresPoolOptions options = {});

  // ALREADY_EXISTS when the id is taken.
  absl::Status CreateToken(const TokenRecord& token);
  // nullopt when no token has this id.
  absl::StatusOr<std::optional<TokenRecord>> FindToken(const std::string& id);
  // Oldest first; without `all`, only tokens neither revoked nor expired at `now_ms`.
  absl::StatusOr<std::vector<TokenRecord>> ListTokens(bool all, int64_t now_ms);
  // NOT_FOUND for an unknown id; revoking twice keeps the first time.
  absl::StatusOr<TokenRecord> RevokeToken(const std::string& id, int64_t now_ms);
  // True when an admin token neither revoked nor expired exists.
  absl::StatusOr<bool> HasActiveAdmin(int64_t now_ms);

  // All of `records` in one transaction.
  absl::Status AppendAudit(const std::vector<AuditRecord>& records);
  // Newest first, at most `limit`, with seq < `before_seq` when it is > 0.
  absl::StatusOr<std::vector<AuditRecord>> ListAudit(int32_t limit, int64_t before_seq);

 private:
  explicit PostgresIdentityStore(std::unique_ptr<PostgresPool> pool) : pool_(std::move(pool)) {}
  std::unique_ptr<PostgresPool> pool_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SERVICES_SCHEDULER_STORE_IDENTITY_STORE_H_
