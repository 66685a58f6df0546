#include <gtest/gtest.h>

#include <string>

#include "gguf/printable.h"

using zinc::gguf::printable;

TEST(GgufPrintable, KeepsPrintableUtf8) {
    EXPECT_EQ(printable(""), "");
    EXPECT_EQ(printable("blk.0.attn_q.weight"), "blk.0.attn_q.weight");
    EXPECT_EQ(printable("Qwen3 8B \"instruct\""), "Qwen3 8B \"instruct\"");
    EXPECT_EQ(printable("tëst ▁the 日本語 😀 \u00a0"), "tëst ▁the 日本語 😀 \u00a0");
    EXPECT_EQ(printable("\U0010FFFF"), "\U0010FFFF");  // the last code point
}

TEST(GgufPrintable, EscapesControlCharacters) {
    EXPECT_EQ(printable("\x1b[2J\x1b]0;title\x07"), "\\x1b[2J\\x1b]0;title\\x07");
    EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(printable("l1\nl2\r\tx\x7f"), "l1\\nl2\\r\\tx\\x7f");
    EXPECT_EQ(printable("\u0085\u009b"), "\\u{0085}\\u{009b}");  // C1 controls (NEL, CSI) encoded as UTF-8
    EXPECT_EQ(printable("a\u202eb\u2066c\u2069\u200f\u061c"), "a\\u{202e}b\\u{2066}c\\u{2069}\\u{200f}\\u{061c}");
    EXPECT_EQ(printable("x\u2028y\u2029"), "x\\u{2028}y\\u{2029}");
}

TEST(GgufPrintable, EscapesBytesThatAreNotUtf8) {
    EXPECT_EQ(printable("\xff\xfe ok"), "\\xff\\xfe ok");
    EXPECT_EQ(printable("\x9b[31m"), "\\x9b[31m");                     // a lone continuation byte (C1 CSI in Latin-1)
    EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                     // overlong '/'
    EXPECT_EQ(printable("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");            // overlong, three bytes
    EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");            // a surrogate
    EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");   // past U+10FFFF
    EXPECT_EQ(printable("ab\xe6\x97"), "ab\\xe6\\x97");                 // truncated at the end
    EXPECT_EQ(printable("\xe6\x97x"), "\\xe6\\x97x");                   // interrupted
    EXPECT_EQ(printable("\xc3"), "\\xc3");
}

TEST(GgufPrintable, BackslashesAreDoubledSoEscapesAreUnambiguous) {
    EXPECT_EQ(printable("a\\x1b"), "a\\\\x1b");
    EXPECT_NE(printable("\\x1b"), printable("\x1b"));
}

TEST(GgufPrintable, CutsLongStringsBetweenCharacters) {
    EXPECT_EQ(printable("abcdef", 4), "abcd...");
    EXPECT_EQ(printable("abcd", 4), "abcd");
    EXPECT_EQ(printable("ab日本", 4), "ab...");       // 日 is 3 bytes: cut before it
    EXPECT_EQ(printable("ab日本", 5), "ab日...");
    EXPECT_EQ(printable("\x1b\x1b\x1b", 2), "\\x1b\\x1b...");
    EXPECT_EQ(printable("ab\x80\x80\x80\x80", 4), "ab\\x80\\x80...");  // invalid bytes are cut anywhere
}
