// Many generations at once (engine::Generator): requests that run together, join when a sequence is free, read their
// prompts a chunk a step beside the others' decoding and leave at different lengths give each the tokens and text
// that Session::generate gives the same prompt alone, greedy and sampled with the same seeds, in every family (F32
// fixtures, CPU).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/family.h"
#include "engine/generator.h"
#include "engine/session.h"
#include "fixture_model.h"
#include "gguf/split.h"

namespace {

using namespace zinc::test;

struct Output {
    std::vector<int32_t> ids;
    std::string text;
    zinc::engine::GenerateResult result;
};

class Generator : public ::testing::TestWithParam<std::string> {};

// The prompt of a fixture family's meta.json.
std::vector<int32_t> fixture_prompt(const std::string& family) {
    return load_fixture_meta(std::string(ZINC_FIXTURES_DIR) + "/" + family + "/meta.json").prompt;
}

TEST_P(Generator, RequestsTogetherAsEachAlone) {
    const zinc::gguf::Model model(fixture_gguf(GetParam(), "f32"));
    auto be = zinc::backend::make_cpu_backend(2);
    const auto f32 = zinc::backend::KvType::f32;
    const std::vector<int32_t> base = fixture_prompt(GetParam());
    ASSERT_GE(base.size(), 12u);
    // Six requests on four sequences: prompts of 3 to 12 tokens, 4 to 14 tokens generated at most.
    struct Ask {
        std::vector<int32_t> prompt;
        int max_tokens;
        // greedy for even requests, sampled with a seed of its own for odd; the last with a repeat penalty too, so
        // that its sampler reads its whole row of logits where the others take the device's argmax or top k
        zinc::engine::SamplerParams sampling;
    };
    std::vector<Ask> asks;
    for (int i = 0; i < 6; ++i) {
        const size_t n = 3 + size_t(i) * 9 / 5;
        zinc::engine::SamplerParams sp;
        if (i % 2) {
            sp.temperature = 0.9f;
            sp.seed = uint64_t(100 + i);
        }
        if (i == 5) sp.repeat_penalty = 1.3f;
        asks.push_back({std::vector<int32_t>(base.begin() + i % 3, base.begin() + i % 3 + std::ptrdiff_t(n)),
                        4 + 2 * ((i * 5) % 6), sp});
    }
    zinc::engine::Session alone_session(model, *be, {64, 64, f32, f32});
    const zinc::tokenizer::Tokenizer& tok = alone_session.tokenizer();
    std::vector<Output> alone;
    for (const Ask& a : asks) {
        zinc::engine::Session s(model, *be, {64, 64, f32, f32});
        zinc::engine::Sampler sampler(a.sampling);
        zinc::engine::GenerateOptions go;
        go.max_tokens = a.max_tokens;
        Output o;
        o.result = s.generate(a.prompt, go, sampler, [&](int32_t id, const std::string& text) {
            if (id >= 0) o.ids.push_back(id);
            o.text += text;
            return true;
        });
        alone.push_back(std::move(o));
    }

    auto family = zinc::engine::make_family(model, *be, {64, 64, f32, f32, 4, 16});
    zinc::engine::Generator gen(*family, *be, tok, 5);  // prompts read 5 rows a step at most, over all
    std::vector<Output> together(asks.size());
    std::vector<bool> done(asks.size(), false);
    size_t next = 0, steps = 0;
    int most_running = 0;
    const auto join = [&] {
        while (next < asks.size() && gen.free_sequences() > 0) {
            const size_t i = next++;
            zinc::engine::Generator::Request r;
            r.prompt = asks[i].prompt;
            r.max_tokens = asks[i].max_tokens;
            r.sampling = asks[i].sampling;
            r.on_text = [&together, i](int32_t id, const std::string& text) {
                if (id >= 0) together[i].ids.push_back(id);
                together[i].text += text;
                return true;
            };
            r.on_done = [&together, &done, i](const zinc::engine::GenerateResult& res) {
                together[i].result = res;
                done[i] = true;
            };
            gen.add(std::move(r));
        }
    };
    join();
    while (gen.running() > 0) {
        most_running = std::max(most_running, gen.running());
        ASSERT_TRUE(gen.step());
        ++steps;
        join();  // the requests waiting take the sequences freed by those that ended
        ASSERT_LT(steps, 1000u);
    }
    EXPECT_EQ(most_running, 4);
    EXPECT_EQ(gen.free_sequences(), 4);
    for (size_t i = 0; i < asks.size(); ++i) {
        SCOPED_TRACE("request " + std::to_string(i));
        ASSERT_TRUE(done[i]);
        EXPECT_EQ(together[i].ids, alone[i].ids);
        EXPECT_EQ(together[i].text, alone[i].text);
        EXPECT_EQ(together[i].result.stop, alone[i].result.stop);
        EXPECT_EQ(together[i].result.generated, alone[i].result.generated);
        // The prompt's tokens run: all, or those after a prefix that a free sequence kept from a request before.
        EXPECT_GE(together[i].result.prompt_tokens, 1);
        EXPECT_LE(together[i].result.prompt_tokens, int(asks[i].prompt.size()));
    }
    ASSERT_NE(family->pages(), nullptr);
    gen.drop_kept();
    EXPECT_EQ(family->pages()->free_pages(), family->pages()->n_pages());
}

// One request on a Session of its own: its greedy tokens and result.
Output alone(const zinc::gguf::Model& model, zinc::backend::Backend& be, const std::vector<int32_t>& prompt,
             int max_tokens) {
    const auto f32 = zinc::backend::KvType::f32;
    zinc::engine::Session s(model, be, {128, 64, f32, f32});
    zinc::engine::Sampler sampler(zinc::engine::SamplerParams{});
    zinc::engine::GenerateOptions go;
    go.max_tokens = max_tokens;
    Output o;
    o.result = s.generate(prompt, go, sampler, [&](int32_t id, const std::string& text) {
        if (id >= 0) o.ids.push_back(id);
        o.text += text;
        return true;
    });
    return o;
}

// A greedy request on the generator; `out` gets its tokens and result.
zinc::engine::Generator::Request request(std::vector<int32_t> prompt, int max_tokens, Output& out) {
    zinc::engine::Generator::Request r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.on_text = [&out](int32_t id, const std::string& text) {
        if (id >= 0) out.ids.push_back(id);
        out.text += text;
        return true;
    };
    r.on_done = [&out](const zinc::engine::GenerateResult& res) { out.result = res; };
    return r;
}

// A conversation's second turn whose template rewrote the first reply (a chat template that drops the reasoning
// does): its prompt agrees with the first turn's state up to the end of the first prompt only. It reads only what
// follows that prompt, in every family: attention state restarts there, and recurrent state and sliding-window rings
// (window 16 here, 12 tokens generated past the prompt, micro-batches of 8: the rings no longer hold the window
// before the prompt's end) resume from the prompt's end kept in a fork. Its tokens are those of the prompt alone.
TEST_P(Generator, LaterTurnResumesAtPromptEnd) {
    const zinc::gguf::Model model(fixture_gguf(GetParam(), "f32"));
    auto be = zinc::backend::make_cpu_backend(2);
    const auto f32 = zinc::backend::KvType::f32;
    const std::vector<int32_t> base = fixture_prompt(GetParam());
    ASSERT_GE(base.size(), 44u);
    const std::vector<int32_t> first(base.begin(), base.begin() + 20);
    std::vector<int32_t> second = first;
    second.insert(second.end(), base.begin() + 30, base.begin() + 36);  // the reply as the template rewrote it
    second.insert(second.end(), base.begin() + 40, base.begin() + 44);  // the next message
    zinc::engine::Session session(model, *be, {128, 64, f32, f32});
    auto family = zinc::engine::make_family(model, *be, {128, 8, f32, f32, 4, 8});
    zinc::engine::Generator gen(*family, *be, session.tokenizer(), 8, 2);  // two sequences keep states only
    Output a, b;
    gen.add(request(first, 12, a));
    while (gen.running() > 0) gen.step();
    EXPECT_EQ(a.result.prompt_tokens, 20);
    EXPECT_EQ(a.result.generated, 12);
    gen.add(request(second, 6, b));
    while (gen.running() > 0) gen.step();
    EXPECT_EQ(b.result.prompt_tokens, int(second.size() - first.size()));
    const Output want = alone(model, *be, second, 6);
    EXPECT_EQ(b.ids, want.ids);
    EXPECT_EQ(b.text, want.text);
    gen.drop_kept();
    EXPECT_EQ(family->pages()->free_pages(), family->pages()->n_pages());
}

// Eight requests that arrive together and share a 32-token system prompt: the first reads it and the others wait for
// it (its chunk stops there), then fork it, so each reads only its own 3 tokens and the prompt's 4 pages are held
// once (pages of 8: at most 4 shared and 2 of each request's own at any time, against 6 each unshared). Each gets
// the tokens it gets alone.
TEST_P(Generator, SharedPrefixStoredOnce) {
    const zinc::gguf::Model model(fixture_gguf(GetParam(), "f32"));
    auto be = zinc::backend::make_cpu_backend(2);
    const auto f32 = zinc::backend::KvType::f32;
    const std::vector<int32_t> base = fixture_prompt(GetParam());
    ASSERT_GE(base.size(), 44u);
    zinc::engine::Session session(model, *be, {128, 64, f32, f32});
    auto family = zinc::engine::make_family(model, *be, {128, 64, f32, f32, 8, 8});
    zinc::engine::Generator gen(*family, *be, session.tokenizer(), 64);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<Output> out(8);
    for (size_t i = 0; i < 8; ++i) {
        std::vector<int32_t> p(base.begin(), base.begin() + 32);
        p.insert(p.end(), base.begin() + 33 + std::ptrdiff_t(i), base.begin() + 36 + std::ptrdiff_t(i));
        prompts.push_back(p);
        gen.add(request(p, 6, out[i]));
    }
    const zinc::engine::PagePool& pool = *family->pages();
    int most_used = 0;
    while (gen.running() > 0) {
        gen.step();
        most_used = std::max(most_used, pool.n_pages() - pool.free_pages());
    }
    EXPECT_LE(most_used, 4 + 8 * 2);
    for (size_t i = 0; i < 8; ++i) {
        SCOPED_TRACE("request " + std::to_string(i));
        EXPECT_EQ(out[i].result.prompt_tokens, i == 0 ? 35 : 3);
        const Output want = alone(model, *be, prompts[i], 6);
        EXPECT_EQ(out[i].ids, want.ids);
        EXPECT_EQ(out[i].text, want.text);
    }
    gen.drop_kept();
    EXPECT_EQ(pool.free_pages(), pool.n_pages());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Generator, ::testing::ValuesIn(kFixtureFamilies),
                         [](const auto& info) { return test_name(info.param); });

// A free sequence keeps its state: a request that starts as an ended one did reads only the rest of its prompt (here
// its last token) and gets the same greedy tokens; one that starts otherwise reads all of it, on the sequence that
// was used least recently; a pool too small for a new request's pages takes those of the kept states.
TEST(GeneratorRequests, KeptPrefixes) {
    const zinc::gguf::Model model(fixture_gguf("qwen3", "f32"));
    auto be = zinc::backend::make_cpu_backend(1);
    const auto f32 = zinc::backend::KvType::f32;
    zinc::engine::Session session(model, *be, {64, 64, f32, f32});
    auto family = zinc::engine::make_family(model, *be, {64, 64, f32, f32, 2, 16, 48});  // 3 pages of 16
    zinc::engine::Generator gen(*family, *be, session.tokenizer());
    const std::vector<int32_t> base = fixture_prompt("qwen3");
    ASSERT_GE(base.size(), 20u);
    const auto run = [&](std::vector<int32_t> prompt) {
        zinc::engine::Generator::Request r;
        r.prompt = std::move(prompt);
        r.max_tokens = 4;
        auto out = std::make_shared<Output>();
        r.on_text = [out](int32_t id, const std::string&) {
            if (id >= 0) out->ids.push_back(id);
            return true;
        };
        r.on_done = [out](const zinc::engine::GenerateResult& res) { out->result = res; };
        gen.add(std::move(r));
        while (gen.running() > 0) gen.step();
        return *out;
    };
    const std::vector<int32_t> p(base.begin(), base.begin() + 6);
    const Output a = run(p);
    EXPECT_EQ(a.result.prompt_tokens, 6);
    const Output again = run(p);
    EXPECT_EQ(again.result.prompt_tokens, 1);
    EXPECT_EQ(again.ids, a.ids);
    const Output other = run(std::vector<int32_t>(base.begin() + 1, base.begin() + 7));
    EXPECT_EQ(other.result.prompt_tokens, 6);
    // A prompt of 40 tokens and 4 more need all 3 pages: the other kept state gives its page back.
    const Output long_one = run(std::vector<int32_t>(base.begin(), base.begin() + std::min<size_t>(40, base.size())));
    EXPECT_EQ(long_one.result.generated, 4);
}

// A pool smaller than the running requests' contexts (6 pages of 8; two requests of 20 prompt tokens and 12 more
// need 4 each): when a step finds no page and no state is kept, the youngest request ends as a full context does
// (Stop::ContextFull, its tokens so far those it gets alone) and the other goes on to its end with its tokens alone.
TEST(GeneratorRequests, FullPoolEndsTheYoungest) {
    const zinc::gguf::Model model(fixture_gguf("qwen3", "f32"));
    auto be = zinc::backend::make_cpu_backend(1);
    const auto f32 = zinc::backend::KvType::f32;
    zinc::engine::Session session(model, *be, {64, 64, f32, f32});
    auto family = zinc::engine::make_family(model, *be, {64, 64, f32, f32, 2, 8, 48});
    zinc::engine::Generator gen(*family, *be, session.tokenizer());
    const std::vector<int32_t> base = fixture_prompt("qwen3");
    ASSERT_GE(base.size(), 41u);
    const std::vector<int32_t> first(base.begin(), base.begin() + 20), second(base.begin() + 21, base.begin() + 41);
    Output a, b;
    gen.add(request(first, 12, a));
    gen.add(request(second, 12, b));
    while (gen.running() > 0) gen.step();
    EXPECT_EQ(a.result.stop, zinc::engine::GenerateResult::Stop::MaxTokens);
    EXPECT_EQ(a.ids, alone(model, *be, first, 12).ids);
    EXPECT_EQ(b.result.stop, zinc::engine::GenerateResult::Stop::ContextFull);
    ASSERT_LT(b.ids.size(), 12u);
    const Output b_alone = alone(model, *be, second, 12);
    EXPECT_TRUE(std::equal(b.ids.begin(), b.ids.end(), b_alone.ids.begin()));
    gen.drop_kept();
    EXPECT_EQ(family->pages()->free_pages(), family->pages()->n_pages());
}

// A request that is cancelled, or whose text callback says stop, ends at once with Stop::Interrupted and gives its
// sequence back; the others go on.
TEST(GeneratorRequests, CancelAndStop) {
    const zinc::gguf::Model model(fixture_gguf("qwen3", "f32"));
    auto be = zinc::backend::make_cpu_backend(1);
    const auto f32 = zinc::backend::KvType::f32;
    zinc::engine::Session session(model, *be, {64, 64, f32, f32});
    auto family = zinc::engine::make_family(model, *be, {64, 64, f32, f32, 2, 16});
    zinc::engine::Generator gen(*family, *be, session.tokenizer());
    const std::vector<int32_t> prompt = fixture_prompt("qwen3");
    std::vector<zinc::engine::GenerateResult> results(2);
    int texts = 0;
    zinc::engine::Generator::Request a, b;
    a.prompt = b.prompt = std::vector<int32_t>(prompt.begin(), prompt.begin() + 6);
    a.max_tokens = b.max_tokens = 20;
    a.on_done = [&](const zinc::engine::GenerateResult& r) { results[0] = r; };
    b.on_text = [&](int32_t, const std::string&) { return ++texts < 3; };
    b.on_done = [&](const zinc::engine::GenerateResult& r) { results[1] = r; };
    const auto request = [](std::vector<int32_t> p) {
        zinc::engine::Generator::Request r;
        r.prompt = std::move(p);
        return r;
    };
    const int ida = gen.add(std::move(a));
    gen.add(std::move(b));
    EXPECT_THROW(gen.add(request(prompt)), std::runtime_error);  // both sequences taken
    for (int i = 0; i < 4; ++i) gen.step();
    EXPECT_EQ(results[1].stop, zinc::engine::GenerateResult::Stop::Interrupted);
    EXPECT_EQ(results[1].generated, 3);
    EXPECT_EQ(gen.running(), 1);
    gen.cancel(ida);
    EXPECT_EQ(results[0].stop, zinc::engine::GenerateResult::Stop::Interrupted);
    EXPECT_EQ(gen.running(), 0);
    gen.drop_kept();
    EXPECT_EQ(family->pages()->free_pages(), family->pages()->n_pages());
    EXPECT_THROW(gen.add(request({})), std::invalid_argument);
    EXPECT_THROW(gen.add(request(std::vector<int32_t>(65, prompt[0]))), std::length_error);
}

}  // namespace
