// Every ringctl command's output against a real cluster (PostgreSQL, Redis, the scheduler and two
// real workers): each table is checked line by line against what the scheduler answers for the
// same objects, and each `-o json` output parses back into the RPC's response message.
//
// With RINGMASTER_RINGCTL_EXAMPLES=FILE set, every command and its output are also appended to
// FILE: that is where the examples in docs/ringctl.md come from.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/admin.pb.h"
#include "ringmaster/v1/queue.pb.h"
#include "ringmaster/v1/worker.pb.h"
#include "support/cluster/cluster_test.h"
#include "support/subprocess.h"
#include "support/test_certs.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using namespace std::chrono_literals;

using Output = CapturedRun;

// Splits text into its lines (no empty last line).
std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(absl::StripSuffix(text, "\n"), '\n');
}

// A table's columns by header name: the header's words start the columns (RenderTable pads
// cells to the header's column starts), so cell i of a row starts at header word i's offset.
std::map<std::string, std::string> Row(const std::string& header, const std::string& line) {
  std::vector<std::pair<std::string, size_t>> columns;
  std::regex column("([A-Z()/]+( [A-Z()/]+)*)( {2,}|$)");
  for (auto it = std::sregex_iterator(header.begin(), header.end(), column);
       it != std::sregex_iterator(); ++it) {
    columns.emplace_back((*it)[1].str(), static_cast<size_t>(it->position(1)));
  }
  std::map<std::string, std::string> row;
  for (size_t i = 0; i < columns.size(); ++i) {
    const size_t start = columns[i].second;
    const size_t end = i + 1 < columns.size() ? columns[i + 1].second : std::string::npos;
    std::string cell = start < line.size() ? line.substr(start, end - start) : "";
    row[columns[i].first] = std::string(absl::StripTrailingAsciiWhitespace(cell));
  }
  return row;
}

template <typename Message>
Message ParseJson(const std::string& json) {
  Message message;
  auto status = google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return message;
}

class RingctlOutputTest : public ClusterTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(
        StartCluster({}, {.prefix = "out", .first = 4, .first_address = 4, .cpu_slots = 2}));
  }

  void TearDown() override {
    if (cluster_ == nullptr) return;
    ClusterTest::TearDown();
    CancelLiveJobs();
  }

  // Runs ringctl with `args` against the cluster's scheduler, stdout and stderr apart.
  static Output Ringctl(const std::vector<std::string>& args, const std::string& stdin_text = "") {
    std::vector<std::string> argv = {RINGMASTER_BINARY_DIR "/cli/ringctl", "--scheduler",
                                     cluster_->scheduler().addr()};
    for (const std::string& flag : TestCerts::Get().Client().Flags()) argv.push_back(flag);
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<Output> run = RunCaptured(argv, {}, stdin_text);
    Output result;
    if (run.ok()) {
      result = *std::move(run);
    } else {
      result.err = run.status().ToString();
    }
    Record(args, result);
    return result;
  }

  static void Record(const std::vector<std::string>& args, const Output& result) {
    const char* path = std::getenv("RINGMASTER_RINGCTL_EXAMPLES");
    if (path == nullptr || *path == '\0') return;
    std::ofstream file(path, std::ios::app);
    file << "$ ringctl " << absl::StrJoin(args, " ") << "\n" << result.out << result.err
         << "[exit " << result.exit_code << "]\n\n";
  }

  // Submits a command job and returns its id.
  static std::string Submit(const std::vector<std::string>& args) {
    Output r = Ringctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_THAT(r.out, MatchesRegex("j-[0-9a-f]+\n"));
    return std::string(absl::StripSuffix(r.out, "\n"));
  }
};

