#include "scheduler/rpc/authenticator.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ringmaster::scheduler {
namespace {

constexpr const char* kPrefix = "rmt_";
constexpr size_t kIdHex = 16;
constexpr size_t kSecretHex = 64;

std::string Sha256(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  // RAND_bytes fails only when the system has no entropy source at all.
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    RM_LOG(kError) << "RAND_bytes failed; refusing to make a predictable token";
    std::abort();
  }
  return absl::BytesToHexString(raw);
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

NewToken GenerateToken() {
  NewToken t;
  t.id = RandomHex(kIdHex / 2);
  const std::string secret = RandomHex(kSecretHex / 2);
  t.token = absl::StrCat(kPrefix, t.id, "_", secret);
  t.secret_sha256 = Sha256(secret);
  return t;
}

absl::Status ParseToken(const std::string& token, std::string* id, std::string* secret_sha256) {
  const size_t prefix = std::strlen(kPrefix);
  if (token.size() != prefix + kIdHex + 1 + kSecretHex || !absl::StartsWith(token, kPrefix) ||
      token[prefix + kIdHex] != '_') {
    return absl::UnauthenticatedError("malformed bearer token (expected rmt_<id>_<secret>)");
  }
  std::string_view id_part = std::string_view(token).substr(prefix, kIdHex);
  std::string_view secret = std::string_view(token).substr(prefix + kIdHex + 1);
  if (!IsLowerHex(id_part) || !IsLowerHex(secret)) {
    return absl::UnauthenticatedError("malformed bearer token (expected rmt_<id>_<secret>)");
  }
  *id = std::string(id_part);
  *secret_sha256 = Sha256(std::string(secret));
  return absl::OkStatus();
}

Authenticator::Authenticator(PostgresIdentityStore* store, const Clock* clock, int64_t cache_ttl_ms)
    : store_(store), clock_(clock), cache_ttl_ms_(cache_ttl_ms) {
  audit_thread_ = std::thread([this] { AuditLoop(); });
}

Authenticator::~Authenticator() { Stop(); }

void Authenticator::Stop() {
  {
    MutexLock lock(&audit_mu_);
    stopping_ = true;
  }
  audit_cv_.NotifyAll();
  if (audit_thread_.joinable()) audit_thread_.join();
}

void Authenticator::Refresh(const std::string& id) {
  absl::StatusOr<std::optional<TokenRecord>> found = store_->FindToken(id);
  if (!found.ok()) return;  // Postgres away: the cached row stands, retried after the ttl
  const int64_t now = clock_->NowMs();
  MutexLock lock(&mu_);
  if (!found->has_value()) {
    cache_.erase(id);
  } else {
    cache_[id] = Cached{**found, now};
  }
}

void Authenticator::AuditLoop() {
  MutexLock lock(&audit_mu_);
  while (true) {
    audit_cv_.Wait(&audit_mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(audit_mu_) {
      return stopping_ || !audit_queue_.empty() || !refresh_queue_.empty();
    });
    if (audit_queue_.empty() && refresh_queue_.empty() && stopping_) return;
    std::vector<std::string> refresh;
    refresh.swap(refresh_queue_);
    std::sort(refresh.begin(), refresh.end());
    refresh.erase(std::unique(refresh.begin(), refresh.end()), refresh.end());
    std::vector<AuditRecord> batch;
    batch.swap(audit_queue_);
    lock.Unlock();
    for (const std::string& id : refresh) Refresh(id);
    if (batch.empty()) {
      lock.Lock();
      continue;
    }
    if (auto s = store_->AppendAudit(batch); !s.ok()) {
      RM_LOG(kError) << "audit trail: could not store " << batch.size()
                     << " entries (first: " << batch.front().action << " of "
                     << batch.front().resource << " by " << batch.front().principal << "): " << s;
    }
    lock.Lock();
  }
}

namespace {

// The caller of a token whose row is `record`, at `now`: the secret's hash must match (compared
// in constant time), and the token be neither revoked nor expired.
absl::StatusOr<Principal> FromRecord(const TokenRecord& record, const std::string& hash,
                                     int64_t now) {
  if (record.secret_sha256.size() != hash.size() ||
      CRYPTO_memcmp(record.secret_sha256.data(), hash.data(), hash.size()) != 0) {
    return absl::UnauthenticatedError("unknown bearer token");
  }
  if (record.revoked) {
    return absl::UnauthenticatedError(absl::StrCat("bearer token ", record.id, " was revoked"));
  }
  if (record.expires_at_ms != 0 && record.expires_at_ms <= now) {
    return absl::UnauthenticatedError(absl::StrCat("bearer token ", record.id, " has expired"));
  }
  return Principal{record.id, record.team, record.role};
}

// The same from what a read of Postgres found.
absl::StatusOr<Principal> FromFound(const absl::StatusOr<std::optional<TokenRecord>>& found,
                                    const std::string& hash, int64_t now) {
  if (!found.ok()) {
    // The caller cannot be told apart from a stranger without the database.
    return absl::UnavailableError(
        absl::StrCat("cannot check the bearer token now: ", found.status().message()));
  }
  if (!found->has_value()) return absl::UnauthenticatedError("unknown bearer token");
  return FromRecord(**found, hash, now);
}

}  // namespace

absl::StatusOr<Principal> Authenticator::Authenticate(const grpc::ServerContextBase& ctx) {
  std::promise<absl::StatusOr<Principal>> answer;
  std::future<absl::StatusOr<Principal>> who = answer.get_future();
  // A read is done on this thread (an RPC's own); a wait for another call's read blocks it.
  Start(ctx, /*read_here=*/true,
        [&answer](absl::StatusOr<Principal> p) { answer.set_value(std::move(p)); });
  return who.get();
}

void Authenticator::CheckAsync(const grpc::ServerContextBase& ctx, Action action,
                               std::function<void(absl::StatusOr<Principal>)> done) {
  Start(ctx, /*read_here=*/false, [action, done = std::move(done)](absl::StatusOr<Principal> who) {
    if (who.ok()) {
      if (absl::Status s = Authorize(*who, action, ""); !s.ok()) who = s;
    }
    done(std::move(who));
  });
}

void Authenticator::Start(const grpc::ServerContextBase& ctx, bool read_here, Done done) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    if (allow_anonymous_) return done(Principal{"anonymous", "anonymous", Role::kAdmin});
    return done(absl::UnauthenticatedError(
        "no credentials: send an 'authorization: Bearer <token>' header (ringctl: --token, "
        "RINGMASTER_TOKEN or ~/.config/ringmaster/token)"));
  }
  std::string value(it->second.data(), it->second.size());
  if (!absl::StartsWithIgnoreCase(value, "Bearer ")) {
    return done(absl::UnauthenticatedError("the authorization header is not 'Bearer <token>'"));
  }
  std::string token(absl::StripAsciiWhitespace(value.substr(7)));
  std::string id, hash;
  if (auto s = ParseToken(token, &id, &hash); !s.ok()) return done(s);

  const int64_t now = clock_->NowMs();
  std::optional<TokenRecord> record;
  bool stale = false;
  {
    MutexLock lock(&mu_);
    if (auto c = cache_.find(id); c != cache_.end()) {
      record = c->second.token;
      if (now - c->second.fetched_at_ms >= cache_ttl_ms_) {
        stale = true;
        c->second.fetched_at_ms = now;  // one refresh per ttl, not one per call
      }
    } else if (auto u = unknown_.find(id); u != unknown_.end() && now - u->second < cache_ttl_ms_) {
      return done(absl::UnauthenticatedError("unknown bearer token"));
    } else if (auto l = lookups_.find(id); l != lookups_.end()) {
      // Another call is reading this id: this one waits for that answer instead of reading it
      // again, so a burst of one client's calls on a token not cached yet costs one read and
      // turns none away. Bounded, as a flood of calls on one made-up id would be.
      if (waiters_ >= kMaxTokenWaiters) {
        return done(absl::UnavailableError(
            "too many calls are waiting for their bearer token to be checked; retry"));
      }
      ++waiters_;
      l->second.push_back([hash, now, done = std::move(done)](const Found& found) {
        done(FromFound(found, hash, now));
      });
      return;
    } else {
      // Ids are not secret and anyone may send one: a flood of made-up ids must not take every
      // RPC thread into a Postgres read (or all of them into a wait while Postgres hangs).
      if (lookups_.size() >= static_cast<size_t>(kMaxTokenLookups)) {
        return done(absl::UnavailableError(
            "too many bearer tokens are being checked against the database at once; retry"));
      }
      lookups_[id];
    }
  }
  if (record) {
    if (stale) {
      // Older than cache_ttl_ms: served as it is while the audit thread reads it again, so no
      // call waits for Postgres (nor fails while it is away) for a token already known.
      {
        MutexLock lock(&audit_mu_);
        refresh_queue_.push_back(id);
      }
      audit_cv_.NotifyOne();
    }
    return done(FromRecord(*record, hash, now));
  }
  // Shared, so that the caller still hears if no thread could be started to read.
  auto owned = std::make_shared<Done>(std::move(done));
  auto read = [this, id, hash, now, owned] {
    Found found = store_->FindToken(id);
    std::vector<Waiter> waiters = Settle(id, found);
    // Nothing of `this` from here: the server's shutdown waits only for these answers.
    (*owned)(FromFound(found, hash, now));
    for (Waiter& w : waiters) w(found);
  };
  if (read_here) return read();
  // gRPC's callback threads must not wait on Postgres (they also serve the workers' streams).
  try {
    std::thread(read).detach();
  } catch (const std::system_error& e) {  // no thread to be had: the callers retry
    Found failed = absl::UnavailableError(absl::StrCat("no thread to read it: ", e.what()));
    std::vector<Waiter> waiters = Settle(id, failed);
    (*owned)(FromFound(failed, hash, now));
    for (Waiter& w : waiters) w(failed);
  }
}

