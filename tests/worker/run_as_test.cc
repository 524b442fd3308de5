#include "worker/core/run_as.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

using ::testing::HasSubstr;

TEST(RunAsTest, NoFlagsMeanNoMapping) {
  absl::StatusOr<RunAsConfig> config = ParseRunAs("", "");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->empty());
  ASSERT_TRUE(ParseRunAs("  ", " ").ok());
  EXPECT_TRUE(ParseRunAs("  ", " ")->empty());
}

TEST(RunAsTest, ParsesTeamsWithNamesNumbersAndGroups) {
  absl::StatusOr<RunAsConfig> config =
      ParseRunAs("vision=alice, nlp=61002:61002 ,speech=svc-speech:ml_users", "");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->empty());
  ASSERT_EQ(config->teams.size(), 3u);
  EXPECT_EQ(config->teams.at("vision"), (RunAsUser{"alice", ""}));
  EXPECT_EQ(config->teams.at("nlp"), (RunAsUser{"61002", "61002"}));
  EXPECT_EQ(config->teams.at("speech"), (RunAsUser{"svc-speech", "ml_users"}));
  EXPECT_FALSE(config->fallback.has_value());
}

TEST(RunAsTest, DefaultAloneIsAMapping) {
  absl::StatusOr<RunAsConfig> config = ParseRunAs("", "nobody:nogroup");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->empty());
  EXPECT_EQ(config->fallback, (RunAsUser{"nobody", "nogroup"}));
}

TEST(RunAsTest, MalformedItemsNameTheFlagAndWhatIsAllowed) {
  struct Case {
    std::string mapping, fallback, message;
  };
  for (const Case& c : std::vector<Case>{
           {"vision", "", "--run-as: 'vision' has no '='; expected TEAM=USER[:GROUP]"},
           {"vision=", "", "--run-as: '' is not a user name or uid"},
           {"=alice", "", "--run-as: '' in '=alice' is not a team name"},
           {"a b=alice", "", "'a b' in 'a b=alice' is not a team name"},
           {"vision=alice:", "", "--run-as: '' in 'alice:' is not a group name or gid"},
           {"vision=a:b:c", "", "--run-as: 'a:b:c' has more than one ':'"},
           {"vision=ali;ce", "", "--run-as: 'ali;ce' is not a user name or uid"},
           {"vision=-x", "", "'-x' is not a user name or uid"},
           {"vision=alice,,nlp=bob", "", "--run-as: empty item"},
           {"vision=alice,vision=bob", "", "--run-as: team 'vision' is listed twice"},
           {"", "x y", "--run-as-default: 'x y' is not a user name or uid"},
           {"", "bob:", "--run-as-default: '' in 'bob:' is not a group name or gid"},
       }) {
    absl::StatusOr<RunAsConfig> config = ParseRunAs(c.mapping, c.fallback);
    ASSERT_FALSE(config.ok()) << c.mapping << " / " << c.fallback;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(c.message))
        << c.mapping << " / " << c.fallback;
  }
}

TEST(RunAsTest, UnlistedTeamGetsTheDefaultOrAClearRefusal) {
  RunAsConfig config = *ParseRunAs("vision=alice", "");
  EXPECT_EQ(*UserForTeam(config, "vision", "w1"), (RunAsUser{"alice", ""}));
  absl::StatusOr<RunAsUser> none = UserForTeam(config, "nlp", "w1");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(),
            "team 'nlp' has no Unix user on worker w1: map it with --run-as nlp=USER or set "
            "--run-as-default");
  EXPECT_THAT(std::string(UserForTeam(config, "", "w1").status().message()),
              HasSubstr("team '(none)'"));
  config = *ParseRunAs("vision=alice", "nobody");
  EXPECT_EQ(*UserForTeam(config, "nlp", "w1"), (RunAsUser{"nobody", ""}));
  EXPECT_EQ(*UserForTeam(config, "vision", "w1"), (RunAsUser{"alice", ""}));
}

}  // namespace
}  // namespace ringmaster::worker
