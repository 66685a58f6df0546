// Grammars per sequence in the batched engine (Generator::Request::grammar): requests with different grammars and
// one without run together and each gets exactly the tokens, text and stop that Session::generate gives it alone
// with the same grammar (greedy and sampled), each constrained text matches its grammar, and a request whose grammar
// is complete where the vocabulary offers no way on ends with Stop::Grammar (F32 fixtures, CPU).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/family.h"
#include "engine/generator.h"
#include "engine/session.h"
#include "fixture_model.h"
#include "gguf/split.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace {

using namespace zinc::test;
namespace engine = zinc::engine;
namespace grammar = zinc::grammar;

struct Output {
    std::vector<int32_t> ids;
    std::string text;
    engine::GenerateResult result;
};

std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::shared_ptr<const grammar::Grammar> gbnf(const std::string& text) {
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(text));
}

struct Ask {
    std::vector<int32_t> prompt;
    int max_tokens;
    engine::SamplerParams sampling;
    std::shared_ptr<const grammar::Grammar> grammar;  // none: unconstrained
};

// The text matches the grammar: a prefix of it where the generation was cut, all of it where the request ended.
void expect_matches(const Ask& a, const Output& o) {
    if (!a.grammar) return;
    grammar::Matcher m(a.grammar);
    EXPECT_TRUE(m.advance_bytes(o.text)) << o.text;
    if (o.result.stop == engine::GenerateResult::Stop::EndOfGeneration ||
        o.result.stop == engine::GenerateResult::Stop::Grammar) {
        EXPECT_TRUE(m.can_end()) << o.text;
    }
}

class GeneratorGrammar : public ::testing::TestWithParam<std::string> {};

TEST_P(GeneratorGrammar, EachAsSessionAlone) {
    const zinc::gguf::Model model(fixture_gguf(GetParam(), "f32"));
    auto be = zinc::backend::make_cpu_backend(2);
    const auto f32 = zinc::backend::KvType::f32;
    const std::vector<int32_t> base =
        load_fixture_meta(std::string(ZINC_FIXTURES_DIR) + "/" + GetParam() + "/meta.json").prompt;
    ASSERT_GE(base.size(), 12u);
    const auto arithmetic = gbnf(read_text(ZINC_TEST_DATA_DIR "/grammars/arithmetic.gbnf"));
    const auto words = gbnf("root ::= word (\" \" word){2,5} \".\"\nword ::= [a-z]{1,8}\n");
    const auto json_object = gbnf(grammar::json_object_gbnf());
    // A grammar the vocabulary can complete only with a token that leaves nothing to match: its request ends either
    // at the end of generation or with Stop::Grammar, the same way alone and together.
    const auto digits = gbnf("root ::= [0-9] [0-9] [0-9]\n");
    engine::SamplerParams greedy, sampled;
    sampled.temperature = 1.0f;
    sampled.seed = 7;
    engine::SamplerParams sampled2 = sampled;
    sampled2.seed = 11;
    const auto prompt = [&](size_t from, size_t n) {
        return std::vector<int32_t>(base.begin() + std::ptrdiff_t(from), base.begin() + std::ptrdiff_t(from + n));
    };
    const std::vector<Ask> asks = {
        {prompt(0, 8), 24, greedy, arithmetic}, {prompt(1, 6), 24, sampled, words},
        {prompt(0, 10), 24, greedy, nullptr},   {prompt(2, 5), 24, greedy, json_object},
        {prompt(3, 7), 24, sampled2, json_object}, {prompt(0, 9), 24, greedy, digits},
    };

    zinc::engine::Session session(model, *be, {64, 64, f32, f32});
    const zinc::tokenizer::Tokenizer& tok = session.tokenizer();
    std::vector<Output> alone;
    for (const Ask& a : asks) {
        engine::Sampler sampler(a.sampling);
        engine::GenerateOptions go;
        go.max_tokens = a.max_tokens;
        std::optional<grammar::Matcher> m;
        if (a.grammar) go.grammar = &m.emplace(a.grammar);
        Output o;
        o.result = session.generate(a.prompt, go, sampler, [&](int32_t id, const std::string& text) {
            if (id >= 0) o.ids.push_back(id);
            o.text += text;
            return true;
        });
        alone.push_back(std::move(o));
    }

    auto family = engine::make_family(model, *be, {64, 64, f32, f32, 4, 16});
    engine::Generator gen(*family, *be, tok, 6);
    std::vector<Output> together(asks.size());
    size_t next = 0, steps = 0;
    const auto join = [&] {
        while (next < asks.size() && gen.free_sequences() > 0) {
            const size_t i = next++;
            engine::Generator::Request r;
            r.prompt = asks[i].prompt;
            r.max_tokens = asks[i].max_tokens;
            r.sampling = asks[i].sampling;
            r.grammar = asks[i].grammar;
            r.on_text = [&together, i](int32_t id, const std::string& text) {
                if (id >= 0) together[i].ids.push_back(id);
                together[i].text += text;
                return true;
            };
            r.on_done = [&together, i](const engine::GenerateResult& res) { together[i].result = res; };
            gen.add(std::move(r));
        }
    };
    join();
    while (gen.running() > 0) {
        ASSERT_TRUE(gen.step());
        join();
        ASSERT_LT(++steps, 1000u);
    }
    for (size_t i = 0; i < asks.size(); ++i) {
        SCOPED_TRACE("request " + std::to_string(i));
        EXPECT_EQ(together[i].ids, alone[i].ids);
        EXPECT_EQ(together[i].text, alone[i].text);
        EXPECT_EQ(together[i].result.stop, alone[i].result.stop);
        EXPECT_EQ(together[i].result.generated, alone[i].result.generated);
        expect_matches(asks[i], together[i]);
        if (asks[i].grammar) {
            EXPECT_GT(together[i].result.generated, 0);
        }
    }
    // The three digits are all the grammar takes: it ends there, at the end of generation or with Stop::Grammar.
    EXPECT_LE(together[5].result.generated, 3);
    EXPECT_NE(together[5].result.stop, engine::GenerateResult::Stop::MaxTokens) << together[5].text;
    // The unconstrained request is as it is without any grammar beside it.
    EXPECT_EQ(together[2].result.stop, alone[2].result.stop);
}

INSTANTIATE_TEST_SUITE_P(Families, GeneratorGrammar, ::testing::Values("qwen3", "qwen35"));

}  // namespace
