// quote_for_message: the one way user strings reach messages (escaped, bounded).
#include <gtest/gtest.h>

#include <string>

#include "hymoe/error.h"

namespace hymoe {
namespace {

TEST(QuoteForMessage, KeepsPrintableTextAndEscapesTheRest) {
  EXPECT_EQ(quote_for_message("router.gate.weight"), "'router.gate.weight'");
  EXPECT_EQ(quote_for_message(""), "''");
  EXPECT_EQ(quote_for_message("a\x1b[2Jb"), "'a\\x1b[2Jb'");  // a terminal escape sequence, made inert
  EXPECT_EQ(quote_for_message(std::string("nul\0x", 5)), "'nul\\x00x'");
  EXPECT_EQ(quote_for_message("tab\there\nline\r"), "'tab\\there\\nline\\r'");
  EXPECT_EQ(quote_for_message("it's a \\"), "'it\\'s a \\\\'");
  EXPECT_EQ(quote_for_message("\x7f\xc3\xa9"), "'\\x7f\\xc3\\xa9'");  // DEL and non-ASCII bytes
}

TEST(QuoteForMessage, CutsLongTextAndSaysHowLongItWas) {
  const std::string text(1000, 'n');
  EXPECT_EQ(quote_for_message(text), "'" + std::string(kMaxQuotedBytes, 'n') + "'... (1000 bytes)");
  EXPECT_EQ(quote_for_message("abcdef", 3), "'abc'... (6 bytes)");
  EXPECT_EQ(quote_for_message("abc", 3), "'abc'");
}

}  // namespace
}  // namespace hymoe
