#include "batch_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include "backend/backend.h"
#include "brown_model.h"
#include "engine/family.h"
#include "fixture_model.h"
#include "gguf/split.h"

namespace zinc::test {

namespace {

// Positions per page of the batched runs' paged caches: a sequence spans several.
constexpr int kTestPage = 8;

}  // namespace

LogitsStats batched_against_alone(const std::string& gguf, bool cuda) {
    constexpr int kSlots = 4, kSequences = 7, kCtx = 64;
    const gguf::Model model(gguf);
    auto be = cuda ? backend::make_cuda_backend(0) : backend::make_cpu_backend(0);

    // The sequences: rotations of the fixture's prompt, 5 to 23 tokens long, so that no two are alike.
    const std::string dir = gguf.substr(0, gguf.rfind('/') + 1);
    std::vector<int32_t> base = load_fixture_meta(dir + "meta.json").prompt;
    while (base.size() < 24) base.insert(base.end(), base.begin(), base.end());
    std::vector<std::vector<int32_t>> seqs;
    for (int s = 0; s < kSequences; ++s) {
        std::vector<int32_t> t(base.begin() + s, base.end());
        t.insert(t.end(), base.begin(), base.begin() + s);
        t.resize(size_t(5 + (s * 7) % 19));
        seqs.push_back(t);
    }

    // Batched: slots taken by the sequences in turn; each step takes one to five rows of every sequence in a slot.
    // The batch's cache is paged, in pages smaller than a sequence, against each alone in one piece.
    auto batched = engine::make_family(
        model, *be, {kCtx, 32, backend::KvType::f32, backend::KvType::f32, kSlots, kTestPage});
    std::mt19937 rng(7);
    std::map<std::pair<int, int>, std::vector<float>> got;  // (sequence, position) -> logits
    std::vector<int> in_slot(kSlots, -1);
    std::vector<size_t> done(kSequences, 0);
    int next = 0;
    const int vocab = batched->n_vocab();
    for (;;) {
        for (int slot = 0; slot < kSlots; ++slot)
            if (in_slot[size_t(slot)] < 0 && next < kSequences) in_slot[size_t(slot)] = next++;
        engine::Batch b;
        std::vector<std::pair<int, int>> rows;
        for (int slot = 0; slot < kSlots; ++slot) {
            const int s = in_slot[size_t(slot)];
            if (s < 0) continue;
            const size_t left = seqs[size_t(s)].size() - done[size_t(s)];
            const size_t n = std::min<size_t>(std::uniform_int_distribution<size_t>(1, 5)(rng), left);
            for (size_t i = 0; i < n; ++i) {
                const size_t p = done[size_t(s)]++;
                b.add(seqs[size_t(s)][p], slot, int32_t(p), true);
                rows.emplace_back(s, int(p));
            }
            if (done[size_t(s)] == seqs[size_t(s)].size()) in_slot[size_t(slot)] = -1;  // leaves after this step
        }
        if (b.size() == 0) break;
        const backend::Act lo = batched->step(b);
        std::vector<float> host(size_t(lo.size()));
        be->download(lo, host);
        for (size_t r = 0; r < rows.size(); ++r)
            got[rows[r]] = std::vector<float>(host.begin() + std::ptrdiff_t(r * size_t(vocab)),
                                              host.begin() + std::ptrdiff_t((r + 1) * size_t(vocab)));
    }

    // Alone: each sequence's prompt in one batch, every position's logits.
    std::vector<float> a, ref;
    for (int s = 0; s < kSequences; ++s) {
        auto alone = engine::make_family(model, *be, {kCtx, 32, backend::KvType::f32, backend::KvType::f32, 1});
        std::vector<float> logits;
        alone->forward(seqs[size_t(s)], 0, true, logits);
        ref.insert(ref.end(), logits.begin(), logits.end());
        for (size_t p = 0; p < seqs[size_t(s)].size(); ++p) {
            const std::vector<float>& g = got.at({s, int(p)});
            a.insert(a.end(), g.begin(), g.end());
        }
    }
    return compare_logits(a, ref, size_t(vocab));
}

ForkRuns forked_against_alone(const std::string& gguf, bool cuda) {
    const gguf::Model model(gguf);
    auto be = cuda ? backend::make_cuda_backend(0) : backend::make_cpu_backend(0);
    const auto f32 = backend::KvType::f32;
    // A micro-batch of 10 makes the sliding-window layers (window 16) rings of 26 rows.
    auto batched = engine::make_family(model, *be, {32, 10, f32, f32, 3, 4});
    const std::string dir = gguf.substr(0, gguf.find_last_of('/') + 1);
    const std::vector<int32_t> prompt = load_fixture_meta(dir + "meta.json").prompt;
    if (prompt.size() < 16) throw std::invalid_argument("a fixture prompt of fewer than 16 tokens");
    const int64_t L = 10, mid = batched->can_restart_at(6, 0) ? 6 : L;
    engine::Batch first;
    for (int p = 0; p < L; ++p) first.add(prompt[size_t(p)], 0, p, p == L - 1);
    batched->step(first);
    const int32_t used = batched->pages()->n_pages() - batched->pages()->free_pages();
    batched->fork(0, 1, L);
    batched->fork(0, 2, mid);
    ForkRuns r;
    r.shared_pages = batched->pages()->n_pages() - batched->pages()->free_pages() == used;

    // Each sequence's whole token list, and where its rows of the two steps below are in it.
    std::vector<std::vector<int32_t>> tokens = {
        {prompt.begin(), prompt.begin() + L},
        {prompt.begin(), prompt.begin() + L},
        {prompt.begin(), prompt.begin() + mid}};
    std::vector<std::vector<float>> got(3);
    for (int step = 0; step < 2; ++step) {
        engine::Batch b;
        for (int s = 0; s < 3; ++s) {
            const int32_t id = prompt[size_t(11 + s + step)];
            b.add(id, s, int32_t(tokens[size_t(s)].size()), true);
            tokens[size_t(s)].push_back(id);
        }
        const backend::Act lo = batched->step(b);
        std::vector<float> host(size_t(lo.size()));
        be->download(lo, host);
        const size_t vocab = host.size() / 3;
        for (size_t s = 0; s < 3; ++s)
            got[s].insert(got[s].end(), host.begin() + std::ptrdiff_t(s * vocab),
                          host.begin() + std::ptrdiff_t((s + 1) * vocab));
    }
    for (size_t s = 0; s < 3; ++s) {
        auto alone = engine::make_family(model, *be, {32, 32, f32, f32, 1});
        std::vector<float> all;
        alone->forward(tokens[s], 0, true, all);
        const size_t vocab = all.size() / tokens[s].size();
        const std::vector<float> want(all.end() - std::ptrdiff_t(2 * vocab), all.end());
        r.seqs.push_back(compare_logits(got[s], want, vocab));
    }
    return r;
}

void expect_forks_as_alone(const std::string& fam, bool cuda, double max_rel_l2) {
    const ForkRuns r = forked_against_alone(fixture_gguf(fam, "f32"), cuda);
    EXPECT_TRUE(r.shared_pages) << "forks share their pages";
    for (size_t s = 0; s < r.seqs.size(); ++s) {
        std::printf("%s %s fork %zu vs alone: %s\n", cuda ? "cuda" : "cpu", fam.c_str(), s, r.seqs[s].summary().c_str());
        EXPECT_LE(r.seqs[s].max_rel_l2, max_rel_l2) << "sequence " << s << ": " << r.seqs[s].summary();
        EXPECT_TRUE(r.seqs[s].all_argmax_agree()) << "sequence " << s << ": " << r.seqs[s].summary();
    }
}

GreedyRuns brown_greedy_batched_and_alone(const std::string& type, bool cuda, int n_gen) {
    constexpr int kSlots = 4, kPrompts = 6, kCtx = 128, kChunk = 16;
    const std::string file = brown_file(type);
    const gguf::Model model(file);
    auto be = cuda ? backend::make_cuda_backend(0) : backend::make_cpu_backend(0);
    std::vector<std::vector<int32_t>> prompts;
    {
        BrownFile f(type);
        const std::vector<int32_t> text = brown_heldout_tokens(f.session());
        for (int p = 0; p < kPrompts; ++p) {
            const auto at = text.begin() + 100 * p;
            prompts.emplace_back(at, at + 3 + 7 * p);
        }
    }
    GreedyRuns r;
    r.batched.resize(kPrompts);
    r.alone.resize(kPrompts);

    auto batched = engine::make_family(
        model, *be, {kCtx, 64, backend::KvType::f32, backend::KvType::f32, kSlots, kTestPage});
    std::vector<int> in_slot(kSlots, -1);
    std::vector<size_t> fed(kPrompts, 0);  // prompt tokens in the state
    int next = 0;
    for (;;) {
        for (int slot = 0; slot < kSlots; ++slot)
            if (in_slot[size_t(slot)] < 0 && next < kPrompts) in_slot[size_t(slot)] = next++;
        engine::Batch b;
        std::vector<int> wants;  // the prompt of each row that asks for logits
        for (int slot = 0; slot < kSlots; ++slot) {
            const int p = in_slot[size_t(slot)];
            if (p < 0) continue;
            const std::vector<int32_t>& prompt = prompts[size_t(p)];
            std::vector<int32_t>& out = r.batched[size_t(p)];
            if (fed[size_t(p)] < prompt.size()) {
                const size_t n = std::min<size_t>(kChunk, prompt.size() - fed[size_t(p)]);
                for (size_t i = 0; i < n; ++i, ++fed[size_t(p)]) {
                    const bool last = fed[size_t(p)] + 1 == prompt.size();
                    b.add(prompt[fed[size_t(p)]], slot, int32_t(fed[size_t(p)]), last);
                    if (last) wants.push_back(p);
                }
            } else {
                b.add(out.back(), slot, int32_t(prompt.size() + out.size() - 1), true);
                wants.push_back(p);
            }
        }
        if (b.size() == 0) break;
        const backend::Act lo = batched->step(b);
        std::vector<int32_t> ids(wants.size());
        if (!ids.empty()) be->argmax_rows(lo, ids);
        for (size_t i = 0; i < wants.size(); ++i) r.batched[size_t(wants[i])].push_back(ids[i]);
        for (int slot = 0; slot < kSlots; ++slot) {
            const int p = in_slot[size_t(slot)];
            if (p >= 0 && int(r.batched[size_t(p)].size()) == n_gen) in_slot[size_t(slot)] = -1;
        }
    }

    for (int p = 0; p < kPrompts; ++p) {
        auto alone = engine::make_family(model, *be, {kCtx, 64, backend::KvType::f32, backend::KvType::f32, 1});
        const std::vector<int32_t>& prompt = prompts[size_t(p)];
        std::vector<int32_t>& out = r.alone[size_t(p)];
        out.push_back(alone->forward_argmax(prompt, 0));
        while (int(out.size()) < n_gen)
            out.push_back(alone->forward_argmax(std::span<const int32_t>(&out.back(), 1),
                                                int64_t(prompt.size() + out.size() - 1)));
    }
    return r;
}

}  // namespace zinc::test
