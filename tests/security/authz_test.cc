// Who may do what, against a real scheduler on real PostgreSQL and Redis: every RPC of
// JobService, ClusterService, QueueService and AdminService with no credentials, a malformed,
// an expired and a revoked token (UNAUTHENTICATED), the wrong role (PERMISSION_DENIED naming
// the missing right) and the wrong team (NOT_FOUND, absent from lists); nothing of a refused
// call is stored (rows of jobs, queues, api_tokens and audit_log counted in PostgreSQL). Also:
// env values only for the job's own team, the audit trail, and that a revoked token stops at
// once. One scheduler for the whole suite (its start is the expensive part).
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/bearer_token.h"
#include "common/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/admin.grpc.pb.h"
#include "ringmaster/v1/queue.grpc.pb.h"
#include "ringmaster/v1/registry.grpc.pb.h"
#include "ringmaster/v1/volume.grpc.pb.h"
#include "scheduler/harness.h"
#include "support/test_certs.h"
#include "support/test_tokens.h"
#include "support/wait_for.h"

namespace ringmaster::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// One RPC of the API, callable with any channel: returns its status.
struct Rpc {
  std::string name;
  std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&)> call;
};

grpc::ClientContext* Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + 5s);
  return ctx;
}

v1::JobSpec CommandSpec(const std::string& name) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_replicas(1);
  spec.mutable_command()->add_argv("true");
  (*spec.mutable_command()->mutable_env())["SECRET_KEY"] = "s3cr3t";
  return spec;
}

class AuthzTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto db = TestDatabase::Create();
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = db->release();
    auto redis = RedisServer::StartNew();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = redis->release();
    auto scheduler = SchedulerProcess::Start(db_->url(), redis_->addr());
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = scheduler->release();
    admin_ = scheduler_->channel();
    member_a_ = Channel(CreateToken("team-a", "member", ""));
    viewer_a_ = Channel(CreateToken("team-a", "viewer", ""));
    member_b_ = Channel(CreateToken("team-b", "member", ""));
    // Expired: made with a lifetime, then moved into the past in the database (never used
    // before, so no cache holds it).
    std::string expired_id;
    expired_ = Channel(CreateToken("team-a", "admin", "1h", &expired_id));
    Sql(absl::StrCat("UPDATE api_tokens SET expires_at_ms = 1 WHERE id = '", expired_id, "'"));
    std::string revoked_id;
    revoked_ = Channel(CreateToken("team-a", "admin", "", &revoked_id));
    Revoke(revoked_id);
    // A job of team a, and a queue, for the calls that need one.
    v1::SubmitJobRequest submit;
    *submit.mutable_spec() = CommandSpec("team-a-job");
    v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = v1::JobService::NewStub(member_a_)->SubmitJob(Deadline(&ctx), submit, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    job_a_ = resp.job().id();
    // Every audit entry of the set-up stored (a background thread writes them), so that the

    ASSERT_TRUE(WaitFor([] { return Sql("SELECT count(*) FROM audit_log") >= 7; }, 10s, 20ms));
  }
  static void TearDownTestSuite() {
    delete scheduler_;
    delete redis_;
    delete db_;
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "scheduler log:\n" << scheduler_->LogTail() << "\n";
  }

  static std::shared_ptr<grpc::Channel> Channel(const std::string& token) {
    return CreateChannelWithToken(scheduler_->addr(),
                                  *MakeChannelCredentials(TestCerts::Get().CaOnly()), token);
  }
  static std::string CreateToken(const std::string& team, const std::string& role,
                                 const std::string& expires, std::string* id = nullptr) {
    v1::CreateTokenRequest req;
    req.set_team(team);
    req.set_role(role);
    req.set_expires_in(expires);
    v1::CreateTokenResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = v1::AdminService::NewStub(admin_)->CreateToken(Deadline(&ctx), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (id != nullptr) *id = resp.info().id();
    return resp.token();
  }
  static grpc::Status Revoke(const std::string& id) {
    v1::RevokeTokenRequest req;
    req.set_id(id);
    v1::RevokeTokenResponse resp;
    grpc::ClientContext ctx;
    return v1::AdminService::NewStub(admin_)->RevokeToken(Deadline(&ctx), req, &resp);
  }
  static int64_t Sql(const std::string& statement) {
    pqxx::connection conn(db_->url());
    pqxx::work tx(conn);
    pqxx::result r = tx.exec(statement);
    tx.commit();
    return r.empty() ? 0 : r[0][0].as<int64_t>();
  }
  // Rows that a refused call must not add or change.
  static std::map<std::string, int64_t> Counts() {
    return {{"jobs", Sql("SELECT count(*) FROM jobs")},
            {"cancelled", Sql("SELECT count(*) FROM jobs WHERE state = 'CANCELLED'")},
            {"queues", Sql("SELECT count(*) FROM queues")},
            {"queue weights", Sql("SELECT coalesce(sum(weight), 0) FROM queues")},
            {"tokens", Sql("SELECT count(*) FROM api_tokens")},
            {"revoked", Sql("SELECT count(*) FROM api_tokens WHERE revoked")},
            {"audit", Sql("SELECT count(*) FROM audit_log")}};
  }

  // Every RPC that needs a token, acting on team a's job and a queue "q-authz" that does not
  // exist (so a call that got through would store something: a queue, a job, a token).
  static std::vector<Rpc> AllRpcs() {
    using Ch = const std::shared_ptr<grpc::Channel>&;
    const std::string job = job_a_;
    return {
        {"SubmitJob",
         [](Ch c) {
           v1::SubmitJobRequest req;
           *req.mutable_spec() = CommandSpec("refused");
           v1::SubmitJobResponse resp;
           grpc::ClientContext ctx;
           return v1::JobService::NewStub(c)->SubmitJob(Deadline(&ctx), req, &resp);
         }},
        {"GetJob",
         [job](Ch c) {
           v1::GetJobRequest req;
           req.set_job_id(job);
           v1::Job resp;
           grpc::ClientContext ctx;
           return v1::JobService::NewStub(c)->GetJob(Deadline(&ctx), req, &resp);
         }},
        {"ListJobs",
         [](Ch c) {
           v1::ListJobsResponse resp;
           grpc::ClientContext ctx;
           return v1::JobService::NewStub(c)->ListJobs(Deadline(&ctx), v1::ListJobsRequest(),
                                                       &resp);
         }},
        {"CancelJob",
         [job](Ch c) {
           v1::CancelJobRequest req;
           req.set_job_id(job);
           v1::CancelJobResponse resp;
           grpc::ClientContext ctx;
           return v1::JobService::NewStub(c)->CancelJob(Deadline(&ctx), req, &resp);
         }},
        {"WatchJob",
         [job](Ch c) {
           v1::WatchJobRequest req;
           req.set_job_id(job);
           grpc::ClientContext ctx;
           ctx.set_deadline(std::chrono::system_clock::now() + 1s);
           auto reader = v1::JobService::NewStub(c)->WatchJob(&ctx, req);
           v1::JobEvent event;
           if (reader->Read(&event)) return grpc::Status::OK;  // it was served
           return reader->Finish();
         }},
        {"ReadJobLogs",
         [job](Ch c) {
           v1::ReadJobLogsRequest req;
           req.set_job_id(job);
           grpc::ClientContext ctx;
           auto reader = v1::JobService::NewStub(c)->ReadJobLogs(Deadline(&ctx), req);
           v1::LogChunk chunk;
           while (reader->Read(&chunk)) {
           }
           return reader->Finish();
         }},
        {"ListWorkers",
         [](Ch c) {
           v1::ListWorkersResponse resp;
           grpc::ClientContext ctx;
           return v1::ClusterService::NewStub(c)->ListWorkers(Deadline(&ctx),
                                                              v1::ListWorkersRequest(), &resp);
         }},
        {"CreateQueue",
         [](Ch c) {
           v1::CreateQueueRequest req;
           req.mutable_queue()->set_name("q-authz");
           v1::QueueWithStatus resp;
           grpc::ClientContext ctx;
           return v1::QueueService::NewStub(c)->CreateQueue(Deadline(&ctx), req, &resp);
         }},
        {"UpdateQueue",
         [](Ch c) {
           v1::UpdateQueueRequest req;
           req.mutable_queue()->set_name("default");
           req.mutable_queue()->set_weight(7);
           v1::QueueWithStatus resp;
           grpc::ClientContext ctx;
           return v1::QueueService::NewStub(c)->UpdateQueue(Deadline(&ctx), req, &resp);
         }},
        {"GetQueue",
         [](Ch c) {
           v1::GetQueueRequest req;
           req.set_name("default");
           v1::QueueWithStatus resp;
           grpc::ClientContext ctx;
           return v1::QueueService::NewStub(c)->GetQueue(Deadline(&ctx), req, &resp);
         }},
        {"ListQueues",
         [](Ch c) {
           v1::ListQueuesResponse resp;
           grpc::ClientContext ctx;
           return v1::QueueService::NewStub(c)->ListQueues(Deadline(&ctx), v1::ListQueuesRequest(),
                                                           &resp);
         }},
        {"DeleteQueue",
         [](Ch c) {
           v1::DeleteQueueRequest req;
           req.set_name("default");
           v1::DeleteQueueResponse resp;
           grpc::ClientContext ctx;
           return v1::QueueService::NewStub(c)->DeleteQueue(Deadline(&ctx), req, &resp);
         }},
        {"CreateVolume",
         [](Ch c) {
           v1::CreateVolumeRequest req;
           req.mutable_volume()->set_name("v-authz");
           req.mutable_volume()->set_host_path("/mnt/authz");
           v1::Volume resp;
           grpc::ClientContext ctx;
           return v1::VolumeService::NewStub(c)->CreateVolume(Deadline(&ctx), req, &resp);
         }},
        {"UpdateVolume",
         [](Ch c) {
           v1::UpdateVolumeRequest req;
           req.mutable_volume()->set_name("v-authz");
           req.mutable_volume()->set_host_path("/mnt/authz2");
           v1::Volume resp;
           grpc::ClientContext ctx;
           return v1::VolumeService::NewStub(c)->UpdateVolume(Deadline(&ctx), req, &resp);
         }},
        {"ListVolumes",
         [](Ch c) {
           v1::ListVolumesResponse resp;
           grpc::ClientContext ctx;
           return v1::VolumeService::NewStub(c)->ListVolumes(Deadline(&ctx),
                                                             v1::ListVolumesRequest(), &resp);
         }},
        {"DeleteVolume",
         [](Ch c) {
           v1::DeleteVolumeRequest req;
           req.set_name("v-authz");
           v1::DeleteVolumeResponse resp;
           grpc::ClientContext ctx;
           return v1::VolumeService::NewStub(c)->DeleteVolume(Deadline(&ctx), req, &resp);
         }},
        {"CreateToken",
         [](Ch c) {
           v1::CreateTokenRequest req;
           req.set_team("team-a");
           req.set_role("admin");
           v1::CreateTokenResponse resp;
           grpc::ClientContext ctx;
           return v1::AdminService::NewStub(c)->CreateToken(Deadline(&ctx), req, &resp);
         }},
        {"ListTokens",
         [](Ch c) {
           v1::ListTokensResponse resp;
           grpc::ClientContext ctx;
           return v1::AdminService::NewStub(c)->ListTokens(Deadline(&ctx), v1::ListTokensRequest(),
                                                           &resp);
         }},
        {"RevokeToken",
         [](Ch c) {
           v1::RevokeTokenRequest req;
           req.set_id(AdminToken().id);
           v1::RevokeTokenResponse resp;
           grpc::ClientContext ctx;
           return v1::AdminService::NewStub(c)->RevokeToken(Deadline(&ctx), req, &resp);
         }},
        {"ListAudit",
         [](Ch c) {
           v1::ListAuditResponse resp;
           grpc::ClientContext ctx;
           return v1::AdminService::NewStub(c)->ListAudit(Deadline(&ctx), v1::ListAuditRequest(),
                                                          &resp);
         }},
    };
  }

  static TestDatabase* db_;
  static RedisServer* redis_;
  static SchedulerProcess* scheduler_;
  static std::shared_ptr<grpc::Channel> admin_, member_a_, viewer_a_, member_b_, expired_, revoked_;
  static std::string job_a_;
};

