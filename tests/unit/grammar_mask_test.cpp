// The token mask (grammar/token_mask.h) on the real Qwen3 vocabulary (151,669 token texts, byte-level BPE: many
// tokens end or begin inside a UTF-8 character): the trie walk allows exactly the tokens that a brute-force check of
// every token's text through the matcher allows, after several prefixes of several grammars.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "tokenizer_test_util.h"

namespace {

using namespace zinc::grammar;

std::string grammar_file(const std::string& name) {
    std::ifstream f(std::string(ZINC_TEST_DATA_DIR) + "/grammars/" + name, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

const std::vector<std::string>& qwen3_texts() {
    static const std::vector<std::string> texts = [] {
        const auto& tok = zinc::tokenizer::test::qwen3();
        std::vector<std::string> t(size_t(tok.n_vocab()));
        for (int32_t id = 0; id < tok.n_vocab(); ++id) t[size_t(id)] = tok.token_text(id, false);
        return t;
    }();
    return texts;
}

// The grammar after `prefix`: trie walk against every token tried on its own. Returns how many are allowed.
size_t check_mask(const std::string& grammar_text, const std::string& prefix) {
    const auto& texts = qwen3_texts();
    static const TokenTrie trie(texts);
    Matcher m(std::make_shared<const Grammar>(parse_gbnf(grammar_text)));
    EXPECT_TRUE(m.advance_bytes(prefix)) << prefix;
    std::vector<uint8_t> allowed;
    allowed_tokens(m, trie, allowed);
    EXPECT_EQ(allowed.size(), texts.size());
    size_t n = 0, differ = 0;
    for (size_t id = 0; id < texts.size(); ++id) {
        Matcher copy = m;
        const bool expected = !texts[id].empty() && copy.advance_bytes(texts[id]);
        if (bool(allowed[id]) != expected && ++differ <= 5)
            ADD_FAILURE() << "prefix '" << prefix << "': token " << id << " '" << texts[id] << "' trie "
                          << int(allowed[id]) << ", brute force " << expected;
        n += expected;
    }
    EXPECT_EQ(differ, 0u);
    return n;
}

int32_t token_of(const std::string& text) {
    const auto ids = zinc::tokenizer::test::qwen3().encode(text, false, false);
    EXPECT_EQ(ids.size(), 1u) << text;
    return ids.empty() ? -1 : ids[0];
}

TEST(GrammarMask, TrieAgreesWithEveryTokenJson) {
    const std::string json = json_object_gbnf();
    const size_t at_start = check_mask(json, "");
    EXPECT_GT(at_start, 0u);
    EXPECT_LT(at_start, 1000u);  // '{' and tokens beginning with it
    // Inside a string almost anything goes; after a key only ':' (and what begins with it) does.
    EXPECT_GT(check_mask(json, "{\"na"), 100000u);
    const size_t after_key = check_mask(json, "{\"name\"");
    EXPECT_GT(after_key, 0u);
    EXPECT_LT(after_key, 1000u);  // ":" and white space (tokens of up to 16 blanks)
    check_mask(json, "{\"a\": [1, tr");
    check_mask(json, "{\"a\": \"caf\xC3");  // a prefix ending inside a character
    check_mask(json, "{\"a\": -0.5e");
}

TEST(GrammarMask, TrieAgreesWithEveryTokenOtherGrammars) {
    check_mask(grammar_file("arithmetic.gbnf"), "12 * (");
    check_mask(grammar_file("chess.gbnf"), "1. e4 e5\n2. N");
    check_mask(grammar_file("unicode.gbnf"), "");
    check_mask(grammar_file("unicode.gbnf"), "\xE3\x81");
    const size_t all = check_mask("root ::= [^\\x00]*\n", "");
    EXPECT_GT(all, 150000u);  // all but tokens that are not UTF-8 on their own (a lone continuation byte)
}

TEST(GrammarMask, MultiSymbolAndFinishedGrammar) {
    // Tokens that cover several grammar symbols are allowed when all of them fit.
    const TokenTrie trie(qwen3_texts());
    Matcher m(std::make_shared<const Grammar>(parse_gbnf("root ::= \"hello\" \" \" (\"world\" | \"there\")\n")));
    std::vector<uint8_t> allowed;
    allowed_tokens(m, trie, allowed);
    EXPECT_TRUE(allowed[size_t(token_of("hello"))]);
    EXPECT_TRUE(allowed[size_t(token_of("he"))]);
    EXPECT_FALSE(allowed[size_t(token_of(" hello"))]);
    ASSERT_TRUE(m.advance_bytes("hello"));
    allowed_tokens(m, trie, allowed);
    EXPECT_TRUE(allowed[size_t(token_of(" world"))]);
    EXPECT_TRUE(allowed[size_t(token_of(" there"))]);
    EXPECT_FALSE(allowed[size_t(token_of(" word"))]);
    ASSERT_TRUE(m.advance_bytes(" world"));
    EXPECT_TRUE(m.can_end());
    allowed_tokens(m, trie, allowed);
    for (uint8_t a : allowed) ASSERT_EQ(a, 0);  // complete: only end of generation, which the caller adds
}

}  // namespace
