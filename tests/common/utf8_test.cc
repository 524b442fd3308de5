#include "common/utf8.h"

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(Utf8PrefixTest, KeepsValidTextWhole) {
  EXPECT_EQ(Utf8Prefix("plain ascii", 100), "plain ascii");
  EXPECT_EQ(Utf8Prefix("\xe8\xae\xad\xe7\xbb\x83 \xf0\x9f\x9a\x80", 100),
            "\xe8\xae\xad\xe7\xbb\x83 \xf0\x9f\x9a\x80");
  EXPECT_EQ(Utf8Prefix("", 0), "");
}

TEST(Utf8PrefixTest, NeverCutsACharacter) {
  const std::string text = "ab\xe8\xae\xad";  // 2 + 3 bytes
  EXPECT_EQ(Utf8Prefix(text, 4), "ab");
  EXPECT_EQ(Utf8Prefix(text, 5), text);
  EXPECT_EQ(Utf8Prefix(text, 1), "a");
}

TEST(Utf8PrefixTest, ReplacesEachBadByte) {
  EXPECT_EQ(Utf8Prefix("a\xffz", 10), "a?z");                                 // never valid
  EXPECT_EQ(Utf8Prefix("a\xe8\xae", 10), "a??");                              // cut at the end
  EXPECT_EQ(Utf8Prefix("\xae\xad ok", 10), "?? ok");                          // cut at the start
  EXPECT_EQ(Utf8Prefix("\xc0\xaf", 10), "??");                                // overlong '/'
  EXPECT_EQ(Utf8Prefix("\xed\xa0\x80", 10), "???");                           // a surrogate
  EXPECT_EQ(Utf8Prefix("\xf4\x90\x80\x80", 10), "????");                      // past U+10FFFF
  EXPECT_EQ(Utf8Prefix(std::string("a\0b", 3), 10), std::string("a\0b", 3));  // NUL is valid
}

}  // namespace
}  // namespace ringmaster