TestDatabase* AuthzTest::db_ = nullptr;
RedisServer* AuthzTest::redis_ = nullptr;
SchedulerProcess* AuthzTest::scheduler_ = nullptr;
std::shared_ptr<grpc::Channel> AuthzTest::admin_, AuthzTest::member_a_, AuthzTest::viewer_a_,
    AuthzTest::member_b_, AuthzTest::expired_, AuthzTest::revoked_;
std::string AuthzTest::job_a_;

TEST_F(AuthzTest, EveryRpcWithoutValidCredentialsIsUnauthenticatedAndStoresNothing) {
  const std::string malformed = "rmt_nothex_short";
  const std::string unknown = absl::StrCat("rmt_0123456789abcdef_", std::string(64, 'a'));
  // The admin's id with another secret: found by id, refused by the hash comparison.
  const std::string wrong_secret = absl::StrCat("rmt_", AdminToken().id, "_", std::string(64, 'b'));
  const std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> callers = {
      {"no credentials", Channel("")},     {"malformed token", Channel(malformed)},
      {"unknown token", Channel(unknown)}, {"wrong secret", Channel(wrong_secret)},
      {"expired token", expired_},         {"revoked token", revoked_}};
  const auto before = Counts();
  for (const auto& [who, channel] : callers) {
    for (const Rpc& rpc : AllRpcs()) {
      grpc::Status s = rpc.call(channel);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << rpc.name << " with " << who << ": " << s.error_message();
    }
  }
  EXPECT_EQ(Counts(), before);
}

