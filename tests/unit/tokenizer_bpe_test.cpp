// Byte-level BPE with the real Qwen3 vocabulary: hand-checked encodings, special tokens, detokenization,
// round trips and the streaming decoder.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

using zinc::tokenizer::StreamDecoder;
using zinc::tokenizer::TokenType;
using zinc::tokenizer::test::qwen3;
using Ids = std::vector<int32_t>;

namespace {
constexpr int32_t kEndOfText = 151643, kImStart = 151644, kImEnd = 151645, kThink = 151667, kThinkEnd = 151668;
}

TEST(TokenizerBpe, ByteMap) {
    using namespace zinc::tokenizer;
    EXPECT_EQ(byte_to_codepoint(' '), 0x120u);
    EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);
    EXPECT_EQ(byte_to_codepoint('\t'), 0x109u);
    EXPECT_EQ(byte_to_codepoint(0x7F), 0x121u);
    EXPECT_EQ(byte_to_codepoint(0xA0), 0x142u);
    EXPECT_EQ(byte_to_codepoint(0xAD), 0x143u);
    EXPECT_EQ(byte_to_codepoint('A'), static_cast<uint32_t>('A'));
    for (int b = 0; b < 256; ++b) EXPECT_EQ(byte_from_codepoint(byte_to_codepoint(static_cast<uint8_t>(b))), b);
    EXPECT_EQ(bytes_to_mapped(" hi\n"), "\xC4\xA0hi\xC4\x8A");  // "Ġhi\u010a"
    EXPECT_EQ(mapped_to_bytes("\xC4\xA0hi\xC4\x8A"), " hi\n");
}

TEST(TokenizerBpe, Metadata) {
    const auto& t = qwen3();
    EXPECT_EQ(t.n_vocab(), 151936);
    EXPECT_EQ(t.model(), "gpt2");
    EXPECT_EQ(t.pre(), "qwen2");
    EXPECT_EQ(t.bos(), kEndOfText);
    EXPECT_EQ(t.eos(), kImEnd);
    EXPECT_EQ(t.pad(), kEndOfText);
    EXPECT_FALSE(t.add_bos());
    EXPECT_FALSE(t.add_eos());
    EXPECT_FALSE(t.clean_spaces());
    EXPECT_TRUE(t.is_eog(kImEnd));
    EXPECT_TRUE(t.is_eog(kEndOfText));
    EXPECT_FALSE(t.is_eog(kImStart));
    EXPECT_FALSE(t.is_eog(9707));
    // "</s>" is an ordinary BPE token in Qwen's vocabulary (llama.cpp would make it an invisible EOG token).
    ASSERT_EQ(t.find_token("</s>"), 128247);
    EXPECT_FALSE(t.is_eog(128247));
    EXPECT_EQ(t.token_type(128247), TokenType::Normal);
    EXPECT_EQ(t.token_text(128247, false), "</s>");
    EXPECT_EQ(t.eog_ids(), (Ids{kEndOfText, kImEnd}));
    EXPECT_EQ(t.token_type(kImStart), TokenType::Control);
    EXPECT_EQ(t.token_type(kThink), TokenType::UserDefined);
    EXPECT_EQ(t.token_type(151700), TokenType::Unused);
    EXPECT_EQ(t.token_str(151700), "[PAD151700]");
    EXPECT_FALSE(t.chat_template().empty());
}

TEST(TokenizerBpe, HandChecked) {
    const auto& t = qwen3();
    // "Hello" 9707 and " world" 1879 are the well-known Qwen ids.
    EXPECT_EQ(t.encode("Hello world", false, false), (Ids{9707, 1879}));
    EXPECT_EQ(t.encode("", true, true), Ids{});
    // Single digits, each its own token ("0".."9" are 15..24).
    EXPECT_EQ(t.encode("2024", false, false), (Ids{17, 15, 17, 19}));
    // Each piece of the pre-tokenizer maps to exactly one vocabulary entry here.
    auto single = [&](const char* stored) { return t.find_token(stored).value(); };
    EXPECT_EQ(t.encode(" ", false, false), (Ids{single("\xC4\xA0")}));
    EXPECT_EQ(t.encode("\n", false, false), (Ids{single("\xC4\x8A")}));
    EXPECT_EQ(t.encode("\n\n", false, false), (Ids{single("\xC4\x8A\xC4\x8A")}));
    EXPECT_EQ(t.encode("I've", false, false), (Ids{single("I"), single("'ve")}));
    // Merges never cross a pre-token boundary: "a  b" is "a", " ", " b".
    EXPECT_EQ(t.encode("a  b", false, false), (Ids{single("a"), single("\xC4\xA0"), single("\xC4\xA0" "b")}));
}