std::vector<Authenticator::Waiter> Authenticator::Settle(const std::string& id,
                                                         const Found& found) {
  const int64_t now = clock_->NowMs();
  MutexLock lock(&mu_);
  auto l = lookups_.find(id);
  std::vector<Waiter> waiters = std::move(l->second);
  lookups_.erase(l);
  waiters_ -= static_cast<int>(waiters.size());
  if (!found.ok()) return waiters;  // Postgres away: nothing learned
  if (!found->has_value()) {
    if (unknown_.size() > 10000) unknown_.clear();  // bounded, like the cache
    unknown_[id] = now;
    cache_.erase(id);
  } else {
    if (cache_.size() > 10000) cache_.clear();  // bounded: ids are not secret
    cache_[id] = Cached{**found, now};
  }
  return waiters;
}

absl::StatusOr<Principal> Authenticator::Check(const grpc::ServerContextBase& ctx, Action action,
                                               const std::string& resource_team) {
  absl::StatusOr<Principal> who = Authenticate(ctx);
  if (!who.ok()) return who;
  if (auto s = Authorize(*who, action, resource_team); !s.ok()) return s;
  return who;
}

void Authenticator::Forget(const std::string& token_id) {
  MutexLock lock(&mu_);
  cache_.erase(token_id);
  unknown_.erase(token_id);
}