TEST_F(AuthzTest, TheRefusalSaysWhy) {
  grpc::Status s = AllRpcs()[0].call(expired_);
  EXPECT_THAT(s.error_message(), HasSubstr("expired"));
  s = AllRpcs()[0].call(revoked_);
  EXPECT_THAT(s.error_message(), HasSubstr("revoked"));
  s = AllRpcs()[0].call(Channel(""));
  EXPECT_THAT(s.error_message(), HasSubstr("authorization: Bearer"));
}

TEST_F(AuthzTest, WrongRoleIsPermissionDeniedNamingTheRightAndStoresNothing) {
  // viewer: read only, and not the ranks' logs; member: no queue or token administration.
  const std::map<std::string, std::string> viewer_refused = {
      {"SubmitJob", "jobs.write"},     {"CancelJob", "jobs.write"},
      {"ReadJobLogs", "jobs.logs"},
      {"CreateQueue", "queues.admin"}, {"UpdateQueue", "queues.admin"},
      {"DeleteQueue", "queues.admin"}, {"CreateToken", "tokens.admin"},
      {"ListTokens", "tokens.admin"},  {"RevokeToken", "tokens.admin"},
      {"ListAudit", "audit.read"},     {"CreateVolume", "volumes.admin"},
      {"UpdateVolume", "volumes.admin"}, {"DeleteVolume", "volumes.admin"}};
  const auto before = Counts();
  for (const Rpc& rpc : AllRpcs()) {
    auto it = viewer_refused.find(rpc.name);
    grpc::Status viewer = rpc.call(viewer_a_);
    if (it == viewer_refused.end()) {
      EXPECT_TRUE(viewer.ok()) << rpc.name << " as viewer: " << viewer.error_message();
      continue;
    }
    EXPECT_EQ(viewer.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << rpc.name << " as viewer: " << viewer.error_message();
    EXPECT_THAT(viewer.error_message(), HasSubstr(it->second)) << rpc.name;
    // members may
    if (rpc.name == "SubmitJob" || rpc.name == "CancelJob" || rpc.name == "ReadJobLogs") continue;
    grpc::Status member = rpc.call(member_a_);
    EXPECT_EQ(member.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << rpc.name << " as member: " << member.error_message();
    EXPECT_THAT(member.error_message(), HasSubstr(it->second)) << rpc.name;
  }
  EXPECT_EQ(Counts(), before);
}

// A team's registry credentials: its members set and delete them, any of its tokens lists them,
// only an admin touches another team's; no answer and no audit entry carries the secret.
TEST_F(AuthzTest, RegistryCredentialsBelongToTheirTeamAndTheSecretIsNeverReturned) {
  constexpr char kSecret[] = "authz-registry-s3cret";
  auto set = [&](const std::shared_ptr<grpc::Channel>& c, const std::string& team,
                 const std::string& registry, v1::RegistryCredential* resp) {
    v1::SetRegistryCredentialRequest req;
    req.set_team(team);
    req.set_registry(registry);
    req.set_username("robot");
    req.set_secret(kSecret);
    grpc::ClientContext ctx;
    return v1::RegistryService::NewStub(c)->SetRegistryCredential(Deadline(&ctx), req, resp);
  };
  auto list = [&](const std::shared_ptr<grpc::Channel>& c, const std::string& team,
                  v1::ListRegistryCredentialsResponse* resp) {
    v1::ListRegistryCredentialsRequest req;
    req.set_team(team);
    grpc::ClientContext ctx;
    return v1::RegistryService::NewStub(c)->ListRegistryCredentials(Deadline(&ctx), req, resp);
  };
  auto remove = [&](const std::shared_ptr<grpc::Channel>& c, const std::string& team,
                    const std::string& registry) {
    v1::DeleteRegistryCredentialRequest req;
    req.set_team(team);
    req.set_registry(registry);
    v1::DeleteRegistryCredentialResponse resp;
    grpc::ClientContext ctx;
    return v1::RegistryService::NewStub(c)->DeleteRegistryCredential(Deadline(&ctx), req, &resp);
  };
  v1::RegistryCredential set_resp;
  grpc::Status s = set(viewer_a_, "", "ghcr.io", &set_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("registries.write"));
  s = set(member_b_, "team-a", "ghcr.io", &set_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  s = set(member_a_, "", "https://ghcr.io", &set_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), ::testing::StartsWith("registry: "));
  s = set(member_a_, "", "GHCR.io", &set_resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(set_resp.team(), "team-a");
  EXPECT_EQ(set_resp.registry(), "ghcr.io");
  EXPECT_THAT(set_resp.DebugString(), Not(HasSubstr(kSecret)));
  ASSERT_TRUE(set(admin_, "team-b", "quay.io", &set_resp).ok());

  v1::ListRegistryCredentialsResponse listed;
  ASSERT_TRUE(list(viewer_a_, "", &listed).ok());
  ASSERT_EQ(listed.credentials_size(), 1);
  EXPECT_EQ(listed.credentials(0).username(), "robot");
  EXPECT_THAT(listed.DebugString(), Not(HasSubstr(kSecret)));
  EXPECT_EQ(list(member_b_, "team-a", &listed).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(list(member_a_, "*", &listed).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::ListRegistryCredentialsResponse all;
  ASSERT_TRUE(list(admin_, "*", &all).ok());
  EXPECT_EQ(all.credentials_size(), 2);
  EXPECT_THAT(all.DebugString(), Not(HasSubstr(kSecret)));

  EXPECT_EQ(remove(member_b_, "team-a", "ghcr.io").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(remove(viewer_a_, "", "ghcr.io").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(remove(member_a_, "", "ghcr.io").ok());
  EXPECT_EQ(remove(member_a_, "", "ghcr.io").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(remove(admin_, "team-b", "quay.io").ok());

  // The audit trail names the team and registry, never the secret.
  ASSERT_TRUE(WaitFor(
      [&] {
        v1::ListAuditResponse audit;
        grpc::ClientContext ctx;
        v1::AdminService::NewStub(admin_)->ListAudit(Deadline(&ctx), v1::ListAuditRequest(),
                                                     &audit);
        return absl::StrContains(audit.DebugString(), "team-a/ghcr.io");
      },
      std::chrono::seconds(10)));
  v1::ListAuditResponse audit;
  grpc::ClientContext ctx;
  ASSERT_TRUE(v1::AdminService::NewStub(admin_)
                  ->ListAudit(Deadline(&ctx), v1::ListAuditRequest(), &audit)
                  .ok());
  EXPECT_THAT(audit.DebugString(), HasSubstr("SetRegistryCredential"));
  EXPECT_THAT(audit.DebugString(), Not(HasSubstr(kSecret)));
  EXPECT_THAT(scheduler_->LogTail(), Not(HasSubstr(kSecret)));
}

TEST_F(AuthzTest, OtherTeamsJobsAreNotFoundAndUnlisted) {
  const auto before = Counts();
  for (const Rpc& rpc : AllRpcs()) {
    if (rpc.name != "GetJob" && rpc.name != "CancelJob" && rpc.name != "WatchJob" &&
        rpc.name != "ReadJobLogs") {
      continue;
    }
    grpc::Status s = rpc.call(member_b_);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << rpc.name << ": " << s.error_message();
    // The same answer as for a job that does not exist: nothing tells them apart.
    EXPECT_EQ(s.error_message(), absl::StrCat("no job ", job_a_)) << rpc.name;
  }
  EXPECT_EQ(Counts(), before);
  v1::ListJobsResponse listed;
  grpc::ClientContext ctx;
  ASSERT_TRUE(v1::JobService::NewStub(member_b_)
                  ->ListJobs(Deadline(&ctx), v1::ListJobsRequest(), &listed)
                  .ok());
  for (const v1::Job& job : listed.jobs()) EXPECT_EQ(job.team(), "team-b") << job.id();
  v1::ListJobsResponse all;
  grpc::ClientContext admin_ctx;
  ASSERT_TRUE(v1::JobService::NewStub(admin_)
                  ->ListJobs(Deadline(&admin_ctx), v1::ListJobsRequest(), &all)
                  .ok());
  bool seen = false;
  for (const v1::Job& job : all.jobs()) seen |= job.id() == job_a_;
  EXPECT_TRUE(seen) << "an admin lists every team's jobs";
}

TEST_F(AuthzTest, VolumesOfOtherTeamsAreNotFoundAndUnlisted) {
  v1::CreateVolumeRequest create;
  create.mutable_volume()->set_name("v-team-a");
  create.mutable_volume()->set_host_path("/mnt/team-a");
  v1::VolumeGrant* grant = create.mutable_volume()->add_grants();
  grant->set_team("team-a");
  grant->set_read_only(true);
  v1::Volume created;
  grpc::ClientContext create_ctx;
  grpc::Status s =
      v1::VolumeService::NewStub(admin_)->CreateVolume(Deadline(&create_ctx), create, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto get = [&](const std::shared_ptr<grpc::Channel>& channel, const std::string& name) {
    v1::GetVolumeRequest req;
    req.set_name(name);
    v1::Volume volume;
    grpc::ClientContext ctx;
    return v1::VolumeService::NewStub(channel)->GetVolume(Deadline(&ctx), req, &volume);
  };
  auto list = [&](const std::shared_ptr<grpc::Channel>& channel) {
    v1::ListVolumesResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(v1::VolumeService::NewStub(channel)
                    ->ListVolumes(Deadline(&ctx), v1::ListVolumesRequest(), &resp)
                    .ok());
    std::vector<std::string> names;
    for (const v1::Volume& v : resp.volumes()) names.push_back(v.name());
    return names;
  };
  EXPECT_TRUE(get(viewer_a_, "v-team-a").ok());
  EXPECT_TRUE(get(admin_, "v-team-a").ok());
  grpc::Status other = get(member_b_, "v-team-a");
  EXPECT_EQ(other.error_code(), grpc::StatusCode::NOT_FOUND) << other.error_message();
  // The same answer as for a volume that does not exist.
  EXPECT_EQ(other.error_message(), "no volume 'v-team-a'");
  grpc::Status unknown = get(member_b_, "v-nothing");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_message(), "no volume 'v-nothing'");
  EXPECT_THAT(list(member_a_), ::testing::Contains("v-team-a"));
  EXPECT_THAT(list(member_b_), Not(::testing::Contains("v-team-a")));

  // A member of team-b cannot mount it (PERMISSION_DENIED, as for an unknown volume); team-a
  // must mount it read-only.
  v1::SubmitJobRequest submit;
  v1::JobSpec* spec = submit.mutable_spec();
  spec->set_name("mounts");
  spec->set_replicas(1);
  spec->mutable_command()->add_argv("true");
  spec->set_image("train:v1");
  v1::Mount* mount = spec->add_mounts();
  mount->set_volume("v-team-a");
  mount->set_path("/data");
  mount->set_read_only(true);
  auto submit_as = [&](const std::shared_ptr<grpc::Channel>& channel) {
    v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    return v1::JobService::NewStub(channel)->SubmitJob(Deadline(&ctx), submit, &resp);
  };
  grpc::Status denied = submit_as(member_b_);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << denied.error_message();
  EXPECT_THAT(denied.error_message(), HasSubstr("mounts[0].volume"));
  mount->set_read_only(false);
  grpc::Status rw = submit_as(member_a_);
  EXPECT_EQ(rw.error_code(), grpc::StatusCode::PERMISSION_DENIED) << rw.error_message();
  EXPECT_THAT(rw.error_message(), HasSubstr("read-only"));
}

TEST_F(AuthzTest, MembersAndAdminsGetPastTheChecksOfReadJobLogs) {
  // No worker in this suite, and the job waits: the answer comes from the relay, not from a
  // refusal. Range checks come before any worker is asked.
  for (const auto& channel : {member_a_, admin_}) {
    grpc::Status s;
    for (const Rpc& rpc : AllRpcs()) {
      if (rpc.name == "ReadJobLogs") s = rpc.call(channel);
    }
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("no worker has a log of job " + job_a_));
  }
  v1::ReadJobLogsRequest req;
  req.set_job_id(job_a_);
  req.set_rank(1);
  grpc::ClientContext ctx;
  auto reader = v1::JobService::NewStub(member_a_)->ReadJobLogs(Deadline(&ctx), req);
  v1::LogChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), absl::StrCat("rank: job ", job_a_, " has 1 ranks (0..0), got 1"));
}

TEST_F(AuthzTest, EnvValuesGoOnlyToTheJobsTeam) {
  auto get = [&](const std::shared_ptr<grpc::Channel>& channel) {
    v1::GetJobRequest req;
    req.set_job_id(job_a_);
    v1::Job job;
    grpc::ClientContext ctx;
    grpc::Status s = v1::JobService::NewStub(channel)->GetJob(Deadline(&ctx), req, &job);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return job;
  };
  EXPECT_EQ(get(member_a_).spec().command().env().at("SECRET_KEY"), "s3cr3t");
  EXPECT_EQ(get(viewer_a_).spec().command().env().at("SECRET_KEY"), "s3cr3t");
  v1::Job as_admin = get(admin_);
  EXPECT_EQ(as_admin.team(), "team-a");
  EXPECT_EQ(as_admin.spec().command().env().at("SECRET_KEY"), "<redacted>");
}

TEST_F(AuthzTest, MembersCancelTheirTeamsJobsAndTheAuditTrailSaysWhoFromWhere) {
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = CommandSpec("to-cancel");
  v1::SubmitJobResponse submitted;
  grpc::ClientContext submit_ctx;
  ASSERT_TRUE(v1::JobService::NewStub(member_a_)
                  ->SubmitJob(Deadline(&submit_ctx), submit, &submitted)
                  .ok());
  EXPECT_EQ(submitted.job().team(), "team-a");
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM jobs WHERE id = '", submitted.job().id(),
                             "' AND team = 'team-a'")),
            1);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(submitted.job().id());
  v1::CancelJobResponse cancelled;
  grpc::ClientContext cancel_ctx;
  grpc::Status s =
      v1::JobService::NewStub(member_a_)->CancelJob(Deadline(&cancel_ctx), cancel, &cancelled);
  ASSERT_TRUE(s.ok()) << s.error_message();

  // Audit entries are stored by a background thread, within milliseconds.
  v1::ListAuditResponse audit;
  std::map<std::string, const v1::AuditEntry*> by_action;
  ASSERT_TRUE(WaitFor(
      [&] {
        audit.Clear();
        by_action.clear();
        grpc::ClientContext audit_ctx;
        if (!v1::AdminService::NewStub(admin_)
                 ->ListAudit(Deadline(&audit_ctx), v1::ListAuditRequest(), &audit)
                 .ok()) {
          return false;
        }
        for (const v1::AuditEntry& e : audit.entries()) {
          if (e.resource() == submitted.job().id()) by_action[e.action()] = &e;
        }
        return by_action.count("SubmitJob") && by_action.count("CancelJob");
      },
      10s, 50ms));
  for (const auto& [action, e] : by_action) {
    EXPECT_EQ(e->team(), "team-a") << action;
    EXPECT_EQ(e->role(), "member") << action;
    EXPECT_THAT(e->peer(), HasSubstr("127.0.0.1")) << action;
    EXPECT_GT(e->at_ms(), 0) << action;
  }
  EXPECT_GE(Sql("SELECT count(*) FROM audit_log WHERE action = 'CreateToken'"), 5);
  EXPECT_GE(Sql("SELECT count(*) FROM audit_log WHERE action = 'RevokeToken'"), 1);
}

TEST_F(AuthzTest, ARevokedTokenStopsAtOnceAndOnlyItsHashIsStored) {
  std::string id;
  const std::string token = CreateToken("team-c", "member", "30d", &id);
  auto channel = Channel(token);
  ASSERT_TRUE(AllRpcs()[2].call(channel).ok());  // ListJobs: now in the cache
  ASSERT_TRUE(Revoke(id).ok());
  grpc::Status s = AllRpcs()[2].call(channel);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  // No column holds the token or its secret.
  const std::string secret = token.substr(token.rfind('_') + 1);
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM api_tokens t WHERE position('", secret,
                             "' IN t::text) > 0")),
            0);
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM api_tokens WHERE id = '", id,
                             "' AND length(secret_sha256) = 32 AND revoked")),
            1);
}

