// SanitizedUtf8: well-formed text passes unchanged, every malformed byte becomes U+FFFD.
#include "sla/utf8_text.h"

#include <gtest/gtest.h>

namespace ff::sla {
namespace {

TEST(SanitizedUtf8, KeepsWellFormedTextAndReplacesMalformedBytes) {
  EXPECT_EQ(SanitizedUtf8("job-1 \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), "job-1 \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(SanitizedUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");            // overlong '/'
  EXPECT_EQ(SanitizedUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(SanitizedUtf8("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // > U+10FFFF
  EXPECT_EQ(SanitizedUtf8("a\xE2\x82"), "a\xEF\xBF\xBD\xEF\xBF\xBD");  // truncated at the end
  EXPECT_EQ(SanitizedUtf8("a\tb\x7f"), "a?b?");
}

}  // namespace
}  // namespace ff::sla
