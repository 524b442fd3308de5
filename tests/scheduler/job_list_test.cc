#include "scheduler/core/job_list.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Op = LabelRequirement::Op;

// An INVALID_ARGUMENT status (of a StatusOr) whose message holds `text`.
MATCHER_P(InvalidWith, text, "") {
  *result_listener << "whose status is " << arg.status();
  return arg.status().code() == absl::StatusCode::kInvalidArgument &&
         absl::StrContains(arg.status().message(), text);
}

TEST(LabelSelectorTest, ParsesEveryRequirementKind) {
  auto parsed = ParseLabelSelector(" team = vision, env!=prod,tier==1, gpu ,!preemptible");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre(LabelRequirement{"team", Op::kEquals, "vision"},
                                   LabelRequirement{"env", Op::kNotEquals, "prod"},
                                   LabelRequirement{"tier", Op::kEquals, "1"},
                                   LabelRequirement{"gpu", Op::kExists, ""},
                                   LabelRequirement{"preemptible", Op::kNotExists, ""}));
}

TEST(LabelSelectorTest, EmptySelectorSelectsEverything) {
  auto parsed = ParseLabelSelector("  ");
  ASSERT_TRUE(parsed.ok());
  EXPECT_THAT(*parsed, IsEmpty());
  EXPECT_TRUE(MatchesLabels(*parsed, {}));
}

TEST(LabelSelectorTest, MalformedSelectorsNameTheFieldAndTheRequirement) {
  EXPECT_THAT(ParseLabelSelector("team=vision,,env=prod"), InvalidWith("label_selector: empty"));
  EXPECT_THAT(ParseLabelSelector("=vision"),
              InvalidWith("label_selector: \"=vision\": a key must be 1..63"));
  EXPECT_THAT(ParseLabelSelector("a=b=c"),
              InvalidWith("expected KEY=VALUE, KEY!=VALUE, KEY or !KEY"));
  EXPECT_THAT(ParseLabelSelector("te am=x"), InvalidWith("key \"te am\""));
  EXPECT_THAT(ParseLabelSelector("team in (a,b)"), InvalidWith(""));
}

TEST(LabelSelectorTest, NotEqualsAlsoMatchesJobsWithoutTheKey) {
  auto selector = ParseLabelSelector("env!=prod");
  ASSERT_TRUE(selector.ok());
  EXPECT_TRUE(MatchesLabels(*selector, {}));
  EXPECT_TRUE(MatchesLabels(*selector, {{"env", "dev"}}));
  EXPECT_FALSE(MatchesLabels(*selector, {{"env", "prod"}}));
}

TEST(LabelSelectorTest, EveryRequirementMustHold) {
  auto selector = ParseLabelSelector("team=vision,gpu,!spot");
  ASSERT_TRUE(selector.ok());
  EXPECT_TRUE(MatchesLabels(*selector, {{"team", "vision"}, {"gpu", ""}}));
  EXPECT_FALSE(MatchesLabels(*selector, {{"team", "vision"}}));
  EXPECT_FALSE(MatchesLabels(*selector, {{"team", "vision"}, {"gpu", "t4"}, {"spot", "1"}}));
  EXPECT_FALSE(MatchesLabels(*selector, {{"team", "speech"}, {"gpu", "t4"}}));
}

TEST(PageTokenTest, RoundTripsTheCursorAndLooksOpaque) {
  PageCursor cursor{12345, JobState::kRunning, "vision", "team=vision,!spot", "j-0123456789ab"};
  std::string token = EncodePageToken(cursor);
  EXPECT_THAT(token, ::testing::Not(HasSubstr("vision")));
  auto decoded = DecodePageToken(token);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, cursor);
  PageCursor plain{7, std::nullopt, "", "", ""};
  auto decoded_plain = DecodePageToken(EncodePageToken(plain));
  ASSERT_TRUE(decoded_plain.ok());
  EXPECT_EQ(*decoded_plain, plain);
}

TEST(PageTokenTest, AnythingElseIsInvalidArgumentNamingPageToken) {
  for (const char* token : {"garbage!", "cDE", "", "eHl6", "cDEKMAoKCg"}) {
    EXPECT_THAT(DecodePageToken(token), InvalidWith("page_token: ")) << token;
  }
}

TEST(PageSizeTest, DefaultsCapsAndRejectsNegative) {
  EXPECT_EQ(*EffectivePageSize(0, "page_size"), kDefaultPageSize);
  EXPECT_EQ(*EffectivePageSize(7, "page_size"), 7);
  EXPECT_EQ(*EffectivePageSize(100000, "page_size"), kMaxPageSize);
  EXPECT_THAT(EffectivePageSize(-1, "page_size"), InvalidWith("page_size: must not be"));
}

}  // namespace
}  // namespace ringmaster::scheduler
