#include "worker/core/layout.h"

#include <gtest/gtest.h>

namespace ringmaster::worker {
namespace {

WorkerLayout Layout() {
  return {.log_dir = "/logs",
          .session_root = "/mpi",
          .session_suffix = SessionSuffix("w1"),
          .checkpoint_root = "/ckpt"};
}

TEST(LayoutTest, AnAttemptsFilesLieUnderItsJobAndAttempt) {
  const WorkerLayout layout = Layout();
  EXPECT_EQ(layout.AttemptDir("j", 3), "/logs/j/3");
  EXPECT_EQ(layout.RankLogPath("j", 3, 1), "/logs/j/3/rank-1.log");
  EXPECT_EQ(layout.CheckResultPath("j", 3, false), "/logs/j/3/check.result");
  // A team's user writes its check result into a directory of its own.
  EXPECT_EQ(layout.CheckResultPath("j", 3, true), "/logs/j/3/check/check.result");
}

TEST(LayoutTest, TheSessionSuffixIsStableAndNamesTheWorker) {
  EXPECT_EQ(SessionSuffix("w1"), SessionSuffix("w1"));
  EXPECT_NE(SessionSuffix("w1"), SessionSuffix("w2"));
  EXPECT_EQ(SessionSuffix("w1").size(), 9u);  // '.' and eight hex digits
  EXPECT_EQ(SessionSuffix(""), ".811c9dc5");  // FNV-1a's offset basis: the hash is FNV-1a
}

TEST(LayoutTest, OnlyThisWorkersSessionBasesAreItsOwn) {
  const WorkerLayout layout = Layout();
  const std::string base = layout.SessionBase("j", 2);
  EXPECT_EQ(base, "/mpi/j.2." + layout.session_suffix);
  EXPECT_TRUE(layout.IsOwnSessionBase(base.substr(5)));
  EXPECT_FALSE(layout.IsOwnSessionBase("j.2." + SessionSuffix("w2")));
  EXPECT_FALSE(layout.IsOwnSessionBase(layout.session_suffix));  // the suffix alone is not one
}

TEST(LayoutTest, ACheckpointDirectoryNeedsACheckpointRoot) {
  WorkerLayout layout = Layout();
  EXPECT_EQ(layout.CheckpointDir("j"), "/ckpt/j");
  layout.checkpoint_root.clear();
  EXPECT_EQ(layout.CheckpointDir("j"), "");
}

TEST(LayoutTest, TheDefaultSessionRootIsPerUser) {
  EXPECT_EQ(DefaultSessionRoot(1000), "/tmp/ringmaster-mpi-1000");
}

}  // namespace
}  // namespace ringmaster::worker
