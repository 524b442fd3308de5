#include "worker/core/gang.h"

#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Kind = RankStatus::Kind;

class GangTest : public ::testing::Test {
 protected:
  GangState gang_{"j-1", 0, {0, 1}};
};

TEST_F(GangTest, StartsAndExitsAreReportedOnceEach) {
  auto d = gang_.OnStarted(0, 100);
  ASSERT_EQ(d.reports.size(), 1u);
  EXPECT_EQ(d.reports[0].kind, Kind::kStarted);
  EXPECT_EQ(d.reports[0].rank, 0);
  EXPECT_FALSE(d.stop_local);
  EXPECT_THAT(gang_.OnStarted(0, 100).reports, IsEmpty());
  d = gang_.OnExited(0, 0, 0, "");
  ASSERT_EQ(d.reports.size(), 1u);
  EXPECT_EQ(d.reports[0].kind, Kind::kExited);
  EXPECT_FALSE(d.stop_local);
  EXPECT_THAT(gang_.OnExited(0, 1, 0, "").reports, IsEmpty());
  EXPECT_FALSE(gang_.AllEnded());
}

TEST_F(GangTest, AFailedRankStopsTheLocalGang) {
  gang_.OnStarted(0, 100);
  gang_.OnStarted(1, 101);
  auto d = gang_.OnExited(1, 3, 0, "");
  EXPECT_TRUE(d.stop_local);
  EXPECT_EQ(d.reports[0].exit_code, 3);
  EXPECT_EQ(d.why, "rank 1 exited with code 3");
  gang_.MarkStopping(d.why);
  // The rest die of our SIGTERM: still reported, but they decide nothing more.
  d = gang_.OnExited(0, 0, 15, "");
  EXPECT_EQ(d.reports[0].signal, 15);
  EXPECT_FALSE(d.stop_local);
  EXPECT_TRUE(gang_.AllEnded());
}

TEST_F(GangTest, AVanishedWrapperCountsAsKilledBySigkill) {
  gang_.OnStarted(0, 100);
  EXPECT_THAT(gang_.RunningPids(), ElementsAre(std::make_pair(0, 100)));
  auto d = gang_.OnVanished(0);
  ASSERT_EQ(d.reports.size(), 1u);
  EXPECT_EQ(d.reports[0].signal, 9);
  EXPECT_TRUE(d.stop_local);
  EXPECT_THAT(gang_.RunningPids(), IsEmpty());
  EXPECT_THAT(gang_.OnVanished(1).reports, IsEmpty());  // never started: not ours to judge
}

TEST_F(GangTest, MpirunEndingFailsTheRanksThatNeverStartedWithItsLastWords) {
  gang_.OnStarted(0, 100);
  auto d = gang_.OnLauncherExited(1, 0, "ORTE was unable to reach a daemon");
  ASSERT_EQ(d.reports.size(), 1u);
  EXPECT_EQ(d.reports[0].kind, Kind::kLaunchFailed);
  EXPECT_EQ(d.reports[0].rank, 1);
  EXPECT_THAT(d.reports[0].message, HasSubstr("mpirun exited with code 1 before rank 1 started"));
  EXPECT_THAT(d.reports[0].message, HasSubstr("unable to reach a daemon"));
  EXPECT_TRUE(d.stop_local);
}

TEST(GangStateTest, ADirectlyStartedRankNamesItsLauncherAsWhatRan) {
  GangState gang("j-1", 0, {0}, "ringmaster-rank");
  auto d = gang.OnLauncherExited(1, 0, "ringmaster-rank: worker refused MPI rank 0");
  ASSERT_EQ(d.reports.size(), 1u);
  EXPECT_THAT(d.reports[0].message, HasSubstr("ringmaster-rank exited with code 1 before rank 0"));
  EXPECT_EQ(d.why, "ringmaster-rank exited with code 1");
}

TEST_F(GangTest, MpirunSucceedingAfterEveryRankEndedDecidesNothing) {
  gang_.OnStarted(0, 100);
  gang_.OnStarted(1, 101);
  gang_.OnExited(0, 0, 0, "");
  gang_.OnExited(1, 0, 0, "");
  auto d = gang_.OnLauncherExited(0, 0, "");
  EXPECT_THAT(d.reports, IsEmpty());
  EXPECT_FALSE(d.stop_local);
}

TEST_F(GangTest, LaunchFailureFailsEveryWaitingRankOnce) {
  auto d = gang_.OnLaunchFailed("cannot run mpirun: No such file or directory");
  ASSERT_EQ(d.reports.size(), 2u);
  EXPECT_EQ(d.reports[1].kind, Kind::kLaunchFailed);
  EXPECT_TRUE(gang_.AllEnded());
  EXPECT_THAT(gang_.OnLaunchFailed("again").reports, IsEmpty());
}

