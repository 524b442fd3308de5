#include "worker/core/auth.h"

namespace ringmaster::worker {

bool SecretsEqual(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

TokenRole RoleOfToken(const std::string& token, const std::string& job_token,
                      const std::string& check_token, bool check_over) {
  if (token.empty()) return TokenRole::kNone;
  if (SecretsEqual(token, job_token)) return TokenRole::kJob;
  if (!check_token.empty() && !check_over && SecretsEqual(token, check_token)) {
    return TokenRole::kCheck;
  }
  return TokenRole::kNone;
}

}  // namespace ringmaster::worker