// A client's burst on a token the scheduler has not read yet (new, or after a restart or a
// failover emptied the cache): one read of Postgres for the whole burst, every call served.
// Submits check the token on the callback API, lists on an RPC thread: both wait for the read.
TEST_F(AuthzTest, ABurstOnATokenNotReadYetCostsOneReadAndNoCallIsTurnedAway) {
  auto channel = Channel(CreateToken("team-burst", "member", ""));
  // Reads of api_tokens wait behind this lock, so the whole burst arrives while the token's
  // first read is still in flight.
  pqxx::connection conn(db_->url());
  pqxx::work lock(conn);
  lock.exec("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE");
  std::vector<grpc::Status> answers(32);
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < answers.size(); ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      if (i % 2 == 0) {
        v1::SubmitJobRequest req;
        *req.mutable_spec() = CommandSpec(absl::StrCat("burst-", i));
        v1::SubmitJobResponse resp;
        answers[i] = v1::JobService::NewStub(channel)->SubmitJob(&ctx, req, &resp);
      } else {
        v1::ListJobsResponse resp;
        answers[i] = v1::JobService::NewStub(channel)->ListJobs(&ctx, v1::ListJobsRequest(), &resp);
      }
      ++answered;
    });
  }
  // Reads of api_tokens waiting for the lock, seen from another connection.
  auto waiting_reads = [] {
    return Sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
               "query LIKE '%FROM api_tokens%'");
  };
  EXPECT_TRUE(WaitFor([&] { return waiting_reads() >= 1; }, 5s, 10ms));
  std::this_thread::sleep_for(500ms);  // for the rest of the burst to arrive
  const int64_t reads = waiting_reads();
  const int answered_early = answered;
  lock.abort();
  for (auto& t : threads) t.join();
  std::cerr << "burst of " << answers.size() << " calls on one token not read yet: " << reads
            << " read(s) of api_tokens waiting, " << answered_early << " answered before it\n";
  EXPECT_EQ(answered_early, 0) << "calls answered before their token could be read";
  // One for the burst; the audit thread may be refreshing another token meanwhile.
  EXPECT_LE(reads, 2);
  for (const grpc::Status& s : answers) EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE team = 'team-burst'"), 16);
}