TEST_F(GangTest, AFailedOrtedStopsTheLocalGangButReportsNothing) {
  auto d = gang_.OnExecExited(0, 9);
  EXPECT_THAT(d.reports, IsEmpty());
  EXPECT_TRUE(d.stop_local);
  EXPECT_FALSE(gang_.OnExecExited(0, 0).stop_local);
}

// mpirun kills its ranks a second after its own SIGTERM: a wrapper killed before it reported
// would leave the scheduler waiting on its rank forever.
TEST_F(GangTest, ATornDownGangReportsEveryRankThatNeverDid) {
  GangState gang("j-3", 0, {0, 1, 2});
  gang.OnStarted(0, 100);
  gang.OnStarted(1, 101);
  gang.OnExited(1, 0, 0, "");
  const auto orted = gang.OnExecExited(0, 15);
  EXPECT_TRUE(orted.stop_local);
  EXPECT_EQ(orted.why, "a command Exec'd for the attempt (orted) was killed by signal 15");
  gang.MarkStopping(orted.why);
  auto d = gang.OnTornDown(/*signal_sent=*/9);
  ASSERT_EQ(d.reports.size(), 2u);
  EXPECT_EQ(d.reports[0].rank, 0);
  EXPECT_EQ(d.reports[0].kind, Kind::kExited);
  EXPECT_EQ(d.reports[0].signal, 9);
  EXPECT_THAT(d.reports[0].message, HasSubstr("killed before it could report its exit"));
  EXPECT_THAT(d.reports[0].message, HasSubstr("(orted) was killed by signal 15"));
  EXPECT_EQ(d.reports[1].rank, 2);
  EXPECT_EQ(d.reports[1].kind, Kind::kLaunchFailed);
  EXPECT_THAT(d.reports[1].message, HasSubstr("before rank 2 started: a command Exec'd"));
  EXPECT_FALSE(d.stop_local);
  EXPECT_TRUE(gang.AllEnded());
  EXPECT_THAT(gang.OnTornDown(9).reports, IsEmpty());
}

// A teardown that got as far as SIGTERM: that is what a silent rank is reported killed by.
TEST_F(GangTest, ATornDownRankIsReportedKilledByTheStrongestSignalSent) {
  for (const auto& [sent, reported] : {std::pair{15, 15}, {9, 9}, {0, 9}}) {
    GangState gang("j-4", 0, {0});
    gang.OnStarted(0, 100);
    gang.MarkStopping("the job was cancelled");
    auto d = gang.OnTornDown(sent);
    ASSERT_EQ(d.reports.size(), 1u) << sent;
    EXPECT_EQ(d.reports[0].signal, reported) << sent;
    EXPECT_EQ(d.reports[0].exit_code, 0) << sent;
  }
}

TEST_F(GangTest, RegistrationListsEveryRankWithItsEnd) {
  GangState gang("j-2", 3, {4, 5, 6, 7});
  gang.OnStarted(4, 1);
  gang.OnStarted(5, 2);
  gang.OnExited(5, 0, 0, "");
  gang.OnStarted(6, 3);
  gang.OnExited(6, 0, 15, "");
  gang.OnLaunchFailed("x");  // rank 7
  EXPECT_THAT(gang.Held(),
              ElementsAre(HeldRank{"j-2", 3, 4, false, 0, false, {}},
                          HeldRank{"j-2", 3, 5, true, 0, false, {}},
                          HeldRank{"j-2", 3, 6, true, 128 + 15, false, {}},
                          HeldRank{"j-2", 3, 7, true, kLaunchFailedExitCode, false, {}}));
}

TEST_F(GangTest, UnknownRanksAreIgnored) {
  EXPECT_THAT(gang_.OnStarted(9, 1).reports, IsEmpty());
  EXPECT_THAT(gang_.OnExited(9, 1, 0, "").reports, IsEmpty());
  EXPECT_FALSE(gang_.HasRank(9));
}

TEST_F(GangTest, MpirunsOutputTailIsCutToWholeCharacters) {
  // A program's output in mpirun's tail: cut anywhere, it would break the worker's stream to
  // the scheduler (protobuf parses no invalid UTF-8).
  std::string tail = "\xae\xad starts mid-character, ";
  while (tail.size() < 3000) tail += "\xe8\xae\xad";
  auto d = gang_.OnLauncherExited(1, 0, tail);
  ASSERT_EQ(d.reports.size(), 2u);
  const std::string& m = d.reports[0].message;
  EXPECT_LE(m.size(), 1024u);
  EXPECT_GE(m.size(), 1021u);
  EXPECT_EQ(Utf8Prefix(m, m.size()), m);
  EXPECT_THAT(m, HasSubstr("?? starts mid-character"));
}

TEST_F(GangTest, LongMessagesAreCut) {
  gang_.OnStarted(0, 1);
  auto d = gang_.OnExited(0, 127, 0, std::string(5000, 'x'));
  EXPECT_EQ(d.reports[0].message.size(), 1024u);
}

}  // namespace
}  // namespace ringmaster::worker
