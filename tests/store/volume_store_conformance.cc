// The volume part of the JobStore conformance suite (job_store_conformance.h): it runs on every
// implementation the suite is instantiated with.
#include "gmock/gmock.h"
#include "job_store_conformance.h"
#include "support/status_test_util.h"

namespace ringmaster::scheduler {
namespace store_test {
namespace {

using ::ringmaster::test::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'000'000;

Volume MakeVolume(const std::string& name) {
  Volume volume;
  volume.name = name;
  volume.host_path = "/mnt/datasets/" + name;
  volume.grants = {{"audio", false}, {"vision", true}};
  volume.description = "shared \"datasets\", a, b";
  volume.created_at_ms = kT0;
  volume.updated_at_ms = kT0;
  return volume;
}

std::vector<std::string> Names(const std::vector<Volume>& volumes) {
  std::vector<std::string> names;
  for (const Volume& v : volumes) names.push_back(v.name);
  return names;
}

TEST_P(JobStoreConformanceTest, ThereAreNoVolumesAtFirst) {
  RM_ASSERT_OK_AND_ASSIGN(auto volumes, store().ListVolumes());
  EXPECT_TRUE(volumes.empty());
  EXPECT_THAT(store().GetVolume("imagenet"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(JobStoreConformanceTest, CreateVolumeStoresEveryFieldAndListIsByName) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK_AND_ASSIGN(Volume created, store().CreateVolume(MakeVolume("imagenet"), epoch));
  EXPECT_EQ(created, MakeVolume("imagenet"));
  Volume bare;
  bare.name = "scratch";
  bare.host_path = "/scratch";
  bare.created_at_ms = bare.updated_at_ms = kT0 + 1;
  RM_ASSERT_OK(store().CreateVolume(bare, epoch));
  RM_ASSERT_OK_AND_ASSIGN(Volume got, store().GetVolume("imagenet"));
  EXPECT_EQ(got, MakeVolume("imagenet"));
  RM_ASSERT_OK_AND_ASSIGN(Volume got_bare, store().GetVolume("scratch"));
  EXPECT_EQ(got_bare, bare);
  RM_ASSERT_OK_AND_ASSIGN(auto volumes, store().ListVolumes());
  EXPECT_THAT(Names(volumes), ElementsAre("imagenet", "scratch"));
  EXPECT_EQ(volumes[0], MakeVolume("imagenet"));
}

TEST_P(JobStoreConformanceTest, CreatingATakenVolumeNameIsAlreadyExistsAndChangesNothing) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateVolume(MakeVolume("imagenet"), epoch));
  Volume again = MakeVolume("imagenet");
  again.host_path = "/elsewhere";
  EXPECT_THAT(store().CreateVolume(again, epoch), StatusIs(absl::StatusCode::kAlreadyExists));
  RM_ASSERT_OK_AND_ASSIGN(Volume got, store().GetVolume("imagenet"));
  EXPECT_EQ(got.host_path, "/mnt/datasets/imagenet");
}

TEST_P(JobStoreConformanceTest, UpdateVolumeReplacesItsFieldsButKeepsItsCreationTime) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateVolume(MakeVolume("imagenet"), epoch));
  Volume next;
  next.name = "imagenet";
  next.host_path = "/nfs/imagenet";
  next.grants = {{"speech", true}};
  next.description = "";
  next.created_at_ms = kT0 + 99;  // ignored
  next.updated_at_ms = kT0 + 100;
  RM_ASSERT_OK_AND_ASSIGN(Volume stored, store().UpdateVolume(next, epoch));
  EXPECT_EQ(stored.created_at_ms, kT0);
  RM_ASSERT_OK_AND_ASSIGN(Volume got, store().GetVolume("imagenet"));
  EXPECT_EQ(got, stored);
  EXPECT_EQ(got.host_path, "/nfs/imagenet");
  EXPECT_EQ(got.grants, (std::vector<VolumeGrant>{{"speech", true}}));
  EXPECT_EQ(got.updated_at_ms, kT0 + 100);
  Volume missing = next;
  missing.name = "nothing";
  EXPECT_THAT(store().UpdateVolume(missing, epoch), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(JobStoreConformanceTest, AVolumeMountedByALiveJobCannotBeDeleted) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateVolume(MakeVolume("imagenet"), epoch));
  RM_ASSERT_OK(store().CreateVolume(MakeVolume("scratch"), epoch));
  Job job = MakeJob("j-1");
  job.spec.image = "train:v1";
  job.spec.mounts = {{"scratch", "/scratch", false}, {"imagenet", "/data", true}};
  RM_ASSERT_OK(store().CreateJob(job, FirstEvent(job)));
  absl::Status refused = store().DeleteVolume("imagenet", epoch);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("job j-1"));
  RM_ASSERT_OK_AND_ASSIGN(auto volumes, store().ListVolumes());
  EXPECT_THAT(Names(volumes), ElementsAre("imagenet", "scratch"));

  // Once the job has ended, it goes.
  Job ended = job;
  ended.state = JobState::kCancelled;
  ended.last_event_seq = 2;
  RM_ASSERT_OK(store().UpdateJob(
      ended, JobEvent{"j-1", 2, JobState::kCancelled, 0, "cancelled", 0, kT0 + 5}));
  RM_ASSERT_OK(store().DeleteVolume("imagenet", epoch));
  EXPECT_THAT(store().GetVolume("imagenet"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store().DeleteVolume("imagenet", epoch), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(JobStoreConformanceTest, VolumeWritesOfAStaleLeaderAreFenced) {
  RM_ASSERT_OK_AND_ASSIGN(int64_t old_epoch, store().TakeLeadership());
  RM_ASSERT_OK(store().CreateVolume(MakeVolume("imagenet"), old_epoch));
  RM_ASSERT_OK_AND_ASSIGN(int64_t epoch, store().TakeLeadership());
  EXPECT_TRUE(IsFenced(store().CreateVolume(MakeVolume("scratch"), old_epoch).status()));
  EXPECT_TRUE(IsFenced(store().UpdateVolume(MakeVolume("imagenet"), old_epoch).status()));
  EXPECT_TRUE(IsFenced(store().DeleteVolume("imagenet", old_epoch)));
  RM_ASSERT_OK_AND_ASSIGN(auto volumes, store().ListVolumes());
  EXPECT_THAT(Names(volumes), ElementsAre("imagenet"));
  RM_ASSERT_OK(store().DeleteVolume("imagenet", epoch));
}

}  // namespace
}  // namespace store_test
}  // namespace ringmaster::scheduler