TEST(TokenizerBpe, SpecialTokens) {
    const auto& t = qwen3();
    const std::string chat = "<|im_start|>user\nHi<|im_end|>";
    const Ids with = t.encode(chat, true, true);
    ASSERT_GE(with.size(), 4u);
    EXPECT_EQ(with.front(), kImStart);
    EXPECT_EQ(with.back(), kImEnd);
    EXPECT_EQ(t.encode("<|im_start|>", false, true), Ids{kImStart});
    // Without parse_special the control text is ordinary text.
    const Ids without = t.encode(chat, false, false);
    for (int32_t id : without) {
        EXPECT_NE(id, kImStart);
        EXPECT_NE(id, kImEnd);
    }
    EXPECT_EQ(t.decode(without), chat);
    // USER_DEFINED tokens are always matched.
    EXPECT_EQ(t.encode("<think>", false, false), Ids{kThink});
    EXPECT_EQ(t.encode("<think>x</think>", false, false), (Ids{kThink, t.find_token("x").value(), kThinkEnd}));
    // Adjacent and repeated specials, and a partial one.
    EXPECT_EQ(t.encode("<|im_start|><|im_start|>", false, true), (Ids{kImStart, kImStart}));
    const Ids partial = t.encode("<|im_start", false, true);
    for (int32_t id : partial) EXPECT_NE(id, kImStart);
    // No BOS for Qwen even with add_special.
    EXPECT_EQ(t.encode("Hello world", true, true), (Ids{9707, 1879}));
}

TEST(TokenizerBpe, Detokenize) {
    const auto& t = qwen3();
    EXPECT_EQ(t.token_text(1879), " world");
    EXPECT_EQ(t.token_text(kImEnd), "<|im_end|>");
    EXPECT_EQ(t.token_text(kImEnd, false), "");
    EXPECT_EQ(t.token_text(kThink, false), "<think>");  // USER_DEFINED: always rendered
    EXPECT_EQ(t.token_text(151700), "");                 // UNUSED
    EXPECT_EQ(t.token_text(-1), "");
    EXPECT_EQ(t.token_text(1 << 30), "");
    const Ids ids{kImStart, 9707, 1879, kImEnd};
    EXPECT_EQ(t.decode(ids), "<|im_start|>Hello world<|im_end|>");
    EXPECT_EQ(t.decode(ids, false), "Hello world");
}

TEST(TokenizerBpe, RoundTrip) {
    const auto& t = qwen3();
    const std::vector<std::string> texts = {
        "Hello, world! How are you today?",
        "  leading\tand trailing \n\n  ",
        "日本語のテキストです。中文也可以！한국어 텍스트",
        "🚀 (normal) 😶\u200d🌫️ 🦙🦙 ✅",
        "कान्तिपुर नेपाली",
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
        "def f(x):\n\treturn x ** 2  # 1234567\r\n",
        std::string("nul\0byte and \x7f del", 18),
        "invalid \xFF\xFE utf8 \xC3 and overlong \xC0\xAF end",  // bytes survive as they are
    };
    for (const auto& s : texts) {
        EXPECT_EQ(t.decode(t.encode(s, false, true)), s) << s;
        EXPECT_EQ(t.decode(t.encode(s, false, false)), s) << s;
    }
}

TEST(TokenizerBpe, StreamDecoderSplitsNoCharacter) {
    const auto& t = qwen3();
    const std::string text = "日本🦙 naïve 😶\u200d🌫️ 中文<|im_end|>";
    const Ids ids = t.encode(text, false, true);
    StreamDecoder d(t);
    std::string out;
    for (int32_t id : ids) {
        const std::string chunk = d.push(id);
        EXPECT_EQ(zinc::tokenizer::unicode::sanitize_utf8(chunk), chunk) << "chunk is not valid UTF-8";
        out += chunk;
    }
    out += d.flush();
    EXPECT_EQ(out, text);
    // At least one emoji is split over several byte-level tokens, so something was held back at some point.
    bool held = false;
    StreamDecoder d2(t);
    for (int32_t id : ids) {
        d2.push(id);
        held = held || d2.pending_bytes() > 0;
    }
    EXPECT_TRUE(held);
}

TEST(TokenizerBpe, StreamDecoderBytes) {
    const auto& t = qwen3();
    StreamDecoder d(t);
    const std::string llama = "\xF0\x9F\xA6\x99";
    EXPECT_EQ(d.push_bytes(llama.substr(0, 1)), "");
    EXPECT_EQ(d.push_bytes(llama.substr(1, 1)), "");
    EXPECT_EQ(d.push_bytes(llama.substr(2, 1)), "");
    EXPECT_EQ(d.push_bytes(llama.substr(3, 1)), llama);
    EXPECT_EQ(d.push_bytes("a\xE2\x82"), "a");
    EXPECT_EQ(d.push_bytes("\xAC"), "\xE2\x82\xAC");
    EXPECT_EQ(d.push_bytes("\xFF" "b"), "\xEF\xBF\xBD" "b");  // invalid byte -> U+FFFD, not held
    EXPECT_EQ(d.push_bytes("\xF0\x9F"), "");
    EXPECT_EQ(d.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(d.pending_bytes(), 0u);
    // Control tokens are not rendered when render_special is off.
    StreamDecoder quiet(t, false);
    EXPECT_EQ(quiet.push(kImEnd), "");
}

TEST(TokenizerBpe, LongInput) {
    const auto& t = qwen3();
    std::string s;
    for (int i = 0; i < 2000; ++i) s += "The quick brown fox jumps over the lazy dog 12345. ";
    s += std::string(5000, ' ') + std::string(3000, 'a');
    const Ids ids = t.encode(s, false, false);
    EXPECT_EQ(t.decode(ids), s);
}
