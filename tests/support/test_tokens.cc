#include "support/test_tokens.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/bearer_token.h"
#include "gtest/gtest.h"

namespace ringmaster::test {
namespace {

std::string RandomHex(size_t digits) {
  std::random_device random;
  std::string out;
  while (out.size() < digits) out += absl::StrCat(absl::Hex(random(), absl::kZeroPad8));
  return out.substr(0, digits);
}

}  // namespace

const TestAdminToken& AdminToken() {
  static const TestAdminToken* token = [] {
    auto* t = new TestAdminToken();
    t->id = RandomHex(16);
    t->token = absl::StrCat("rmt_", t->id, "_", RandomHex(64));
    t->file = absl::StrCat(::testing::TempDir(), "admin-token-", getpid(), "-", t->id);
    int fd = open(t->file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      const std::string line = t->token + "\n";
      if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        std::perror("writing the test admin token");
      }
      close(fd);
    }
    setenv(kTokenEnv, t->token.c_str(), 1);
    return t;
  }();
  return *token;
}

const std::string& SecretsKeyFile() {
  static const std::string* file = [] {
    auto* path = new std::string(
        absl::StrCat(::testing::TempDir(), "secrets-key-", getpid(), "-", RandomHex(8)));
    int fd = open(path->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      const std::string line = RandomHex(64) + "\n";
      if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        std::perror("writing the test secrets key");
      }
      close(fd);
    }
    return path;
  }();
  return *file;
}

}  // namespace ringmaster::test
