// Unicode tables and UTF-8 helpers of the tokenizer.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/unicode.h"

namespace u = zinc::tokenizer::unicode;

TEST(TokenizerUnicode, Categories) {
    EXPECT_TRUE(u::is_letter('a'));
    EXPECT_TRUE(u::flags('A') & u::kUpper);
    EXPECT_TRUE(u::flags('a') & u::kLower);
    EXPECT_TRUE(u::is_number('7'));
    EXPECT_TRUE(u::flags('7') & u::kDigit);
    EXPECT_TRUE(u::flags('!') & u::kPunct);
    EXPECT_TRUE(u::flags('+') & u::kSymbol);
    EXPECT_TRUE(u::is_letter(0x4E2D));           // 中
    EXPECT_TRUE(u::flags(0x4E2D) & u::kOtherLetter);
    EXPECT_TRUE(u::is_letter(0x10400));          // 𐐀 (outside the BMP)
    EXPECT_TRUE(u::flags(0x10400) & u::kUpper);
    EXPECT_TRUE(u::is_number(0x0661));           // Arabic-Indic digit one
    EXPECT_TRUE(u::is_number(0x00BD));           // ½ (No)
    EXPECT_TRUE(u::is_number(0x216B));           // Ⅻ (Nl)
    EXPECT_TRUE(u::is_mark(0x0301));             // combining acute
    EXPECT_TRUE(u::is_mark(0x094D));             // Devanagari virama
    EXPECT_TRUE(u::flags(0x1F600) & u::kSymbol); // 😀
    EXPECT_TRUE(u::flags(0x01C5) & u::kTitle);   // ǅ
    EXPECT_TRUE(u::flags(0x02B0) & u::kModifier);
    EXPECT_TRUE(u::flags(0x200D) & u::kOther);   // ZWJ (Cf)
    EXPECT_EQ(u::flags(0x110000), 0);
    EXPECT_TRUE(u::flags(0x10FFFF) & u::kOther);  // noncharacter, Cn
    EXPECT_FALSE(u::is_letter(' '));
}

TEST(TokenizerUnicode, WhiteSpace) {
    for (uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                       0x2029u, 0x202Fu, 0x205Fu, 0x3000u})
        EXPECT_TRUE(u::is_whitespace(c)) << std::hex << c;
    for (uint32_t c : {0x08u, 0x1Cu, 0x1Fu, 0x200Bu, 0x180Eu, 0xFEFFu, 0x61u}) EXPECT_FALSE(u::is_whitespace(c)) << std::hex << c;
}

TEST(TokenizerUnicode, TableIsSortedAndComplete) {
    ASSERT_GT(u::kRangeTableSize, 1000u);
    EXPECT_EQ(u::kRangeTable[0].first, 0u);
    for (size_t i = 1; i < u::kRangeTableSize; ++i) EXPECT_LT(u::kRangeTable[i - 1].first, u::kRangeTable[i].first);
    EXPECT_STRNE(u::kUnicodeVersion, "");
}

TEST(TokenizerUnicode, Utf8RoundTrip) {
    for (uint32_t c : {0x0u, 0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x1F999u, 0x10FFFFu}) {
        const std::string s = u::to_utf8(c);
        const u::Decoded d = u::decode_utf8(s, 0);
        EXPECT_TRUE(d.valid);
        EXPECT_EQ(d.cp, c);
        EXPECT_EQ(d.len, s.size());
    }
    EXPECT_EQ(u::to_utf8(0xD800), "\xEF\xBF\xBD");
}

TEST(TokenizerUnicode, Utf8Invalid) {
    auto bad = [](std::string s) {
        const u::Decoded d = u::decode_utf8(s, 0);
        return !d.valid && d.len == 1 && d.cp == u::kReplacement;
    };
    EXPECT_TRUE(bad("\x80"));              // stray continuation
    EXPECT_TRUE(bad("\xC0\x80"));          // overlong
    EXPECT_TRUE(bad("\xE0\x80\x80"));      // overlong
    EXPECT_TRUE(bad("\xED\xA0\x80"));      // surrogate
    EXPECT_TRUE(bad("\xF4\x90\x80\x80"));  // > U+10FFFF
    EXPECT_TRUE(bad("\xFF"));
    EXPECT_TRUE(bad("\xE2\x41"));
    EXPECT_TRUE(u::decode_utf8("\xE2\x82", 0).incomplete);
    EXPECT_FALSE(u::decode_utf8("\xE0\x80", 0).incomplete);  // can never become valid
    std::vector<size_t> offs;
    const auto cps = u::decode_utf8_all("a\xFF\xC3\xA9", &offs);
    ASSERT_EQ(cps.size(), 3u);
    EXPECT_EQ(cps[1], u::kReplacement);
    EXPECT_EQ(cps[2], 0xE9u);
    EXPECT_EQ(offs, (std::vector<size_t>{0, 1, 2, 4}));
}

TEST(TokenizerUnicode, CompletePrefix) {
    EXPECT_EQ(u::complete_prefix_length(""), 0u);
    EXPECT_EQ(u::complete_prefix_length("abc"), 3u);
    EXPECT_EQ(u::complete_prefix_length("ab\xF0\x9F"), 2u);
    EXPECT_EQ(u::complete_prefix_length("ab\xF0\x9F\xA6"), 2u);
    EXPECT_EQ(u::complete_prefix_length("ab\xF0\x9F\xA6\x99"), 6u);
    EXPECT_EQ(u::complete_prefix_length("\xE2\x82\xAC\xE2"), 3u);
    EXPECT_EQ(u::complete_prefix_length("a\xFF"), 2u);  // invalid: emitted (as U+FFFD by the caller)
    EXPECT_EQ(u::sanitize_utf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
}

TEST(TokenizerUnicode, Nfc) {
    EXPECT_EQ(u::nfc_utf8("Cafe\xCC\x81"), "Caf\xC3\xA9");                  // e + U+0301 -> é
    EXPECT_EQ(u::nfc_utf8("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");     // Hangul L+V -> 가
    EXPECT_EQ(u::nfc_utf8("\xE2\x84\xAB"), "\xC3\x85");                     // Angstrom sign -> Å (singleton)
    EXPECT_EQ(u::nfc_utf8("plain ascii"), "plain ascii");
    EXPECT_EQ(u::nfc_utf8("bad \xFF e\xCC\x81"), "bad \xFF e\xCC\x81");      // invalid UTF-8: unchanged
    EXPECT_EQ(u::combining_class(0x301), 230);
    EXPECT_EQ(u::combining_class(0x323), 220);
    EXPECT_EQ(u::combining_class('a'), 0);
}
