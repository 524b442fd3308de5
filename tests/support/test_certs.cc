#include "support/test_certs.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace ringmaster::test {
namespace {

std::mutex g_mu;

// Runs dev_certs.sh with `args`; aborts with its output on failure.
void RunScript(const std::string& dir, const std::string& args) {
  const std::string command =
      absl::StrCat(RINGMASTER_SOURCE_DIR, "/scripts/lib/dev_certs.sh ", dir, " ", args, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[512];
  while (pipe != nullptr && fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  const int status = pipe == nullptr ? -1 : pclose(pipe);
  if (status != 0) {
    std::fprintf(stderr, "test certificates: `%s` failed: %s\n", command.c_str(), out.c_str());
    std::abort();
  }
}

std::string MakeDir(const char* tag) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp", "/rm-certs-", tag, "-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  static std::vector<std::string>* dirs = [] {
    auto* all = new std::vector<std::string>;
    std::atexit([] {
      for (const std::string& d : *dirs) {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);
      }
    });
    return all;
  }();
  dirs->push_back(pattern);
  return pattern;
}

}  // namespace

std::vector<std::string> CertFiles::Flags() const {
  return {"--tls-cert=" + cert, "--tls-key=" + key, "--tls-ca=" + ca};
}

std::map<std::string, std::string> CertFiles::Env() const {
  return {{kTlsCertEnv, cert}, {kTlsKeyEnv, key}, {kTlsCaEnv, ca}};
}

TestCerts::TestCerts(std::string dir) : dir_(std::move(dir)), ca_(dir_ + "/ca.crt") {
  RunScript(dir_, "");
}

const TestCerts& TestCerts::Get() {
  static const TestCerts* certs = new TestCerts(MakeDir("ca"));
  return *certs;
}

const TestCerts& TestCerts::Foreign() {
  static const TestCerts* certs = new TestCerts(MakeDir("foreign"));
  return *certs;
}

CertFiles TestCerts::Named(const std::string& name) const {
  const std::string d = absl::StrCat(dir_, "/", name);
  return CertFiles{d + "/tls.crt", d + "/tls.key", d + "/ca.crt"};
}

CertFiles TestCerts::Worker(const std::string& id) const {
  std::lock_guard<std::mutex> lock(g_mu);
  CertFiles files = Named("worker-" + id);
  struct stat st {};
  if (stat(files.cert.c_str(), &st) != 0) RunScript(dir_, "worker " + id);
  return files;
}

}  // namespace ringmaster::test