TEST_F(AuthzTest, MembersSubmitOnlyToTheQueuesOfTheirTeam) {
  v1::CreateQueueRequest create;
  create.mutable_queue()->set_name("q-team-b");
  create.mutable_queue()->add_teams("team-b");
  v1::QueueWithStatus created;
  grpc::ClientContext create_ctx;
  grpc::Status s =
      v1::QueueService::NewStub(admin_)->CreateQueue(Deadline(&create_ctx), create, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(created.queue().teams(), ::testing::ElementsAre("team-b"));
  auto submit = [&](const std::shared_ptr<grpc::Channel>& channel) {
    v1::SubmitJobRequest req;
    *req.mutable_spec() = CommandSpec("bound");
    req.mutable_spec()->set_queue("q-team-b");
    v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    return v1::JobService::NewStub(channel)->SubmitJob(Deadline(&ctx), req, &resp);
  };
  const int64_t before = Sql("SELECT count(*) FROM jobs WHERE queue = 'q-team-b'");
  s = submit(member_a_);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("jobs.write on queue \"q-team-b\""));
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE queue = 'q-team-b'"), before);
  s = submit(member_b_);
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = submit(admin_);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE queue = 'q-team-b'"), before + 2);
  EXPECT_EQ(Sql("SELECT count(*) FROM queues WHERE name = 'q-team-b' AND teams = '{team-b}'"), 1);

  v1::CreateQueueRequest bad;
  bad.mutable_queue()->set_name("q-bad");
  bad.mutable_queue()->add_teams("Team B");
  grpc::ClientContext bad_ctx;
  s = v1::QueueService::NewStub(admin_)->CreateQueue(Deadline(&bad_ctx), bad, &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("teams[0]"));
}

