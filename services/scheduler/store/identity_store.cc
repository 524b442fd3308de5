#include "scheduler/store/identity_store.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {
namespace {

#define RM_TOKEN_COLUMNS                                                                   \
  "id, secret_sha256, team, role, description, created_by, created_at_ms, expires_at_ms, " \
  "revoked, revoked_at_ms"

TokenRecord TokenFromRow(const pqxx::row& row) {
  TokenRecord t;
  t.id = row["id"].as<std::string>();
  pqxx::binarystring hash(row["secret_sha256"]);
  t.secret_sha256 = hash.str();
  t.team = row["team"].as<std::string>();
  t.role = ParseRole(row["role"].as<std::string>()).value_or(Role::kViewer);
  t.description = row["description"].as<std::string>();
  t.created_by = row["created_by"].as<std::string>();
  t.created_at_ms = row["created_at_ms"].as<int64_t>();
  t.expires_at_ms = row["expires_at_ms"].as<int64_t>();
  t.revoked = row["revoked"].as<bool>();
  t.revoked_at_ms = row["revoked_at_ms"].as<int64_t>();
  return t;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresIdentityStore>> PostgresIdentityStore::Connect(
    const std::string& url, int connections, PostgresPoolOptions options) {
  auto pool = PostgresPool::Connect(url, connections, nullptr, options);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<PostgresIdentityStore>(new PostgresIdentityStore(*std::move(pool)));
}

absl::Status PostgresIdentityStore::CreateToken(const TokenRecord& token) {
  return pool_->Run([&](pqxx::connection& conn) -> absl::Status {
    pqxx::work tx(conn);
    pqxx::binarystring hash(token.secret_sha256.data(), token.secret_sha256.size());
    pqxx::result r = tx.exec_params(
        "INSERT INTO api_tokens (id, secret_sha256, team, role, description, created_by, "
        "created_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
        "ON CONFLICT (id) DO NOTHING",
        token.id, hash, token.team, RoleName(token.role), token.description, token.created_by,
        token.created_at_ms, token.expires_at_ms);
    if (r.affected_rows() == 0) {
      return absl::AlreadyExistsError(absl::StrCat("token id ", token.id, " is taken"));
    }
    tx.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::optional<TokenRecord>> PostgresIdentityStore::FindToken(const std::string& id) {
  return pool_->Run<std::optional<TokenRecord>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::optional<TokenRecord>> {
        pqxx::read_transaction tx(conn);
        pqxx::result r =
            tx.exec_params("SELECT " RM_TOKEN_COLUMNS " FROM api_tokens WHERE id = $1", id);
        if (r.empty()) return std::optional<TokenRecord>();
        return std::optional<TokenRecord>(TokenFromRow(r[0]));
      });
}

absl::StatusOr<std::vector<TokenRecord>> PostgresIdentityStore::ListTokens(bool all,
                                                                           int64_t now_ms) {
  return pool_->Run<std::vector<TokenRecord>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<TokenRecord>> {
        pqxx::read_transaction tx(conn);
        pqxx::result r =
            tx.exec_params("SELECT " RM_TOKEN_COLUMNS
                           " FROM api_tokens WHERE $1 OR (NOT revoked AND "
                           "(expires_at_ms = 0 OR expires_at_ms > $2)) ORDER BY created_at_ms, id",
                           all, now_ms);
        std::vector<TokenRecord> out;
        for (const auto& row : r) out.push_back(TokenFromRow(row));
        return out;
      });
}

absl::StatusOr<TokenRecord> PostgresIdentityStore::RevokeToken(const std::string& id,
                                                               int64_t now_ms) {
  return pool_->Run<TokenRecord>([&](pqxx::connection& conn) -> absl::StatusOr<TokenRecord> {
    pqxx::work tx(conn);
    pqxx::result r = tx.exec_params(
        "UPDATE api_tokens SET revoked = true, revoked_at_ms = CASE WHEN revoked THEN "
        "revoked_at_ms ELSE $2 END WHERE id = $1 RETURNING " RM_TOKEN_COLUMNS,
        id, now_ms);
    if (r.empty()) return absl::NotFoundError(absl::StrCat("id: no token '", id, "'"));
    tx.commit();
    return TokenFromRow(r[0]);
  });
}

absl::StatusOr<bool> PostgresIdentityStore::HasActiveAdmin(int64_t now_ms) {
  return pool_->Run<bool>([&](pqxx::connection& conn) -> absl::StatusOr<bool> {
    pqxx::read_transaction tx(conn);
    pqxx::result r = tx.exec_params(
        "SELECT 1 FROM api_tokens WHERE role = 'admin' AND NOT revoked AND "
        "(expires_at_ms = 0 OR expires_at_ms > $1) LIMIT 1",
        now_ms);
    return !r.empty();
  });
}

absl::Status PostgresIdentityStore::AppendAudit(const std::vector<AuditRecord>& records) {
  if (records.empty()) return absl::OkStatus();
  return pool_->Run([&](pqxx::connection& conn) -> absl::Status {
    pqxx::work tx(conn);
    // The commit does not wait for the WAL flush (the WAL writer flushes within ~0.6 s): the
    // trail must not take the fsyncs that durable job writes need. docs/security.md says what
    // a crash may lose.
    tx.exec("SET LOCAL synchronous_commit = off");
    std::string sql =
        "INSERT INTO audit_log (at_ms, principal, team, role, peer, action, resource, detail) "
        "VALUES ";
    for (size_t i = 0; i < records.size(); ++i) {
      const AuditRecord& a = records[i];
      absl::StrAppend(&sql, i == 0 ? "" : ", ", "(", a.at_ms, ", ", tx.quote(a.principal), ", ",
                      tx.quote(a.team), ", ", tx.quote(a.role), ", ", tx.quote(a.peer), ", ",
                      tx.quote(a.action), ", ", tx.quote(a.resource), ", ", tx.quote(a.detail),
                      ")");
    }
    tx.exec(sql);
    tx.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<AuditRecord>> PostgresIdentityStore::ListAudit(int32_t limit,
                                                                          int64_t before_seq) {
  return pool_->Run<std::vector<AuditRecord>>(
      [&](pqxx::connection& conn) -> absl::StatusOr<std::vector<AuditRecord>> {
        pqxx::read_transaction tx(conn);
        pqxx::result r = tx.exec_params(
            "SELECT seq, at_ms, principal, team, role, peer, action, resource, detail "
            "FROM audit_log WHERE $2 <= 0 OR seq < $2 ORDER BY seq DESC LIMIT $1",
            limit, before_seq);
        std::vector<AuditRecord> out;
        for (const auto& row : r) {
          AuditRecord a;
          a.seq = row[0].as<int64_t>();
          a.at_ms = row[1].as<int64_t>();
          a.principal = row[2].as<std::string>();
          a.team = row[3].as<std::string>();
          a.role = row[4].as<std::string>();
          a.peer = row[5].as<std::string>();
          a.action = row[6].as<std::string>();
          a.resource = row[7].as<std::string>();
          a.detail = row[8].as<std::string>();
          out.push_back(std::move(a));
        }
        return out;
      });
}

}  // namespace ringmaster::scheduler