TEST_F(RingctlOutputTest, GetShowsTheJobTheSchedulerHasAndJsonIsTheJob) {
  const std::string id =
      Submit({"submit", "--name", "get-me", "--replicas", "2", "--label", "team=vision", "--wait",
              "--", "/bin/sh", "-c", "echo hello from rank $RANK"});
  auto job = cluster_->GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();

  Output r = Ringctl({"get", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::map<std::string, std::string> fields;
  std::vector<std::string> lines = Lines(r.out);
  size_t placement = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("Placement:", 0) == 0) {
      placement = i;
      break;
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, std::regex("([A-Z][A-Za-z ]*:) +(.*)")))
        << "not a `Field:   value` line: " << lines[i];
    EXPECT_EQ(m.position(2), 17) << "values start at column 17: " << lines[i];
    fields[m[1]] = m[2];
  }
  EXPECT_EQ(fields["ID:"], id);
  EXPECT_EQ(fields["Name:"], "get-me");
  EXPECT_EQ(fields["Queue:"], job->spec().queue().empty() ? "-" : job->spec().queue());
  EXPECT_EQ(fields["State:"], "SUCCEEDED");
  EXPECT_EQ(fields["Attempt:"], absl::StrCat(job->attempt()));
  EXPECT_EQ(fields["Replicas:"], "2");
  EXPECT_EQ(fields["GPUs:"], "none (CPU ranks)");
  EXPECT_EQ(fields["Workload:"], "command /bin/sh -c echo hello from rank $RANK");
  EXPECT_EQ(fields["Labels:"], "team=vision");
  EXPECT_THAT(fields["Created:"], MatchesRegex("20[0-9-]+T[0-9:]+Z"));
  EXPECT_THAT(fields["Finished:"], MatchesRegex("20[0-9-]+T[0-9:]+Z"));
  EXPECT_EQ(fields["Exit code:"], "0");
  // The placement: one row per rank, on the workers the scheduler placed it on.
  ASSERT_LT(placement, lines.size()) << r.out;
  if (job->placement().empty()) {
    EXPECT_EQ(lines[placement], "Placement:       none");
  } else {
    ASSERT_EQ(lines.size(), placement + 2 + job->placement_size()) << r.out;
    const std::string& header = lines[placement + 1];
    EXPECT_THAT(header, MatchesRegex("RANK +WORKER +ADDRESS +GPUS"));
    for (int i = 0; i < job->placement_size(); ++i) {
      std::map<std::string, std::string> row = Row(header, lines[placement + 2 + i]);
      const v1::RankPlacement& p = job->placement(i);
      EXPECT_EQ(row["RANK"], absl::StrCat(p.rank()));
      EXPECT_EQ(row["WORKER"], p.worker_id());
      EXPECT_EQ(row["ADDRESS"], absl::StrCat(p.worker_address(), ":", p.worker_port()));
      EXPECT_EQ(row["GPUS"], "cpu");
    }
  }

  Output json = Ringctl({"get", id, "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::Job parsed = ParseJson<v1::Job>(json.out);
  EXPECT_EQ(parsed.id(), id);
  EXPECT_EQ(parsed.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(parsed.spec().command().argv_size(), 3);
  EXPECT_EQ(parsed.spec().labels().at("team"), "vision");
  // Protobuf's field names, zeros printed.
  EXPECT_THAT(json.out, HasSubstr("\"exit_code\": 0"));

  // A running job: its placement, one row per rank, where the scheduler put it.
  const std::string running = Submit(
      {"submit", "--name", "running", "--replicas", "3", "--", "/bin/sh", "-c", "sleep 60"});
  cluster_->WaitState(running, v1::JOB_STATE_RUNNING);
  auto placed = cluster_->GetJob(running);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_EQ(placed->placement_size(), 3);
  Output shown = Ringctl({"get", running});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  std::vector<std::string> rows = Lines(shown.out);
  auto table = std::find(rows.begin(), rows.end(), "Placement:");
  ASSERT_NE(table, rows.end()) << shown.out;
  ASSERT_EQ(rows.end() - table, 5) << shown.out;
  EXPECT_THAT(*(table + 1), MatchesRegex("RANK +WORKER +ADDRESS +GPUS"));
  for (int i = 0; i < 3; ++i) {
    std::map<std::string, std::string> row = Row(*(table + 1), *(table + 2 + i));
    const v1::RankPlacement& p = placed->placement(i);
    EXPECT_EQ(row["RANK"], absl::StrCat(p.rank()));
    EXPECT_EQ(row["WORKER"], p.worker_id());
    EXPECT_EQ(row["ADDRESS"], absl::StrCat(p.worker_address(), ":", p.worker_port()));
    EXPECT_EQ(row["GPUS"], "cpu");
  }
  EXPECT_THAT(shown.out, HasSubstr("\nState:           RUNNING\n"));
  EXPECT_THAT(shown.out, HasSubstr("\nFinished:        -\n"));
  ASSERT_TRUE(cluster_->Cancel(running).ok());

  Output missing = Ringctl({"get", "j-00000000deadbeef"});
  EXPECT_EQ(missing.exit_code, 4);
  EXPECT_EQ(missing.out, "");
  EXPECT_THAT(missing.err, MatchesRegex("ringctl: .*j-00000000deadbeef.*\n"));
}

TEST_F(RingctlOutputTest, ListRowsAreTheJobsTheSchedulerLists) {
  const std::string batch = absl::StrCat("list", getpid());
  const std::string done = Submit({"submit", "--name", "done", "--replicas", "1", "--label",
                                   "batch=" + batch, "--wait", "--", "true"});
  const std::string pending =
      Submit({"submit", "--name", "too-big", "--replicas", "64", "--label", "batch=" + batch,
              "--", "true"});
  cluster_->WaitState(pending, v1::JOB_STATE_PENDING);

  Output r = Ringctl({"list", "-l", "batch=" + batch});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_THAT(lines[0], MatchesRegex("ID +NAME +QUEUE +STATE +PRIORITY +REPLICAS +GPUS +ATTEMPT "
                                     "+AGE +REASON"));
  // Newest first.
  std::map<std::string, std::string> first = Row(lines[0], lines[1]);
  std::map<std::string, std::string> second = Row(lines[0], lines[2]);
  EXPECT_EQ(first["ID"], pending);
  EXPECT_EQ(first["NAME"], "too-big");
  EXPECT_EQ(first["STATE"], "PENDING");
  EXPECT_EQ(first["REPLICAS"], "64");
  EXPECT_EQ(first["GPUS"], "cpu");
  auto job = cluster_->GetJob(pending);
  ASSERT_TRUE(job.ok());
  EXPECT_FALSE(job->pending_reason().empty());
  EXPECT_EQ(first["REASON"], job->pending_reason()) << "a pending job shows why it waits";
  EXPECT_THAT(first["AGE"], MatchesRegex("[0-9]+s"));
  EXPECT_EQ(second["ID"], done);
  EXPECT_EQ(second["STATE"], "SUCCEEDED");
  EXPECT_EQ(second["ATTEMPT"], "0");

  Output json = Ringctl({"list", "-l", "batch=" + batch, "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::ListJobsResponse parsed = ParseJson<v1::ListJobsResponse>(json.out);
  ASSERT_EQ(parsed.jobs_size(), 2) << json.out;
  EXPECT_EQ(parsed.jobs(0).id(), pending);
  EXPECT_EQ(parsed.jobs(1).id(), done);
  EXPECT_EQ(parsed.next_page_token(), "") << "ringctl pages through and prints one response";

  Output none = Ringctl({"list", "-l", "batch=nothing-" + batch});
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_EQ(none.out, "No jobs.\n");

  // cancel: the job's id and the state it is in now.
  Output cancel = Ringctl({"cancel", pending, "--reason", "too big for this cluster"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.out, pending + " CANCELLED\n");
  job = cluster_->GetJob(pending);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_THAT(job->message(), HasSubstr("too big for this cluster"));
  EXPECT_EQ(job->pending_reason(), "") << "a job that no longer waits has no reason to";
  Output again = Ringctl({"cancel", pending});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(again.out, "");
  EXPECT_EQ(again.err, absl::StrCat("ringctl: cannot cancel job ", pending, ": job ", pending,
                                    " already ended (CANCELLED)\n"));
  const std::string other = Submit({"submit", "--name", "too-big-2", "--replicas", "64", "--",
                                    "true"});
  Output json_cancel = Ringctl({"cancel", other, "-o", "json"});
  ASSERT_EQ(json_cancel.exit_code, 0) << json_cancel.err;
  v1::CancelJobResponse cancelled = ParseJson<v1::CancelJobResponse>(json_cancel.out);
  EXPECT_EQ(cancelled.job().id(), other);
  EXPECT_EQ(cancelled.job().state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(RingctlOutputTest, WatchPrintsEveryEventOfTheJobInOrder) {
  const std::string id =
      Submit({"submit", "--name", "watched", "--replicas", "1", "--wait", "--", "true"});
  std::vector<v1::JobEvent> events = cluster_->Events(id);
  ASSERT_GE(events.size(), 3u);

  Output r = Ringctl({"watch", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), events.size() + 1) << r.out;
  EXPECT_EQ(lines[0], "TIME                  SEQ  STATE      ATTEMPT  REASON");
  for (size_t i = 0; i < events.size(); ++i) {
    std::map<std::string, std::string> row = Row(lines[0], lines[i + 1]);
    EXPECT_THAT(row["TIME"], MatchesRegex("20[0-9-]+T[0-9:]+Z"));
    EXPECT_EQ(row["SEQ"], absl::StrCat(events[i].seq()));
    EXPECT_EQ(row["STATE"], v1::JobState_Name(events[i].state()).substr(10));
    EXPECT_EQ(row["ATTEMPT"], absl::StrCat(events[i].attempt()));
    EXPECT_EQ(row["REASON"], events[i].reason());
  }
  EXPECT_THAT(lines.back(), ContainsRegex(" SUCCEEDED "));

  // JSON Lines: one JobEvent per line.
  Output json = Ringctl({"watch", id, "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  std::vector<std::string> records = Lines(json.out);
  ASSERT_EQ(records.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(ParseJson<v1::JobEvent>(records[i]).seq(), events[i].seq());
  }

  // A job that fails: the events, then one line on stderr with its reason, exit 5.
  Output failed = Ringctl({"submit", "--name", "fails", "--replicas", "1", "--wait", "--",
                           "/bin/sh", "-c", "exit 3"});
  ASSERT_EQ(failed.exit_code, 5);
  const std::string failed_id = Lines(failed.out)[0];
  Output w = Ringctl({"watch", failed_id});
  EXPECT_EQ(w.exit_code, 5);
  EXPECT_THAT(Lines(w.out).back(), ContainsRegex(" FAILED .*3"));
  EXPECT_THAT(w.err, MatchesRegex("ringctl: job " + failed_id + " ended FAILED: .*3.*\n"));
}

TEST_F(RingctlOutputTest, WorkersShowsEveryWorkerTheSchedulerHas) {
  // The scheduler's answer, as ringctl prints it in JSON.
  Output json = Ringctl({"workers", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  std::optional<v1::ListWorkersResponse> listed = ParseJson<v1::ListWorkersResponse>(json.out);
  ASSERT_GE(listed->workers_size(), 2) << json.out;

  Output r = Ringctl({"workers"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 4u) << r.out;
  EXPECT_THAT(lines[0],
              MatchesRegex("WORKER +ADDRESS +STATE +GPUS \\(USED/TOTAL\\) +CPU SLOTS +HEARTBEAT"));
  int rows = 0;
  int cpu_total = 0;
  for (const v1::WorkerInfo& w : listed->workers()) {
    for (size_t i = 1; i < lines.size() && !lines[i].empty(); ++i) {
      std::map<std::string, std::string> row = Row(lines[0], lines[i]);
      if (row["WORKER"] != w.worker_id()) continue;
      ++rows;
      EXPECT_EQ(row["ADDRESS"], absl::StrCat(w.address(), ":", w.port()));
      EXPECT_EQ(row["STATE"], "READY");
      EXPECT_EQ(row["CPU SLOTS"], absl::StrCat(w.cpu_slots_used(), "/", w.cpu_slots()));
      EXPECT_THAT(row["HEARTBEAT"], MatchesRegex("[0-9]+s ago"));
      cpu_total += w.cpu_slots();
    }
  }
  EXPECT_EQ(rows, listed->workers_size()) << r.out;
  EXPECT_EQ(lines[rows + 1], "");
  EXPECT_THAT(lines[rows + 2], MatchesRegex(absl::StrCat(
                                   "READY totals: GPUs .*; CPU slots [0-9]+/", cpu_total)));

  // clear: of a healthy worker it says so; of an unknown one it is NOT_FOUND (exit 4).
  const std::string worker = listed->workers(0).worker_id();
  Output clear = Ringctl({"workers", "clear", worker});
  EXPECT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_EQ(clear.out, "worker " + worker + " is healthy; it takes new placements\n");
  Output unknown = Ringctl({"workers", "clear", "no-such-worker"});
  EXPECT_EQ(unknown.exit_code, 4) << unknown.out << unknown.err;
  EXPECT_EQ(unknown.err,
            "ringctl: clear worker no-such-worker: not found: no worker no-such-worker\n");
}

TEST_F(RingctlOutputTest, LogsPrintWhatTheRankWrote) {
  const std::string id =
      Submit({"submit", "--name", "chatty", "--replicas", "2", "--wait", "--", "/bin/sh", "-c",
              "echo line one of rank $RANK; echo line two of rank $RANK >&2"});
  for (int rank = 0; rank < 2; ++rank) {
    Output r = Ringctl({"logs", id, "--rank", absl::StrCat(rank)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("line one of rank ", rank, "\n")));
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("line two of rank ", rank, "\n")));
    EXPECT_THAT(r.out, Not(HasSubstr(absl::StrCat("rank ", 1 - rank))));
  }
  Output bad = Ringctl({"logs", id, "--rank", "2"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "ringctl: --rank: job " + id + " has 2 ranks (0..1), got 2\n");
}

TEST_F(RingctlOutputTest, QueueCommandsShowTheQueueTheSchedulerStores) {
  const std::string name = absl::StrCat("outq", getpid());
  const std::string cohort = absl::StrCat("c", getpid());
  const std::string yaml = absl::StrCat("name: ", name, "\ncohort: ", cohort,
                                        "\nweight: 3\nresources:\n  cpu:\n    nominal: 2\n"
                                        "    borrowing_limit: 1\n");
  Output created = Ringctl({"queue", "create", "-f", "-"}, yaml);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(created.out, "queue " + name + " created\n");

  Output get = Ringctl({"queue", "get", name});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  std::vector<std::string> lines = Lines(get.out);
  EXPECT_EQ(lines[0], "Name:          " + name);
  EXPECT_THAT(get.out, HasSubstr("\nWeight:        3\n"));
  EXPECT_THAT(get.out, HasSubstr("\nCohort:        " + cohort + "\n"));
  EXPECT_THAT(get.out, HasSubstr("\nPending jobs:  0\n"));
  auto header = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.rfind("RESOURCE", 0) == 0;
  });
  ASSERT_NE(header, lines.end()) << get.out;
  ASSERT_NE(header + 1, lines.end()) << get.out;
  std::map<std::string, std::string> cpu = Row(*header, *(header + 1));
  EXPECT_EQ(cpu["RESOURCE"], "cpu");
  EXPECT_EQ(cpu["NOMINAL"], "2");
  EXPECT_EQ(cpu["BORROWING LIMIT"], "1");
  EXPECT_EQ(cpu["LENDING LIMIT"], "all");
  EXPECT_EQ(cpu["IN USE"], "0");
  EXPECT_EQ(cpu["USED (HOURS)"], "0.00");

  Output list = Ringctl({"queue", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::vector<std::string> rows = Lines(list.out);
  EXPECT_THAT(rows[0], MatchesRegex("NAME +COHORT +WEIGHT +NOMINAL +IN USE +BORROWED +LENT "
                                    "+PENDING +SHARE"));
  bool found = false;
  for (size_t i = 1; i < rows.size(); ++i) {
    std::map<std::string, std::string> row = Row(rows[0], rows[i]);
    if (row["NAME"] != name) continue;
    found = true;
    EXPECT_EQ(row["COHORT"], cohort);
    EXPECT_EQ(row["WEIGHT"], "3");
    EXPECT_EQ(row["NOMINAL"], "cpu:2");
    EXPECT_EQ(row["IN USE"], "0");
    EXPECT_EQ(row["PENDING"], "0");
    EXPECT_EQ(row["SHARE"], "0.00");
  }
  EXPECT_TRUE(found) << list.out;
  Output json = Ringctl({"queue", "list", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(ParseJson<v1::ListQueuesResponse>(json.out).queues_size(),
            static_cast<int>(rows.size()) - 1);

  Output updated = Ringctl({"queue", "update", "-f", "-"},
                           absl::StrCat("name: ", name, "\nweight: 5\n"));
  // Without a cohort now, so the get below also shows the line of a queue that has none.
  ASSERT_EQ(updated.exit_code, 0) << updated.err;
  EXPECT_EQ(updated.out, "queue " + name + " updated\n");
  Output get_json = Ringctl({"queue", "get", name, "-o", "json"});
  ASSERT_EQ(get_json.exit_code, 0) << get_json.err;
  v1::QueueWithStatus stored = ParseJson<v1::QueueWithStatus>(get_json.out);
  EXPECT_EQ(stored.queue().weight(), 5);
  EXPECT_TRUE(stored.queue().resources().empty()) << "update replaces every field";
  EXPECT_EQ(stored.queue().cohort(), "");
  Output plain = Ringctl({"queue", "get", name});
  EXPECT_THAT(plain.out, HasSubstr("\nCohort:        - (none: lends and borrows nothing)\n"));
  EXPECT_THAT(plain.out, HasSubstr("\nNo quotas: only the cluster's capacity bounds this queue.\n"));

  Output bad = Ringctl({"queue", "update", "-f", "-"},
                       absl::StrCat("name: ", name, "\nweight: 2000\n"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("weight: must be 1..1000, got 2000"));

  Output deleted = Ringctl({"queue", "delete", name});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(deleted.out, "queue " + name + " deleted\n");
  Output gone = Ringctl({"queue", "get", name});
  EXPECT_EQ(gone.exit_code, 4);
}

TEST_F(RingctlOutputTest, AdminTokenAndAuditOutputs) {
  const std::string team = absl::StrCat("t", getpid());
  Output created = Ringctl({"admin", "token", "create", "--team", team, "--role", "viewer",
                            "--expires", "1d", "--description", "output test"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(created.out, m, std::regex("rmt_([0-9a-f]{16})_[0-9a-f]{64}\n")))
      << "only the token on stdout: " << created.out;
  const std::string token_id = m[1];
  EXPECT_THAT(created.err,
              MatchesRegex(absl::StrCat("token ", token_id, ": viewer of team ", team,
                                        ", expires 20[0-9-]+T[0-9:]+Z\\. It is shown only now; "
                                        "the scheduler keeps its hash alone\\.\n")));

  Output list = Ringctl({"admin", "token", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::vector<std::string> lines = Lines(list.out);
  EXPECT_THAT(lines[0],
              MatchesRegex("ID +TEAM +ROLE +CREATED +EXPIRES +REVOKED +DESCRIPTION"));
  bool found = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::map<std::string, std::string> row = Row(lines[0], lines[i]);
    if (row["ID"] != token_id) continue;
    found = true;
    EXPECT_EQ(row["TEAM"], team);
    EXPECT_EQ(row["ROLE"], "viewer");
    EXPECT_THAT(row["CREATED"], MatchesRegex("20[0-9-]+T[0-9:]+Z"));
    EXPECT_THAT(row["EXPIRES"], MatchesRegex("20[0-9-]+T[0-9:]+Z"));
    EXPECT_EQ(row["REVOKED"], "no");
    EXPECT_EQ(row["DESCRIPTION"], "output test");
  }
  EXPECT_TRUE(found) << list.out;
  EXPECT_THAT(list.out, Not(ContainsRegex("rmt_[0-9a-f]{16}_"))) << "never a secret";
  Output json = Ringctl({"admin", "token", "list", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_GE(ParseJson<v1::ListTokensResponse>(json.out).tokens_size(), 2);

  Output revoked = Ringctl({"admin", "token", "revoke", token_id});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_EQ(revoked.out, absl::StrCat("revoked token ", token_id, " (viewer of team ", team,
                                      ")\n"));
  Output active = Ringctl({"admin", "token", "list"});
  EXPECT_THAT(active.out, Not(HasSubstr(token_id))) << "list shows active tokens only";
  Output all = Ringctl({"admin", "token", "list", "--all"});
  EXPECT_THAT(all.out, HasSubstr(token_id));

  // The trail is stored a few milliseconds after the action.
  Output audit;
  std::vector<std::string> entries;
  EXPECT_TRUE(WaitFor(
      [&] {
        audit = Ringctl({"admin", "audit", "--limit", "5"});
        entries = Lines(audit.out);
        return audit.exit_code == 0 && entries.size() > 1 &&
               entries[1].find("RevokeToken") != std::string::npos;
      },
      10s, 100ms))
      << audit.out << audit.err;
  ASSERT_GE(entries.size(), 3u) << audit.out;
  EXPECT_THAT(entries[0], MatchesRegex("SEQ +TIME +WHO +TEAM +ROLE +FROM +ACTION +RESOURCE "
                                       "+DETAIL"));
  EXPECT_LE(entries.size(), 6u) << "--limit 5";
  // Newest first: the revoke, then the create.
  std::map<std::string, std::string> newest = Row(entries[0], entries[1]);
  EXPECT_EQ(newest["ACTION"], "RevokeToken");
  EXPECT_EQ(newest["RESOURCE"], token_id);
  std::map<std::string, std::string> before = Row(entries[0], entries[2]);
  EXPECT_EQ(before["ACTION"], "CreateToken");
  Output audit_json = Ringctl({"admin", "audit", "--limit", "2", "-o", "json"});
  ASSERT_EQ(audit_json.exit_code, 0) << audit_json.err;
  EXPECT_EQ(ParseJson<v1::ListAuditResponse>(audit_json.out).entries_size(), 2);
}

}  // namespace
}  // namespace ringmaster::test
