// Constrained generation (GenerateOptions::grammar) on the committed Brown model: sampled text always matches the
// grammar (checked by the matcher and independently by std::regex), greedy decoding under a grammar that allows
// every text gives exactly the tokens of plain greedy decoding, and `zinc run --grammar` refuses a malformed
// grammar at its line and column before the model is read.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "engine/open_model.h"
#include "grammar/matcher.h"
#include "zinc_binary.h"

namespace {

namespace engine = zinc::engine;
using namespace zinc::grammar;

const std::string kBrown = ZINC_BROWN_DIR "/brown-qwen3-5m-bf16.gguf";

engine::OpenedModel open_brown() {
    engine::OpenOptions o;
    o.path = kBrown;
    o.backend.backend = "cpu";
    o.backend.threads = 2;
    o.context = {256, 64};
    return engine::open_model(o);
}

struct Generated {
    std::vector<int32_t> tokens;
    std::string text;
    engine::GenerateResult result;
};

Generated generate(engine::Session& s, const std::string& prompt, engine::SamplerParams sp, int max_tokens,
                   Matcher* m) {
    engine::Sampler sampler(sp);
    engine::GenerateOptions go;
    go.max_tokens = max_tokens;
    go.grammar = m;
    Generated g;
    const auto ids = s.tokenizer().encode(prompt, true, true);
    g.result = s.generate(ids, go, sampler, [&](int32_t t, const std::string& text) {
        if (t >= 0) g.tokens.push_back(t);
        g.text += text;
        return true;
    });
    return g;
}

TEST(GrammarGenerate, SampledTextMatchesGrammar) {
    auto om = open_brown();
    const std::string gbnf = "root ::= word (\" \" word){2,5} \".\"\nword ::= [a-z]{1,8}\n";
    const std::regex re("[a-z]{1,8}( [a-z]{1,8}){2,5}\\.");
    const auto g = std::make_shared<const Grammar>(parse_gbnf(gbnf));
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        engine::SamplerParams sp;
        sp.temperature = 1.0f;
        sp.seed = seed;
        Matcher m(g);
        const Generated out = generate(*om.session, "The old man said", sp, 200, &m);
        // Complete within 200 tokens (at most 54 characters), then only the end of generation is allowed.
        EXPECT_TRUE(out.result.stop == engine::GenerateResult::Stop::EndOfGeneration ||
                    out.result.stop == engine::GenerateResult::Stop::Grammar)
            << engine::stop_reason(out.result.stop);
        EXPECT_TRUE(std::regex_match(out.text, re)) << "seed " << seed << ": '" << out.text << "'";
        Matcher check(g);
        EXPECT_TRUE(check.advance_bytes(out.text) && check.can_end()) << out.text;
    }
}

TEST(GrammarGenerate, AlwaysTrueGrammarKeepsGreedyTokens) {
    auto om = open_brown();
    engine::SamplerParams sp;  // greedy
    const Generated plain = generate(*om.session, "The house was", sp, 48, nullptr);
    Matcher m(std::make_shared<const Grammar>(parse_gbnf("root ::= [^\\x00]*\n")));
    const Generated constrained = generate(*om.session, "The house was", sp, 48, &m);
    ASSERT_EQ(plain.tokens.size(), 48u);
    EXPECT_EQ(constrained.tokens, plain.tokens);
    EXPECT_EQ(constrained.text, plain.text);
}

TEST(GrammarGenerate, CliRefusesMalformedGrammarBeforeLoading) {
    const auto r = zinc::test::run_zinc("run -m '" + kBrown + "' -p 'The' --grammar 'root ::= item'");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("--grammar: grammar: line 1, column 10: unknown rule 'item'"), std::string::npos) << r.err;
    const auto f = zinc::test::run_zinc("run -m '" + kBrown + "' -p 'The' --grammar-file /nonexistent.gbnf");
    EXPECT_NE(f.status, 0);
    EXPECT_NE(f.err.find("nonexistent.gbnf"), std::string::npos) << f.err;
}

TEST(GrammarGenerate, CliConstrainsRun) {
    const auto r = zinc::test::run_zinc("run -m '" + kBrown + "' -p 'He said' -n 100 --temp 1 --seed 3 -t 2 "
                                        "--grammar-file '" ZINC_TEST_DATA_DIR "/grammars/arithmetic.gbnf'");
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(r.out.rfind("He said", 0), 0u) << r.out;
    const std::string gen = r.out.substr(7, r.out.size() - 8);  // the prompt and the final newline off
    EXPECT_TRUE(std::regex_match(gen, std::regex("[-+*/() 0-9]+"))) << gen;
    Matcher m(std::make_shared<const Grammar>(parse_gbnf(zinc::test::read_text(ZINC_TEST_DATA_DIR
                                                                                "/grammars/arithmetic.gbnf"))));
    EXPECT_TRUE(m.advance_bytes(gen)) << gen;  // a prefix at least: -n may cut it
}

}  // namespace
