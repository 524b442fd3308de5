#include "support/postgres_server.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/net.h"
#include "support/proc_file.h"

namespace ringmaster::test {
namespace {

// The parent pid of `pid` from /proc/PID/stat; -1 when it is gone.
pid_t ParentOf(pid_t pid) {
  const std::string stat = ReadProcFile(absl::StrCat("/proc/", pid, "/stat"));
  auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  return fields.size() > 1 ? static_cast<pid_t>(std::atoi(fields[1].c_str())) : -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start() {
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  std::string templ = "/tmp/ringmaster-pg-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  chmod(templ.c_str(), 0755);
  server->dir_ = templ + "/data";
  absl::StatusOr<int> port = PickFreePort();
  if (!port.ok()) return port.status();
  server->port_ = *port;
  if (auto s = server->Run("pg_start"); !s.ok()) return s;
  return server;
}

PostgresServer::~PostgresServer() {
  (void)Resume();
  (void)Run("pg_stop");
  std::string parent = dir_.substr(0, dir_.rfind('/'));
  (void)system(absl::StrCat("rm -rf '", parent, "'").c_str());
}

std::string PostgresServer::admin_url() const {
  return absl::StrCat("postgresql://postgres@127.0.0.1:", port_, "/postgres");
}

absl::Status PostgresServer::Run(const std::string& what) {
  std::string command = absl::StrCat(
      "bash -c 'source \"", RINGMASTER_SOURCE_DIR, "/scripts/lib/pg.sh\" && PG_OPTS=\"-c fsync=off\" ",
      what, " \"", dir_, "\"", what == "pg_start" ? absl::StrCat(" ", port_) : "", "' 2>&1");
  if (system(command.c_str()) != 0) {
    std::ifstream log(dir_ + "/server.log");
    std::stringstream text;
    text << log.rdbuf();
    return absl::UnavailableError(absl::StrCat(what, " failed: ", text.str()));
  }
  return absl::OkStatus();
}

absl::Status PostgresServer::Restart() {
  if (auto s = Resume(); !s.ok()) return s;
  if (auto s = Run("pg_stop"); !s.ok()) return s;
  return Run("pg_start");
}

absl::Status PostgresServer::Pause() {
  std::ifstream pidfile(dir_ + "/postmaster.pid");
  pid_t postmaster = 0;
  if (!(pidfile >> postmaster) || postmaster <= 0) {
    return absl::FailedPreconditionError("postgres is not running");
  }
  paused_ = {postmaster};
  if (DIR* proc = opendir("/proc")) {
    while (dirent* e = readdir(proc)) {
      pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      if (pid > 0 && ParentOf(pid) == postmaster) paused_.push_back(pid);
    }
    closedir(proc);
  }
  for (pid_t pid : paused_) kill(pid, SIGSTOP);
  return absl::OkStatus();
}

absl::Status PostgresServer::Resume() {
  for (pid_t pid : paused_) kill(pid, SIGCONT);
  paused_.clear();
  return absl::OkStatus();
}

}  // namespace ringmaster::test
