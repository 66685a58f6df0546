// Hand-checked splits of the pre-tokenizer scanners (docs/formats.md §4.7).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pretokenizer.h"

using zinc::tokenizer::PreType;
using V = std::vector<std::string>;

namespace {
V split(PreType t, std::string_view s) {
    V out;
    for (auto p : zinc::tokenizer::pretokenize_utf8(t, s)) out.emplace_back(p);
    return out;
}
}  // namespace

TEST(TokenizerPre, Qwen2Basics) {
    const auto t = PreType::Qwen2;
    EXPECT_EQ(split(t, ""), V{});
    EXPECT_EQ(split(t, "Hello world"), (V{"Hello", " world"}));
    EXPECT_EQ(split(t, "Hello, world!"), (V{"Hello", ",", " world", "!"}));
    EXPECT_EQ(split(t, "I've"), (V{"I", "'ve"}));
    EXPECT_EQ(split(t, "'s'S 'LL"), (V{"'s", "'S", " '", "LL"}));
    EXPECT_EQ(split(t, "I'still"), (V{"I", "'s", "till"}));
    EXPECT_EQ(split(t, "12345"), (V{"1", "2", "3", "4", "5"}));
    EXPECT_EQ(split(t, "x1.5"), (V{"x", "1", ".", "5"}));
    EXPECT_EQ(split(t, "(hello)"), (V{"(hello", ")"}));
    EXPECT_EQ(split(t, "中文abc日本"), (V{"中文abc日本"}));
    EXPECT_EQ(split(t, "😀hello"), (V{"😀hello"}));
    EXPECT_EQ(split(t, " !!"), (V{" !!"}));
    EXPECT_EQ(split(t, "hello!!\n\nworld"), (V{"hello", "!!\n\n", "world"}));
}

TEST(TokenizerPre, Qwen2Whitespace) {
    const auto t = PreType::Qwen2;
    EXPECT_EQ(split(t, "a  b"), (V{"a", " ", " b"}));
    EXPECT_EQ(split(t, "a   b"), (V{"a", "  ", " b"}));
    EXPECT_EQ(split(t, "end  "), (V{"end", "  "}));
    EXPECT_EQ(split(t, "x \ty"), (V{"x", " ", "\ty"}));
    EXPECT_EQ(split(t, "a \n\nb"), (V{"a", " \n\n", "b"}));
    EXPECT_EQ(split(t, "a\n  b"), (V{"a", "\n", " ", " b"}));
    EXPECT_EQ(split(t, "a \n \n  b"), (V{"a", " \n \n", " ", " b"}));
    EXPECT_EQ(split(t, "a\r\n"), (V{"a", "\r\n"}));
    EXPECT_EQ(split(t, "  1"), (V{" ", " ", "1"}));  // the last space is left over: digits take no prefix
    EXPECT_EQ(split(t, " 1"), (V{" ", "1"}));
    EXPECT_EQ(split(t, "a\xC2\xA0" "b"), (V{"a", "\xC2\xA0" "b"}));  // NBSP is a valid word prefix
    EXPECT_EQ(split(t, "\n\n"), (V{"\n\n"}));
    EXPECT_EQ(split(t, "  \n  "), (V{"  \n", "  "}));  // up to the last newline, then the trailing run
}

TEST(TokenizerPre, Llama3Digits) {
    const auto t = PreType::Llama3;
    EXPECT_EQ(split(t, "12345"), (V{"123", "45"}));
    EXPECT_EQ(split(t, "1234567"), (V{"123", "456", "7"}));
    EXPECT_EQ(split(t, "Hello world"), (V{"Hello", " world"}));
}

TEST(TokenizerPre, Qwen35Marks) {
    // "कान्ति": क ा(Mc) न ् (Mn) त ि(Mc): qwen2 splits at the marks, qwen35 keeps the word.
    const std::string w = "\xE0\xA4\x95\xE0\xA4\xBE\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA4\xBF";
    EXPECT_EQ(split(PreType::Qwen35, w), (V{w}));
    EXPECT_GT(split(PreType::Qwen2, w).size(), 1u);
}

TEST(TokenizerPre, Gpt4o) {
    const auto t = PreType::Gpt4o;
    EXPECT_EQ(split(t, "HelloWorld"), (V{"Hello", "World"}));
    EXPECT_EQ(split(t, "NASA's"), (V{"NASA's"}));
    EXPECT_EQ(split(t, "don't stop"), (V{"don't", " stop"}));
    EXPECT_EQ(split(t, "12345"), (V{"123", "45"}));
    EXPECT_EQ(split(t, "a/b//\n"), (V{"a", "/b", "//\n"}));
    EXPECT_EQ(split(t, "中文"), (V{"中文"}));
    EXPECT_EQ(split(t, "a  b"), (V{"a", " ", " b"}));
}

TEST(TokenizerPre, Gpt2) {
    const auto t = PreType::Gpt2;
    EXPECT_EQ(split(t, "Hello  world's 123"), (V{"Hello", " ", " world", "'s", " 123"}));
    EXPECT_EQ(split(t, "'S"), (V{"'", "S"}));  // case-sensitive contractions
}

TEST(TokenizerPre, Lookup) {
    auto q = zinc::tokenizer::find_pre_tokenizer("qwen2");
    ASSERT_TRUE(q);
    EXPECT_EQ(q->type, PreType::Qwen2);
    EXPECT_FALSE(q->clean_spaces);
    auto l = zinc::tokenizer::find_pre_tokenizer("llama-bpe");
    ASSERT_TRUE(l);
    EXPECT_TRUE(l->ignore_merges);
    EXPECT_TRUE(l->add_bos);
    EXPECT_FALSE(zinc::tokenizer::find_pre_tokenizer("no-such-pre"));
}

TEST(TokenizerPre, InvalidUtf8KeptBytewise) {
    const std::string s = "ab\xFF\xFE" "cd";
    std::string joined;
    for (auto p : zinc::tokenizer::pretokenize_utf8(PreType::Qwen2, s)) joined += p;
    EXPECT_EQ(joined, s);
}