TEST_F(AuthzTest, RingctlAdminCreatesListsAndRevokesTokensAndShowsTheAudit) {
  auto run = [&](const std::string& args, std::string* output) {
    const std::string command =
        absl::StrCat(RINGMASTER_BINARY_DIR "/cli/ringctl --scheduler ", scheduler_->addr(),
                     " --tls-ca ", TestCerts::Get().ca(), " ", args, " 2>/dev/null");
    output->clear();
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return -1;
    char buffer[4096];
    size_t n = 0;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
    const int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  ASSERT_EQ(run("admin token create --team team-d --role viewer --expires 1h", &out), 0) << out;
  const std::string token(absl::StripAsciiWhitespace(out));
  ASSERT_THAT(token, ::testing::MatchesRegex("rmt_[0-9a-f]{16}_[0-9a-f]{64}"));
  const std::string id = token.substr(4, 16);
  ASSERT_EQ(run("admin token list", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr(id));
  EXPECT_THAT(out, HasSubstr("team-d"));
  EXPECT_THAT(out, Not(HasSubstr(token.substr(21))));  // never the secret
  // The new token works for what a viewer may do, and not for the admin API.
  ASSERT_EQ(run(absl::StrCat("--token ", token, " list"), &out), 0) << out;
  EXPECT_NE(run(absl::StrCat("--token ", token, " admin token list"), &out), 0) << out;
  ASSERT_EQ(run(absl::StrCat("admin token revoke ", id), &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("revoked token " + id));
  EXPECT_NE(run(absl::StrCat("--token ", token, " list"), &out), 0) << out;
  ASSERT_TRUE(WaitFor(
      [&] {
        return run("admin audit --limit 20", &out) == 0 &&
               out.find("RevokeToken") != std::string::npos && out.find(id) != std::string::npos;
      },
      10s, 50ms))
      << out;
  EXPECT_EQ(run("admin token frobnicate", &out), 2);
}

TEST_F(AuthzTest, BadTokenRequestsNameTheField) {
  auto create = [&](const std::string& team, const std::string& role, const std::string& exp) {
    v1::CreateTokenRequest req;
    req.set_team(team);
    req.set_role(role);
    req.set_expires_in(exp);
    v1::CreateTokenResponse resp;
    grpc::ClientContext ctx;
    return v1::AdminService::NewStub(admin_)->CreateToken(Deadline(&ctx), req, &resp);
  };
  grpc::Status s = create("Team A", "member", "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("team:"));
  s = create("team-a", "owner", "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("role:"));
  s = create("team-a", "member", "30 days");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("expires_in:"));
  EXPECT_EQ(Revoke("0000000000000000").error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace ringmaster::test