AuditRecord Authenticator::Record(const Principal& who, const grpc::ServerContextBase& ctx,
                                  Action action, const std::string& resource,
                                  const std::string& detail) const {
  AuditRecord a;
  a.at_ms = clock_->NowMs();
  a.principal = who.token_id;
  a.team = who.team;
  a.role = RoleName(who.role);
  a.peer = ctx.peer();
  a.action = ActionName(action);
  a.resource = resource;
  a.detail = detail;
  return a;
}

void Authenticator::Audit(const Principal& who, const grpc::ServerContextBase& ctx, Action action,
                          const std::string& resource, const std::string& detail) {
  AuditRecord a = Record(who, ctx, action, resource, detail);
  {
    MutexLock lock(&audit_mu_);
    audit_queue_.push_back(std::move(a));
  }
  audit_cv_.NotifyOne();
}

absl::Status EnsureBootstrapAdmin(PostgresIdentityStore* store, const Clock& clock,
                                  const std::string& file) {
  std::ifstream in(file);
  if (in) {
    std::stringstream content;
    content << in.rdbuf();
    const std::string token(absl::StripAsciiWhitespace(content.str()));
    std::string id, hash;
    if (auto s = ParseToken(token, &id, &hash); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--admin-token-file ", file, ": ", s.message()));
    }
    auto found = store->FindToken(id);
    if (!found.ok()) return found.status();
    if (found->has_value()) {
      if ((*found)->secret_sha256 != hash) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--admin-token-file ", file, ": token id ", id,
            " is registered with another secret; remove the file or give the right token"));
      }
      return absl::OkStatus();
    }
    TokenRecord record{
        id,          hash,         "admin", Role::kAdmin, "bootstrap (from --admin-token-file)",
        "bootstrap", clock.NowMs()};
    absl::Status created = store->CreateToken(record);
    // A second scheduler (a standby) registering the same file at the same moment.
    if (created.code() == absl::StatusCode::kAlreadyExists) return absl::OkStatus();
    if (!created.ok()) return created;
    RM_LOG(kInfo) << "registered the admin token " << id << " of " << file;
    return absl::OkStatus();
  }
  auto has_admin = store->HasActiveAdmin(clock.NowMs());
  if (!has_admin.ok()) return has_admin.status();
  if (*has_admin) {
    RM_LOG(kInfo) << "--admin-token-file " << file
                  << " does not exist, but an admin token does; none was made";
    return absl::OkStatus();
  }
  NewToken t = GenerateToken();
  int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--admin-token-file ", file, ": cannot create it: ", std::strerror(errno)));
  }
  const std::string line = t.token + "\n";
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!written) {
    unlink(file.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("--admin-token-file ", file, ": cannot write it"));
  }
  TokenRecord record{t.id,        t.secret_sha256, "admin",      Role::kAdmin,
                     "bootstrap", "bootstrap",     clock.NowMs()};
  if (auto s = store->CreateToken(record); !s.ok()) {
    unlink(file.c_str());
    return s;
  }
  RM_LOG(kInfo) << "no admin token existed: made admin token " << t.id << " and wrote it to "
                << file << " (mode 0600)";
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
