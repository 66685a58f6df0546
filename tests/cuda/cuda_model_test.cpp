// Every fixture model through the engine on the CUDA backend. F32 files against transformers' logits with the CPU
// engine's tolerance, for a whole-prompt batch (the tiled matmul), one token at a time (the matvecs and the
// recurrent decode kernels) and chunks of 7 (both, with state carried between calls); the 16-token greedy
// continuation (argmax taken on the GPU) equal to the CPU engine's and transformers'; sequences batched in shared
// steps equal to each alone, forked ones too; decode steps of one or several sequences replayed from CUDA graphs equal
// to eager ones; BF16 and quantized files against the CPU engine on the same file.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/launch.cuh"
#include "batch_check.h"
#include "engine/family.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "fixture_model.h"
#include "gguf/split.h"
#include "gpu_required.h"

namespace {

using namespace zinc::test;

const std::string kDir = ZINC_FIXTURES_DIR "/";

class CudaModel : public ::testing::TestWithParam<std::string> {};

// F32 weights, f32 activations everywhere: transformers' float32 forward up to summation order, as on the CPU.
TEST_P(CudaModel, F32MatchesTransformers) {
    ZINC_REQUIRE_GPU();
    for (size_t batch : {size_t(0), size_t(1), size_t(7)}) expect_f32_matches_transformers(GetParam(), batch, true);
}

TEST_P(CudaModel, GreedyContinuationMatchesCpuAndTransformers) {
    ZINC_REQUIRE_GPU();
    const std::string fam = GetParam();
    const FixtureMeta fx = load_fixture_meta(kDir + fam + "/meta.json");
    const size_t n = fx.continuation.size();
    const auto gpu = greedy_continuation(fixture_gguf(fam, "f32"), fx.prompt, n, true);
    EXPECT_EQ(gpu, greedy_continuation(fixture_gguf(fam, "f32"), fx.prompt, n, false));
    EXPECT_EQ(gpu, fx.continuation);
}

// One forward call of the whole prompt in micro-batches of 7 tokens gives the logits of one batch.
TEST_P(CudaModel, MicroBatchesEqualWholePrompt) {
    ZINC_REQUIRE_GPU();
    const std::string fam = GetParam();
    const FixtureMeta fx = load_fixture_meta(kDir + fam + "/meta.json");
    const size_t n = fx.prompt.size();
    const auto whole = run_logits(fixture_gguf(fam, "f32"), fx.prompt, n, true);
    const auto s = compare_logits(run_logits(fixture_gguf(fam, "f32"), fx.prompt, n, true, 7), whole, whole.size() / n);
    std::printf("cuda %s micro-batches of 7 vs one batch: %s\n", fam.c_str(), s.summary().c_str());
    EXPECT_LE(s.max_rel_l2, 1e-4) << s.summary();
    EXPECT_TRUE(s.all_argmax_agree()) << s.summary();
}

// Sequences of different lengths in shared steps, joining and leaving (tests/common/batch_check.h): every row's
// logits are those of its sequence alone, as for micro-batches.
TEST_P(CudaModel, BatchedSequencesEqualEachAlone) {
    ZINC_REQUIRE_GPU();
    const std::string fam = GetParam();
    const LogitsStats s = batched_against_alone(fixture_gguf(fam, "f32"), true);
    std::printf("cuda %s batched vs alone: %s\n", fam.c_str(), s.summary().c_str());
    EXPECT_LE(s.max_rel_l2, 1e-4) << s.summary();
    EXPECT_TRUE(s.all_argmax_agree()) << s.summary();
}

// Sequences forked from one prompt on the GPU: the pages they share, the pages copied before a fork writes into
// one, and the copied rings and recurrent state give every row the logits of its tokens alone.
TEST_P(CudaModel, ForkedSequencesAsAlone) {
    ZINC_REQUIRE_GPU();
    expect_forks_as_alone(GetParam(), true, 1e-4);
}

// Temperature sampling with top-k: the GPU selects the candidates and only they come back; with the same seed the
// tokens are those the CPU engine samples from its whole row of logits (F32: the logits agree to 1e-5).
TEST_P(CudaModel, SampledGenerationMatchesCpu) {
    ZINC_REQUIRE_GPU();
    const std::string fam = GetParam();
    const FixtureMeta fx = load_fixture_meta(kDir + fam + "/meta.json");
    const zinc::gguf::Model model(fixture_gguf(fam, "f32"));
    zinc::engine::SamplerParams sp;
    sp.temperature = 0.8f;
    sp.top_k = 40;
    sp.seed = 11;
    auto generate = [&](zinc::backend::Backend& be) {
        zinc::engine::Session session(model, be, zinc::test::f32_cache(128));
        zinc::engine::Sampler sampler(sp);
        std::vector<int32_t> out;
        session.generate(fx.prompt, {16}, sampler, [&](int32_t t, const std::string&) {
            if (t >= 0) out.push_back(t);
            return true;
        });
        return out;
    };
    auto cpu = zinc::backend::make_cpu_backend(0);
    auto gpu = zinc::backend::make_cuda_backend(0);
    const auto want = generate(*cpu);
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(generate(*gpu), want);
}

// A greedy decode step is queued on the stream as a whole; the host waits once, for the chosen token.
TEST_P(CudaModel, DecodeStepWaitsOnce) {
    ZINC_REQUIRE_GPU();
    const std::string fam = GetParam();
    const FixtureMeta fx = load_fixture_meta(kDir + fam + "/meta.json");
    const zinc::gguf::Model model(fixture_gguf(fam, "q8_0"));
    auto be = zinc::backend::make_cuda_backend(0);
    auto f = zinc::engine::make_family(model, *be, zinc::test::f32_cache(128));
    int32_t next = f->forward_argmax(fx.prompt, 0);
    int64_t pos = static_cast<int64_t>(fx.prompt.size());
    for (int i = 0; i < 2; ++i) next = f->forward_argmax(std::span<const int32_t>(&next, 1), pos++);  // warm-up
    const uint64_t before = be->host_waits();
    for (int i = 0; i < 8; ++i) next = f->forward_argmax(std::span<const int32_t>(&next, 1), pos++);
    EXPECT_EQ(be->host_waits() - before, 8u);
}

// Decode steps replayed from CUDA graphs give the same logits, bit for bit, as the same steps run eagerly: across
// the attention key buckets (a new recording at 128 and 256 positions) and after a micro-batch of several tokens
// whose wider logits buffer replaces the one the first recordings wrote to.
TEST_P(CudaModel, RecordedDecodeMatchesEager) {
    ZINC_REQUIRE_GPU();
    const std::string fam = GetParam();
    const FixtureMeta fx = load_fixture_meta(kDir + fam + "/meta.json");
    const zinc::gguf::Model model(fixture_gguf(fam, "q8_0"));
    const size_t n_decode = 300 - fx.prompt.size();
    auto decode = [&](bool graphs, uint64_t* recorded, uint64_t* replayed) {
        auto be = zinc::backend::make_cuda_backend(0);
        auto& cuda = dynamic_cast<zinc::backend::CudaBackend&>(*be);
        cuda.set_graphs(graphs);
        auto f = zinc::engine::make_family(model, *be, zinc::test::f32_cache(320));
        std::vector<float> logits;
        f->forward(fx.prompt, 0, false, logits);
        int64_t pos = static_cast<int64_t>(fx.prompt.size());
        for (size_t i = 0; i < n_decode; ++i) {
            const int32_t id = fx.prompt[i % fx.prompt.size()];
            f->forward(std::span<const int32_t>(&id, 1), pos++, false, logits);
        }
        f->forward(std::span<const int32_t>(fx.prompt).first(3), pos, true, logits);
        pos += 3;
        for (int i = 0; i < 5; ++i) {
            const int32_t id = fx.prompt[size_t(i)];
            f->forward(std::span<const int32_t>(&id, 1), pos++, false, logits);
        }
        *recorded = cuda.graphs_recorded();
        *replayed = cuda.graphs_replayed();
        return logits;
    };
    uint64_t rec = 0, rep = 0, rec_off = 0, rep_off = 0;
    const auto eager = decode(false, &rec_off, &rep_off);
    const auto graphs = decode(true, &rec, &rep);
    EXPECT_EQ(rec_off + rep_off, 0u);
    EXPECT_GE(rec, 4u);                   // the 128-, 256- and 512-key buckets, and again after the 3-token batch
    EXPECT_GE(rep, n_decode - 2 * rec);   // every other step of a bucket is a replay
    ASSERT_EQ(graphs.size(), eager.size());
    size_t differ = 0;
    for (size_t i = 0; i < eager.size(); ++i) differ += graphs[i] != eager[i];
    EXPECT_EQ(differ, 0u) << fam << ": " << rec << " recordings, " << rep << " replays";
    std::printf("cuda %s: %zu decode steps, %llu recordings, %llu replays, logits identical to eager\n", fam.c_str(),
                n_decode + 5, static_cast<unsigned long long>(rec), static_cast<unsigned long long>(rep));
}

// Decode steps of several sequences replayed from CUDA graphs give the same logits, bit for bit, as the same steps run
// eagerly: with the layout changing from step to step (a sequence sitting a step out, then back: the replay puts its
// row caches back), some steps wanting the logits of only some rows (gathered by ids the replay puts back too), the
// paged caches' tables growing by a page every 8 positions (read anew by every replay), and the longest sequence
// crossing the attention's 128-key bucket.
TEST_P(CudaModel, RecordedBatchedDecodeMatchesEager) {
    ZINC_REQUIRE_GPU();
    const std::string fam = GetParam();
    const FixtureMeta fx = load_fixture_meta(kDir + fam + "/meta.json");
    const zinc::gguf::Model model(fixture_gguf(fam, "q8_0"));
    constexpr int kSeqs = 3, kSteps = 150;
    auto decode = [&](bool graphs, uint64_t* replayed) {
        auto be = zinc::backend::make_cuda_backend(0);
        auto& cuda = dynamic_cast<zinc::backend::CudaBackend&>(*be);
        cuda.set_graphs(graphs);
        auto f = zinc::engine::make_family(
            model, *be, {320, 64, zinc::backend::KvType::f32, zinc::backend::KvType::f32, kSeqs, 8});
        std::vector<float> all;
        std::vector<int32_t> pos(kSeqs, 0);
        auto run = [&](const zinc::engine::Batch& b) {
            const zinc::backend::Act lo = f->step(b);
            std::vector<float> host(size_t(lo.size()));
            be->download(lo, host);
            all.insert(all.end(), host.begin(), host.end());
        };
        for (int s = 0; s < kSeqs; ++s) {  // prompts of different lengths
            zinc::engine::Batch b;
            for (size_t t = 0; t + size_t(2 * s) < fx.prompt.size(); ++t)
                b.add(fx.prompt[t], s, pos[size_t(s)]++, true);
            run(b);
        }
        for (int i = 0; i < kSteps; ++i) {
            zinc::engine::Batch b;
            for (int s = 0; s < kSeqs; ++s) {
                if (s == 1 && i % 10 == 9) continue;
                const int32_t id = fx.prompt[size_t(i + s) % fx.prompt.size()];
                b.add(id, s, pos[size_t(s)]++, !(s == 1 && i % 7 == 3));
            }
            run(b);
        }
        *replayed = cuda.graphs_replayed();
        return all;
    };
    uint64_t replayed = 0, replayed_off = 0;
    const auto eager = decode(false, &replayed_off);
    const auto graphs = decode(true, &replayed);
    EXPECT_EQ(replayed_off, 0u);
    EXPECT_GE(replayed, uint64_t(kSteps / 2));
    ASSERT_EQ(graphs.size(), eager.size());
    size_t differ = 0;
    for (size_t i = 0; i < eager.size(); ++i) differ += graphs[i] != eager[i];
    EXPECT_EQ(differ, 0u) << fam << ": " << replayed << " replays";
}

// Kernels launched early (each one's blocks placed while the one before still runs, launch.cuh) compute what plainly
// launched kernels do, bit for bit, at every step: a kernel that read its input before the one before had written it
// would show here. Both ways run recorded steps, eager prompts and a later micro-batch.
TEST_P(CudaModel, EarlyLaunchesMatchPlainLaunches) {
    ZINC_REQUIRE_GPU();
    const std::string fam = GetParam();
    const FixtureMeta fx = load_fixture_meta(kDir + fam + "/meta.json");
    const zinc::gguf::Model model(fixture_gguf(fam, "q8_0"));
    auto decode = [&](bool early) {
        zinc::backend::cuda::set_early_launch(early);
        auto be = zinc::backend::make_cuda_backend(0);
        auto f = zinc::engine::make_family(model, *be, zinc::test::f32_cache(320));
        std::vector<float> all, logits;
        f->forward(fx.prompt, 0, true, logits);
        all.insert(all.end(), logits.begin(), logits.end());
        int64_t pos = static_cast<int64_t>(fx.prompt.size());
        for (int i = 0; i < 140; ++i) {
            const int32_t id = fx.prompt[size_t(i) % fx.prompt.size()];
            f->forward(std::span<const int32_t>(&id, 1), pos++, false, logits);
            all.insert(all.end(), logits.begin(), logits.end());
        }
        f->forward(std::span<const int32_t>(fx.prompt).first(3), pos, true, logits);
        all.insert(all.end(), logits.begin(), logits.end());
        return all;
    };
    const bool was_on = zinc::backend::cuda::early_launch_requested();
    const auto plain = decode(false);
    const auto early = decode(true);
    zinc::backend::cuda::set_early_launch(was_on);
    ASSERT_EQ(early.size(), plain.size());
    size_t differ = 0;
    for (size_t i = 0; i < plain.size(); ++i) differ += early[i] != plain[i];
    EXPECT_EQ(differ, 0u) << fam;
}

// Profiling times every op of a decode step on the device: the step run eagerly, the one recorded and the one
// replayed from the recording report the same ops, each with a time.
TEST_P(CudaModel, ProfiledDecodeStepsTimeEveryOp) {
    ZINC_REQUIRE_GPU();
    const std::string fam = GetParam();
    const FixtureMeta fx = load_fixture_meta(kDir + fam + "/meta.json");
    const zinc::gguf::Model model(fixture_gguf(fam, "q8_0"));
    auto be = zinc::backend::make_cuda_backend(0);
    auto& cuda = dynamic_cast<zinc::backend::CudaBackend&>(*be);
    auto f = zinc::engine::make_family(model, *be, zinc::test::f32_cache(128));
    int32_t next = f->forward_argmax(fx.prompt, 0);
    int64_t pos = static_cast<int64_t>(fx.prompt.size());
    // Decode steps allocate scratch buffers the prompt did not need, which drops the recordings made so far; after
    // these two every buffer is in place.
    for (int i = 0; i < 2; ++i) next = f->forward_argmax(std::span<const int32_t>(&next, 1), pos++);
    be->set_profiling(true);
    std::vector<std::vector<zinc::backend::Backend::OpTime>> steps;
    for (int i = 0; i < 3; ++i) {
        next = f->forward_argmax(std::span<const int32_t>(&next, 1), pos++);
        steps.push_back(be->take_profile());
    }
    be->set_profiling(false);
    EXPECT_GE(cuda.graphs_replayed(), 1u);
    ASSERT_FALSE(steps[0].empty());
    for (const auto& step : steps) {
        ASSERT_EQ(step.size(), steps[0].size());
        for (size_t i = 0; i < step.size(); ++i) {
            EXPECT_EQ(step[i].label, steps[0][i].label);
            EXPECT_EQ(step[i].calls, steps[0][i].calls) << step[i].label;
            EXPECT_GT(step[i].us, 0.0) << step[i].label;
        }
    }
}

// BF16 and quantized weights against the CPU engine on the same file. The paths differ in how activations are
// rounded before the dot products: the CPU does it as ggml does (bf16 for BF16 weights; Q8_0 / Q8_K blocks for
// quantized ones), the GPU keeps f32 activations for float weights and for prefill's dense matmuls (weights
// dequantized to f32) and quantizes them to Q8_1 blocks with f32 scales for decode and the experts. One int8 step is
// up to 1/254 of a block's largest value, and these random-weight models (logit std 10) amplify such differences
// layer by layer. Measured on an H200, rel L2 (prefill / decode): Q8_0 qwen3 0.024 / 0.018, qwen35 0.042 / 0.028,
// qwen35moe 0.049 / 0.037, gpt-oss 0.070 / 0.028, gemma4 0.138 / 0.045, gemma4moe 0.178 / 0.136; Q4_K_M qwen3
// 0.034 / 0.040, qwen35moe 0.065 / 0.071; BF16 (both the same) qwen3 0.0069, qwen35 0.010, qwen35moe 0.0088, gpt-oss
// 0.017, gemma4 0.026, gemma4moe 0.085. Gemma's Q8_0 prefill differs most: there the GPU rounds no activation at
// all, and its fixtures are the most sensitive ones (BF16 weights alone move gemma4moe by 12%). The top token agrees
// at 49-63 of 64 positions. The bounds leave about a third of headroom; a wrong kernel
// gives rel L2 near 1 and random top tokens. The exact checks are the F32 ones above and the per-op tests, where
// each kernel meets the rounding bound of its own activation quantization.
void check_against_cpu(const std::string& fam, const std::string& type, double max_rel_l2) {
    const FixtureMeta fx = load_fixture_meta(kDir + fam + "/meta.json");
    const auto cpu = run_logits(fixture_gguf(fam, type), fx.prompt, fx.prompt.size(), false);
    const size_t n_vocab = cpu.size() / fx.prompt.size();
    for (size_t batch : {fx.prompt.size(), size_t(1)}) {
        const auto s = compare_logits(run_logits(fixture_gguf(fam, type), fx.prompt, batch, true), cpu, n_vocab);
        std::printf("cuda %s %s batch %zu vs cpu: %s\n", fam.c_str(), type.c_str(), batch, s.summary().c_str());
        EXPECT_LE(s.rel_l2, max_rel_l2) << "batch " << batch << ": " << s.summary();
        EXPECT_GE(s.argmax_agree, fx.prompt.size() * 2 / 3) << "batch " << batch << ": " << s.summary();
    }
}

TEST_P(CudaModel, Bf16AgreesWithCpu) {
    ZINC_REQUIRE_GPU();
    check_against_cpu(GetParam(), "bf16", 0.12);
}

TEST_P(CudaModel, Q8_0AgreesWithCpu) {
    ZINC_REQUIRE_GPU();
    check_against_cpu(GetParam(), "q8_0", GetParam().starts_with("gemma4") ? 0.25 : 0.1);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaModel, ::testing::ValuesIn(kFixtureFamilies),
                         [](const auto& info) { return test_name(info.param); });

TEST(CudaModelKQuants, Q4_K_MAgreesWithCpu) {
    ZINC_REQUIRE_GPU();
    for (const char* fam : {"qwen3", "qwen35moe"}) check_against_cpu(fam, "q4_k_m", 0.1);
}

}  // namespace
