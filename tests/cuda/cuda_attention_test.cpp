// The CUDA backend's RoPE and attention against the CPU backend on fresh random inputs: small shapes and the real
// shapes of Qwen3-8B, Qwen3.6-35B-A3B, Gemma 4 26B-A4B (sliding and global layers) and gpt-oss-20b, with every
// variant the ops take (frequency factors, YaRN, adjacent pairs, partial rotation; sliding window, sinks, soft-cap,
// GQA, prefill chunks and decode steps past the window, split-key decode at long contexts). GPU outputs are filled
// with NaN before each op runs, so an op that leaves a value unwritten fails. The index and angle logic the kernels
// share with the host is checked first, without a GPU. Tolerances are stated at each check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <numbers>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "backend/backend.h"
#include "backend/cuda/attention_kernels.h"
#include "cuda_test_util.h"
#include "gpu_required.h"
#include "quant/float_convert.h"

namespace {

using namespace zinc::cuda_test;
using zinc::backend::Act;
using zinc::backend::AttentionParams;
using zinc::backend::HeadNorms;
using zinc::backend::KvLayer;
using zinc::backend::KvType;
using zinc::backend::RopeParams;
using zinc::backend::Weight;
namespace kern = zinc::backend::cuda;

// An f32 vector tensor with the given values, as the GGUF reader would present it. Not copyable: the CPU backend's
// weight is a view into `values`.
struct F32Vector {
    std::vector<float> values;
    zinc::gguf::TensorInfo info;
    F32Vector(std::vector<float> v, const std::string& name) : values(std::move(v)) {
        info.name = name;
        info.type = TensorType::F32;
        info.n_dims = 1;
        info.ne = {int64_t(values.size()), 1, 1, 1};
        info.nbytes = values.size() * sizeof(float);
        info.n_elements = values.size();
        info.data = reinterpret_cast<const uint8_t*>(values.data());
    }
    F32Vector(const F32Vector&) = delete;
    F32Vector& operator=(const F32Vector&) = delete;
};

std::vector<int32_t> positions(int32_t first, int64_t n) {
    std::vector<int32_t> p(size_t(n), 0);
    for (int64_t t = 0; t < n; ++t) p[size_t(t)] = first + int32_t(t);
    return p;
}

// The rope parameters the gpt-oss loader derives (model/gpt_oss.cpp): YaRN with the correction range unrounded.
RopeParams gpt_oss_rope() {
    const float factor = 32.0f, base = 150000.0f, n_ctx_orig = 4096.0f;
    const int n_rot = 64;
    const auto corr = [&](double beta) {
        return float(n_rot * std::log(n_ctx_orig / (beta * 2.0 * std::numbers::pi)) / (2.0 * std::log(double(base))));
    };
    RopeParams p{n_rot, true, base, 1.0f / factor};
    p.ext_factor = 1.0f;
    p.yarn_low = std::max(0.0f, corr(32.0));
    p.yarn_high = std::min(float(n_rot - 1), corr(1.0));
    p.mscale = 1.0f + 0.1f * std::log(factor);
    return p;
}

// The kernels' angle for pair i at position pos (the host build of the shared function).
float host_angle(const RopeParams& p, const float* ff, int32_t pos, int i) {
    kern::RopeArgs a;
    a.n_rot = p.n_rot;
    a.theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_rot));
    a.freq_scale = p.freq_scale;
    a.ext_factor = p.ext_factor;
    a.yarn_low = p.yarn_low;
    a.yarn_high = p.yarn_high;
    float theta_i = float(pos);
    for (int k = 0; k < i; ++k) theta_i = kern::mul_rn(theta_i, a.theta_scale);
    return kern::rope_angle(theta_i, ff ? ff[i] : 1.0f, i, a);
}

float ulp(float x) { return std::nextafter(std::fabs(x), INFINITY) - std::fabs(x); }

// ---------------------------------------------------------------- host logic (no GPU)

TEST(CudaAttentionHostLogic, VisibleKeysAreTheCpuBackendsRange) {
    for (int64_t window : {0, 1, 2, 16, 128, 1024})
        for (int64_t pq = 0; pq < 3000; ++pq) {
            const kern::KeyRange r = kern::visible_keys(pq, window);
            const int64_t j0 = window > 0 ? std::max<int64_t>(0, pq - window + 1) : 0;  // cpu_attention.cpp
            ASSERT_EQ(r.begin, j0) << pq << " " << window;
            ASSERT_EQ(r.end, pq + 1) << pq << " " << window;
        }
}

TEST(CudaAttentionHostLogic, SplitsCoverEveryRowsKeysOnce) {
    for (int64_t window : {0, 16, 128, 1024})
        for (int n_head : {1, 8, 16, 64})
            for (int64_t n_q : {1, 3, 7, 40, 300})
                for (int64_t pos0 : {0, 5, 127, 1000, 4000, 40000}) {
                    const int n_head_kv = std::max(1, n_head / 4);
                    const kern::AttentionPlan plan = kern::plan_attention(n_q, n_head, n_head_kv, 128, pos0, window);
                    ASSERT_GE(plan.n_split, 1);
                    ASSERT_LE(plan.n_split, kern::kMaxSplits);
                    if (n_q * (n_head / plan.heads) >= kern::kTargetBlocks) {
                        ASSERT_EQ(plan.n_split, 1);
                    }
                    ASSERT_EQ(plan.row_tiles, n_q * n_head >= kern::kTargetBlocks && n_q >= 2 * kern::kTileRows);
                    const int64_t chunk = kern::split_chunk(kern::visible_keys(pos0 + n_q - 1, window), plan.n_split);
                    ASSERT_GE(chunk, 1);
                    for (int64_t t = 0; t < n_q; ++t) {
                        const kern::KeyRange vis = kern::visible_keys(pos0 + t, window);
                        int64_t next = vis.begin;
                        for (int s = 0; s < plan.n_split; ++s) {
                            const kern::KeyRange r = kern::split_keys(vis, chunk, s);
                            ASSERT_LE(r.begin, r.end);
                            if (r.begin == r.end) continue;
                            ASSERT_EQ(r.begin, next) << "split " << s;
                            next = r.end;
                            // The merge kernel relies on split 0 holding keys (the row's first visible one).
                            if (s == 0) {
                                ASSERT_GT(r.end, r.begin);
                            }
                        }
                        ASSERT_EQ(next, vis.end) << "row " << t << " n_q " << n_q << " pos0 " << pos0;
                    }
                }
}

// A recorded decode step replays the plan it was recorded with for every position of its key bucket.
TEST(CudaAttentionHostLogic, PlanIsTheSameWithinAKeyBucket) {
    for (int64_t window : {0, 100, 1024})
        for (int n_head : {1, 8, 32, 64}) {
            int64_t bucket = -1;
            kern::AttentionPlan first;
            for (int64_t pos = 0; pos < 20000; ++pos) {
                const kern::AttentionPlan p = kern::plan_attention(1, n_head, 1, 128, pos, window);
                if (kern::key_bucket(pos + 1) != bucket) {
                    bucket = kern::key_bucket(pos + 1);
                    first = p;
                }
                ASSERT_EQ(p.n_split, first.n_split) << pos << " " << n_head << " " << window;
                ASSERT_EQ(p.row_tiles, first.row_tiles);
            }
        }
}

// Over an f16 cache with heads of 64, 128 or 256 values the tensor-core kernel serves every bucket, a group of heads
// per block, and splits only into pieces of kMmaMinSplitKeys keys of the bucket or more; other caches and head sizes
// never take it.
TEST(CudaAttentionHostLogic, TensorCorePlans) {
    for (int head_dim : {64, 128, 256})
        for (int64_t pos : {0, 100, 5000, 40000}) {
            const kern::AttentionPlan p = kern::plan_attention(1, 32, 8, head_dim, pos, 0, KvType::f16, KvType::f16);
            EXPECT_TRUE(p.mma);
            EXPECT_EQ(p.heads, kern::heads_per_block(32, 8, head_dim));
            EXPECT_LE(p.n_split, std::max<int64_t>(1, kern::key_bucket(pos + 1) / kern::kMmaMinSplitKeys));
            EXPECT_FALSE(kern::plan_attention(1, 32, 8, head_dim, pos, 0, KvType::f16, KvType::q8_0).mma);
            EXPECT_FALSE(kern::plan_attention(1, 32, 8, head_dim, pos, 0, KvType::f32, KvType::f16).mma);
        }
    EXPECT_FALSE(kern::plan_attention(1, 32, 8, 512, 5000, 0, KvType::f16, KvType::f16).mma);
    EXPECT_FALSE(kern::plan_attention(1, 4, 2, 48, 5000, 0, KvType::f16, KvType::f16).mma);
    // Prefill chunks of kFlashMinRows rows or more take the flash kernel over an f16 cache (heads up to 512), with one
    // split and the heads of a tile-kernel block; shorter chunks the tensor-core kernel; other caches the row tiles.
    for (int head_dim : {64, 128, 256, 512}) {
        const kern::AttentionPlan p = kern::plan_attention(kern::kFlashMinRows, 32, 8, head_dim, 0, 0, KvType::f16,
                                                           KvType::f16);
        EXPECT_TRUE(p.flash);
        EXPECT_FALSE(p.mma || p.row_tiles);
        EXPECT_EQ(p.n_split, 1);
        EXPECT_EQ(p.heads, kern::heads_per_block(32, 8, head_dim));
        EXPECT_FALSE(kern::plan_attention(512, 32, 8, head_dim, 0, 0, KvType::f16, KvType::q8_0).flash);
    }
    const kern::AttentionPlan rows =
        kern::plan_attention(kern::kFlashMinRows - 1, 32, 8, 128, 0, 0, KvType::f16, KvType::f16);
    EXPECT_TRUE(rows.mma);
    EXPECT_FALSE(rows.flash || rows.row_tiles);
    EXPECT_TRUE(kern::plan_attention(64, 32, 8, 128, 0, 0, KvType::f32, KvType::f32).row_tiles);
    EXPECT_TRUE(kern::plan_attention(64, 32, 8, 512, 0, 0, KvType::f16, KvType::q8_0).row_tiles);
}

// A keys-kernel lane holds values_per_lane values of a head; a tile-kernel block serves G heads of one KV head: G
// divides the heads per KV head, keeps G * head_dim within 2048 (16 outputs a thread), and is the largest power of
// two up to 8 that does both. Short contexts keep the keys kernel (one head a block).
TEST(CudaAttentionHostLogic, HeadsPerBlockShareAKvHead) {
    for (int head_dim : {8, 48, 64, 80, 128, 256, 512}) {
        const int p = kern::values_per_lane(head_dim);
        ASSERT_GE(32 * p, head_dim);
        ASSERT_TRUE(p == 1 || 16 * p < head_dim) << head_dim;
        for (int group : {1, 2, 3, 4, 6, 8, 16})
            for (int n_head_kv : {1, 2, 8}) {
                const int n_head = group * n_head_kv;
                const int g = kern::heads_per_block(n_head, n_head_kv, head_dim);
                ASSERT_EQ(group % g, 0) << head_dim << " " << group;
                ASSERT_LE(g * head_dim, std::max(2048, head_dim));
                const int more = 2 * g;
                ASSERT_TRUE(more > 8 || group % more != 0 || more * head_dim > 2048) << head_dim << " " << group;
                EXPECT_EQ(kern::plan_attention(1, n_head, n_head_kv, head_dim, 100, 0).heads, 1);
                EXPECT_EQ(kern::plan_attention(1, n_head, n_head_kv, head_dim, 5000, 0).heads, g);
            }
    }
    EXPECT_EQ(kern::heads_per_block(32, 8, 128), 4);  // qwen3-8b: the 4 heads of a KV head
    EXPECT_EQ(kern::heads_per_block(64, 8, 64), 8);   // gpt-oss
    EXPECT_EQ(kern::heads_per_block(16, 2, 512), 4);  // gemma 4 global layers: 8 heads a KV head, 4 a block
}

TEST(CudaAttentionHostLogic, RopePairsCoverTheRotatedDimsOnce) {
    for (bool neox : {true, false})
        for (int n_rot : {2, 32, 64, 128, 512}) {
            std::vector<int> seen(size_t(n_rot), 0);
            for (int i = 0; i < n_rot / 2; ++i) {
                int i0 = -1, i1 = -1;
                kern::rope_pair(i, n_rot / 2, neox, &i0, &i1);
                ASSERT_TRUE(i0 >= 0 && i0 < n_rot && i1 >= 0 && i1 < n_rot);
                ++seen[size_t(i0)];
                ++seen[size_t(i1)];
            }
            for (int c : seen) ASSERT_EQ(c, 1);
        }
}

// The CPU backend's rope on unit probes (1 at the pair's first element, 0 at its second) returns mscale cos and
// mscale sin of its angle; the shared angle function must give the same.
TEST(CudaAttentionHostLogic, RopeAngleIsTheCpuBackendsAngle) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    const F32Vector prop([] {
        std::vector<float> v(256, 1e30f);
        std::fill(v.begin(), v.begin() + 64, 1.0f);
        return v;
    }(), "rope_freqs.weight");
    const F32Vector random_ff(random_floats(16, 0.5f, 8.0f), "rope_freqs.weight");
    const Weight w_prop = cpu->load_weight(prop.info), w_random = cpu->load_weight(random_ff.info);
    RopeParams yarn_partial{32, false, 10000.0f, 0.25f};
    yarn_partial.ext_factor = 0.7f;
    yarn_partial.yarn_low = 2.5f;
    yarn_partial.yarn_high = 9.25f;
    yarn_partial.mscale = 1.2f;
    yarn_partial.freq_factors = &w_random;
    RopeParams yarn_step{32, true, 10000.0f, 0.5f};
    yarn_step.ext_factor = 1.0f;
    yarn_step.yarn_low = yarn_step.yarn_high = 5.0f;  // the 0.001 floor of the ramp's width
    RopeParams proportional{512, true, 1e6f, 1.0f};
    proportional.freq_factors = &w_prop;
    const std::pair<RopeParams, const float*> cases[] = {
        {RopeParams{128, true, 1e6f, 1.0f}, nullptr},
        {RopeParams{64, true, 1e7f, 1.0f}, nullptr},
        {RopeParams{96, false, 10000.0f, 0.125f}, nullptr},
        {proportional, prop.values.data()},
        {gpt_oss_rope(), nullptr},
        {yarn_partial, random_ff.values.data()},
        {yarn_step, nullptr},
    };
    for (const auto& [p, ff] : cases) {
        const int half = p.n_rot / 2;
        const std::vector<int32_t> pos = {0, 1, 7, 300, 4095, 40000, 131071};
        Act x = cpu->alloc(int64_t(pos.size()), p.n_rot);
        std::vector<float> probe(size_t(x.size()), 0.0f);
        for (size_t t = 0; t < pos.size(); ++t)
            for (int i = 0; i < half; ++i) {
                int i0, i1;
                kern::rope_pair(i, half, p.neox, &i0, &i1);
                probe[t * p.n_rot + i0] = 1.0f;
            }
        cpu->upload(x, probe);
        cpu->rope(x, p.n_rot, pos, p);
        std::vector<float> got(probe.size());
        cpu->download(x, got);
        for (size_t t = 0; t < pos.size(); ++t)
            for (int i = 0; i < half; ++i) {
                int i0, i1;
                kern::rope_pair(i, half, p.neox, &i0, &i1);
                const float theta = host_angle(p, ff, pos[t], i);
                const float c = got[t * p.n_rot + i0], s = got[t * p.n_rot + i1];
                if (p.ext_factor == 0.0f) {
                    // Exact: the same roundings of the same operations, then the same libm.
                    ASSERT_EQ(c, std::cos(theta) * p.mscale) << "n_rot " << p.n_rot << " pos " << pos[t] << " i " << i;
                    ASSERT_EQ(s, std::sin(theta) * p.mscale) << "n_rot " << p.n_rot << " pos " << pos[t] << " i " << i;
                } else {
                    // The YaRN blend theta_int (1 - r) + theta_ext r may be fused into one fma by the C++ compiler
                    // in either build: a 2-ulp angle difference at most.
                    const float tol = 2.0f * ulp(theta) * p.mscale + 2e-7f;
                    ASSERT_NEAR(c, std::cos(theta) * p.mscale, tol) << "pos " << pos[t] << " i " << i;
                    ASSERT_NEAR(s, std::sin(theta) * p.mscale, tol) << "pos " << pos[t] << " i " << i;
                }
            }
    }
}

// ---------------------------------------------------------------- rope on the GPU

// Runs the CPU and the GPU rope on the same random rows (values in [-1, 1)) and compares element by element.
// Tolerance: 2e-6 * mscale (sin/cos of the same f32 angle from CUDA's and glibc's libm, 1-2 ulp, and the rotation's
// products fused differently), plus with YaRN 4 * mscale * ulp(theta): the CPU's C++ build may fuse the YaRN blend
// into one fma where the GPU rounds each product, moving the angle by up to 2 ulp and each output by up to
// (|a| + |b|) times that.
void check_rope(Backends& be, const std::string& what, int heads, int head_dim, const std::vector<int32_t>& pos,
                RopeParams p, const F32Vector* ff) {
    SCOPED_TRACE(what);
    const int64_t rows = int64_t(pos.size()), cols = int64_t(heads) * head_dim;
    auto [xc, xg] = be.act(random_floats(size_t(rows * cols)), rows, cols);
    Weight wc, wg;
    if (ff) {
        wc = be.cpu->load_weight(ff->info);
        wg = be.gpu->load_weight(ff->info);
    }
    RopeParams pc = p, pg = p;
    pc.freq_factors = ff ? &wc : nullptr;
    pg.freq_factors = ff ? &wg : nullptr;
    be.cpu->rope(xc, head_dim, pos, pc);
    be.gpu->rope(xg, head_dim, pos, pg);
    const auto got = be.get(*be.gpu, xg), want = be.get(*be.cpu, xc);
    const int half = p.n_rot / 2;
    double worst = 0;
    for (int64_t t = 0; t < rows; ++t)
        for (int i = 0; i < head_dim; ++i) {
            // Pair of element i (unrotated elements past n_rot must come back unchanged).
            int pair = -1;
            if (i < p.n_rot) pair = p.neox ? i % half : i / 2;
            float tol = 2e-6f * p.mscale;
            if (pair >= 0 && p.ext_factor != 0.0f)
                tol += 4.0f * p.mscale * ulp(host_angle(p, ff ? ff->values.data() : nullptr, pos[size_t(t)], pair));
            for (int h = 0; h < heads; ++h) {
                const size_t k = size_t(t * cols + int64_t(h) * head_dim + i);
                ASSERT_TRUE(std::isfinite(got[k])) << "row " << t << " head " << h << " dim " << i;
                if (pair < 0) {
                    ASSERT_EQ(got[k], want[k]) << "unrotated dim " << i;
                }
                ASSERT_NEAR(got[k], want[k], tol) << "row " << t << " (pos " << pos[size_t(t)] << ") head " << h
                                                  << " dim " << i;
                worst = std::max(worst, double(std::fabs(got[k] - want[k])));
            }
        }
    std::cout << "  rope " << what << ": max abs error " << worst << "\n";
}

TEST(CudaRope, PlainNeoxAndAdjacentPartial) {
    ZINC_REQUIRE_GPU();
    Backends be;
    struct Case {
        int64_t rows;
        int heads, head_dim, n_rot;
        bool neox;
        int32_t pos0;
    };
    for (const Case& c : {Case{9, 32, 128, 128, true, 0}, Case{1, 8, 128, 128, true, 3000},
                          Case{5, 4, 128, 64, true, 17}, Case{6, 4, 64, 64, false, 100},
                          Case{4, 2, 96, 32, false, 7}, Case{3, 3, 40, 2, true, 5}, Case{2, 1, 1024, 1024, true, 9}})
        check_rope(be,
                   std::to_string(c.heads) + "x" + std::to_string(c.head_dim) + " n_rot " + std::to_string(c.n_rot) +
                       (c.neox ? " neox" : " adjacent"),
                   c.heads, c.head_dim, positions(c.pos0, c.rows), RopeParams{c.n_rot, c.neox, 1e6f, 1.0f}, nullptr);
    // Linear position scaling.
    check_rope(be, "freq_scale 0.25", 4, 64, positions(1000, 3), RopeParams{64, true, 10000.0f, 0.25f}, nullptr);
}

TEST(CudaRope, ModelShapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    // Qwen3-8B: 32 query / 8 KV heads of 128, base 1e6; a prompt, then decode far into the context.
    const RopeParams qwen3{128, true, 1e6f, 1.0f};
    check_rope(be, "qwen3 q prefill", 32, 128, positions(0, 17), qwen3, nullptr);
    check_rope(be, "qwen3 k prefill", 8, 128, positions(0, 17), qwen3, nullptr);
    check_rope(be, "qwen3 q decode", 32, 128, positions(40000, 1), qwen3, nullptr);
    // Qwen3.6-35B-A3B: 16 / 2 heads of 256, partial rotation of the first 64 dims, base 1e7.
    const RopeParams qwen36{64, true, 1e7f, 1.0f};
    check_rope(be, "qwen3.6 q prefill", 16, 256, positions(0, 13), qwen36, nullptr);
    check_rope(be, "qwen3.6 k decode", 2, 256, positions(100000, 1), qwen36, nullptr);
    // Gemma 4 26B-A4B sliding layers: 16 / 8 heads of 256, base 1e4.
    const RopeParams gemma_swa{256, true, 1e4f, 1.0f};
    check_rope(be, "gemma4 sliding q", 16, 256, positions(1000, 40), gemma_swa, nullptr);
    check_rope(be, "gemma4 sliding k", 8, 256, positions(1000, 40), gemma_swa, nullptr);
    // Gemma 4 global layers: 16 / 2 heads of 512, proportional RoPE: n_rot 512, base 1e6, factors 1 for the first
    // 64 pairs and 1e30 for the other 192 (which then barely turn).
    const F32Vector prop(
        [] {
            std::vector<float> v(256, 1e30f);
            std::fill(v.begin(), v.begin() + 64, 1.0f);
            return v;
        }(),
        "rope_freqs.weight");
    const RopeParams gemma_global{512, true, 1e6f, 1.0f};
    check_rope(be, "gemma4 global q", 16, 512, positions(0, 11), gemma_global, &prop);
    check_rope(be, "gemma4 global k decode", 2, 512, positions(70000, 1), gemma_global, &prop);
    // gpt-oss-20b: 64 / 8 heads of 64, YaRN factor 32 over 4096 positions, base 150000, mscale 1 + 0.1 ln 32.
    const RopeParams oss = gpt_oss_rope();
    check_rope(be, "gpt-oss q prefill", 64, 64, positions(0, 300), oss, nullptr);
    check_rope(be, "gpt-oss k prefill", 8, 64, positions(0, 300), oss, nullptr);
    check_rope(be, "gpt-oss q decode", 64, 64, positions(131000, 1), oss, nullptr);
}

TEST(CudaRope, FreqFactorsAndYarnVariants) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const F32Vector ff16(random_floats(16, 0.5f, 8.0f), "rope_freqs.weight");
    const F32Vector ff32(random_floats(32, 0.5f, 8.0f), "rope_freqs.weight");
    // Random divisors, NeoX and adjacent pairs, full and partial rotation.
    check_rope(be, "freq factors neox partial", 4, 96, positions(3, 9), RopeParams{32, true, 10000.0f, 1.0f}, &ff16);
    check_rope(be, "freq factors adjacent", 3, 64, positions(500, 4), RopeParams{64, false, 10000.0f, 1.0f}, &ff32);
    // YaRN with a partial ext_factor, a ramp inside the pairs, mscale, frequency factors, adjacent pairs.
    RopeParams y{32, false, 10000.0f, 0.25f};
    y.ext_factor = 0.7f;
    y.yarn_low = 2.5f;
    y.yarn_high = 9.25f;
    y.mscale = 1.2f;
    check_rope(be, "yarn adjacent partial", 4, 96, positions(0, 40), y, &ff16);
    y.neox = true;
    check_rope(be, "yarn neox partial", 4, 96, positions(2000, 5), y, &ff16);
    // A ramp of zero width (the 0.001 floor).
    RopeParams step{64, true, 10000.0f, 0.5f};
    step.ext_factor = 1.0f;
    step.yarn_low = step.yarn_high = 5.0f;
    check_rope(be, "yarn step", 2, 64, positions(100, 6), step, nullptr);
}

TEST(CudaRope, BadShapesThrow) {
    ZINC_REQUIRE_GPU();
    auto gpu = zinc::backend::make_cuda_backend(0);
    Act x = gpu->alloc(2, 128);
    const std::vector<int32_t> pos = {0, 1};
    EXPECT_THROW(gpu->rope(x, 128, pos, RopeParams{127, true, 1e4f, 1.0f}), std::invalid_argument);  // odd n_rot
    EXPECT_THROW(gpu->rope(x, 64, pos, RopeParams{128, true, 1e4f, 1.0f}), std::invalid_argument);   // n_rot > d
    EXPECT_THROW(gpu->rope(x, 96, pos, RopeParams{32, true, 1e4f, 1.0f}), std::invalid_argument);    // cols % d
    EXPECT_THROW(gpu->rope(x, 128, std::vector<int32_t>{0}, RopeParams{128, true, 1e4f, 1.0f}), std::invalid_argument);
    const F32Vector ff(random_floats(32, 1.0f, 2.0f), "rope_freqs.weight");
    const Weight w = gpu->load_weight(ff.info);
    RopeParams p{128, true, 1e4f, 1.0f};
    p.freq_factors = &w;  // 32 values for 64 pairs
    EXPECT_THROW(gpu->rope(x, 128, pos, p), std::invalid_argument);
}

// ---------------------------------------------------------------- KV cache and attention

struct AttnCase {
    std::string name;
    int n_head, n_head_kv, head_dim;
    float scale;
    int64_t window = 0;
    bool sinks = false;
    float softcap = 0.0f;
    float qk = 2.0f;  // q and k uniform in [-qk, qk); v in [-1, 1)
    // Rows per step, in order from position 0: > 0 writes the rows' K and V and attends from them; < 0 only writes
    // (a long context built without the cost of the CPU reference attending from it).
    std::vector<int64_t> steps;
    double tol = 2e-6;
    KvType cache = KvType::f32;  // both backends' K and V type
    int64_t ring = 0;            // > 0: the GPU's cache is a ring of this many rows (the CPU's is full-length)
};

// Writes each step's random K/V rows to both caches, runs attention for the step's random query rows on both, and
// compares (max_err: relative to the largest output, outputs being convex combinations of V rows, or less with a
// sink). Each case's tolerance is stated with the case.
void check_attention(Backends& be, const AttnCase& c) {
    SCOPED_TRACE(c.name);
    const int64_t width = int64_t(c.n_head_kv) * c.head_dim, q_cols = int64_t(c.n_head) * c.head_dim;
    int64_t cap = 0;
    for (int64_t s : c.steps) cap += s < 0 ? -s : s;
    auto kc = be.cpu->alloc_kv(KvLayer{nullptr, nullptr, width, cap, c.cache, c.cache});
    auto kg = be.gpu->alloc_kv(KvLayer{nullptr, nullptr, width, c.ring > 0 ? c.ring : cap, c.cache, c.cache, c.ring > 0});
    std::unique_ptr<F32Vector> sinks;
    Weight sc, sg;
    AttentionParams pc{c.n_head, c.n_head_kv, c.head_dim, c.scale};
    pc.window = c.window;
    pc.softcap = c.softcap;
    AttentionParams pg = pc;
    if (c.sinks) {
        sinks = std::make_unique<F32Vector>(random_floats(size_t(c.n_head), -2.0f, 4.0f), "blk.0.attn_sinks.weight");
        sc = be.cpu->load_weight(sinks->info);
        sg = be.gpu->load_weight(sinks->info);
        pc.sinks = &sc;
        pg.sinks = &sg;
    }
    int64_t pos0 = 0;
    double worst = 0;
    for (int64_t step : c.steps) {
        const int64_t T = step < 0 ? -step : step;
        auto [k_c, k_g] = be.act(random_floats(size_t(T * width), -c.qk, c.qk), T, width);
        auto [v_c, v_g] = be.act(random_floats(size_t(T * width)), T, width);
        be.cpu->kv_write(kc, k_c, v_c, pos0);
        be.gpu->kv_write(kg, k_g, v_g, pos0);
        if (step > 0) {
            auto [q_c, q_g] = be.act(random_floats(size_t(T * q_cols), -c.qk, c.qk), T, q_cols);
            auto [oc, og] = be.out(T, q_cols);
            be.cpu->attention(q_c, kc, pos0, pc, oc);
            be.gpu->attention(q_g, kg, pos0, pg, og);
            const double err = max_err(be.get(*be.gpu, og), be.get(*be.cpu, oc));
            const kern::AttentionPlan plan =
                kern::plan_attention(T, c.n_head, c.n_head_kv, c.head_dim, pos0, c.window, c.cache, c.cache);
            EXPECT_LE(err, c.tol) << T << " rows at " << pos0 << " ("
                                  << (plan.flash       ? std::string("flash")
                                      : plan.row_tiles ? std::string("row tiles")
                                                       : std::to_string(plan.n_split) + " key splits")
                                  << ")";
            worst = std::max(worst, err);
        }
        pos0 += T;
    }
    std::cout << "  attention " << c.name << ": max error " << worst << "\n";
}

// Prefill 37 rows, 5 more, two decode steps, a long chunk and one more decode step: ~300 positions.
const std::vector<int64_t> kSteps300 = {37, 5, 1, 1, 258, 1};

TEST(CudaAttention, SmallShapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    // 2e-6: scores of at most ~20 in magnitude (q . k / sqrt(d) with q, k in [-2, 2)) whose f32 dot products are
    // summed in another order (a few 1e-7 relative), then an f32 online softmax against the CPU's two-pass softmax
    // with a double denominator; outputs are convex combinations of rows of V in [-1, 1).
    const float s64 = 0.125f, s32 = 1.0f / std::sqrt(32.0f);
    const AttnCase cases[] = {
        {"4/2x64", 4, 2, 64, s64, 0, false, 0.0f, 2.0f, kSteps300},
        {"6/6x32", 6, 6, 32, s32, 0, false, 0.0f, 2.0f, kSteps300},
        {"4/2x64 window 16", 4, 2, 64, s64, 16, false, 0.0f, 2.0f, {7, 9, 1, 1, 1, 21, 1}},
        {"4/2x64 window 1", 4, 2, 64, s64, 1, false, 0.0f, 2.0f, {5, 1, 3}},
        {"4/1x64 sinks", 4, 1, 64, s64, 0, true, 0.0f, 2.0f, {9, 1, 30, 1}},
        {"4/2x64 window 16 sinks", 4, 2, 64, s64, 16, true, 0.0f, 2.0f, {7, 9, 1, 1, 1, 21, 1}},
        // Head sizes that are not multiples of 32 use part of the lanes.
        {"2/1x48", 2, 1, 48, 1.0f / std::sqrt(48.0f), 0, false, 0.0f, 2.0f, {11, 1, 1}},
        {"3/1x80 window 16", 3, 1, 80, 1.0f / std::sqrt(80.0f), 16, false, 0.0f, 2.0f, {30, 1, 9}},
        {"1/1x8", 1, 1, 8, 1.0f / std::sqrt(8.0f), 0, false, 0.0f, 2.0f, {6, 1}},
        {"2/1x512", 2, 1, 512, 1.0f / std::sqrt(512.0f), 0, false, 0.0f, 2.0f, {12, 1, 1}},
        // Long prefill chunks take the row-tile kernel (shared-memory K/V tiles of 4096 / head_dim keys), here
        // with partial last tiles of rows and of keys and odd head sizes.
        {"1/1x8 row tiles", 1, 1, 8, 1.0f / std::sqrt(8.0f), 0, false, 0.0f, 2.0f, {1037, 3}},
        {"2/1x48 row tiles window 100 sinks", 2, 1, 48, 1.0f / std::sqrt(48.0f), 100, true, 0.0f, 2.0f,
         {601, 1, 700}},
        {"2/2x512 row tiles", 2, 2, 512, 1.0f / std::sqrt(512.0f), 0, false, 0.0f, 2.0f, {515, 1}},
    };
    for (const AttnCase& c : cases) check_attention(be, c);
}

TEST(CudaAttention, SoftCap) {
    ZINC_REQUIRE_GPU();
    Backends be;
    // 4e-6: as SmallShapes, plus tanhf of CUDA and glibc 1-2 ulp apart, times the cap (5 or 30: a few 1e-6 in the
    // score, which the softmax passes on to the output at most at that size).
    const AttnCase cases[] = {
        {"4/2x64 softcap 5", 4, 2, 64, 0.125f, 0, false, 5.0f, 2.0f, kSteps300, 4e-6},
        {"4/2x64 softcap 5 window 16 sinks", 4, 2, 64, 0.125f, 16, true, 5.0f, 2.0f, {7, 9, 1, 1, 1, 21, 1}, 4e-6},
        {"2/1x256 softcap 30 scale 1", 2, 1, 256, 1.0f, 0, false, 30.0f, 1.0f, {40, 1, -3000, 1, 5}, 4e-6},
    };
    for (const AttnCase& c : cases) check_attention(be, c);
}

TEST(CudaAttention, Qwen3Shapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    // 2e-6 as SmallShapes (the same score range). The long steps build a 4000-position context; the decode rows and
    // the 7-row chunk after it spread their keys over several blocks.
    const float s128 = 1.0f / std::sqrt(128.0f), s256 = 1.0f / 16.0f;
    check_attention(be, {"qwen3-8b 32/8x128", 32, 8, 128, s128, 0, false, 0.0f, 2.0f, kSteps300});
    // Long contexts: 5e-6, the rounding of f32 softmax sums over ~4000 keys taken in another order (measured 3.5e-6).
    check_attention(be, {"qwen3-8b long", 32, 8, 128, s128, 0, false, 0.0f, 2.0f, {-4000, 1, 1, 7, 1}, 5e-6});
    check_attention(be, {"qwen3.6 16/2x256", 16, 2, 256, s256, 0, false, 0.0f, 2.0f, kSteps300});
    check_attention(be, {"qwen3.6 long", 16, 2, 256, s256, 0, false, 0.0f, 2.0f, {-3000, 1, 4, 1}, 5e-6});
}

TEST(CudaAttention, Gemma4Shapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    // Scale 1 (q and k are RMS-normalized in the model): q, k uniform in [-sqrt 3, sqrt 3) have unit RMS, so scores
    // reach ~±50 for d = 256 and ~±70 for 512. Their f32 dot products, summed in another order than the CPU's, then
    // differ by ~1e-5 absolute, which the softmax passes on to the output: 2e-5 (sliding, 256) and 4e-5 (global,
    // 512) of the largest |v|.
    const float u = std::sqrt(3.0f);
    // Sliding: 16 / 8 heads of 256, window 1024. A 1000-position context, then a 70-row chunk across the window's
    // edge (one block per row and head), decode steps past it (split keys inside the window), a 40-row chunk.
    check_attention(be, {"gemma4 sliding", 16, 8, 256, 1.0f, 1024, false, 0.0f, u, {-1000, 70, 1, 1, 40, 1}, 2e-5});
    // Global: 16 / 2 heads of 512, no window; a prompt, decode, then a 2000-position context and decode.
    check_attention(be, {"gemma4 global", 16, 2, 512, 1.0f, 0, false, 0.0f, u, {37, 5, 1, -2000, 1, 3}, 4e-5});
    // The op's soft-cap at gemma's final-logit value (gemma itself caps only the final logits): scores past ±30 are
    // squeezed, which lowers the sensitivity; the same bound.
    check_attention(be, {"gemma4 global softcap", 16, 2, 512, 1.0f, 0, false, 30.0f, u, {37, 1, -2000, 1}, 4e-5});
    check_attention(be, {"gemma4 sliding softcap", 16, 8, 256, 1.0f, 1024, false, 30.0f, u, {-1030, 1, 17}, 2e-5});
}

TEST(CudaAttention, GptOssShapes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    // 64 / 8 heads of 64, scale 1/8, sinks (in [-2, 4): comparable to the scores). 2e-6 as SmallShapes.
    // Sliding layers: window 128, ~300 positions (prefill chunks and decode steps past the window).
    check_attention(be, {"gpt-oss sliding", 64, 8, 64, 0.125f, 128, true, 0.0f, 2.0f, kSteps300});
    // Full layers: no window; a 3000-position context where decode splits the keys and the merge adds the sinks.
    check_attention(be, {"gpt-oss full", 64, 8, 64, 0.125f, 0, true, 0.0f, 2.0f, kSteps300});
    // Long contexts: 5e-6 (measured 2.2e-6), as for qwen3-8b long.
    check_attention(be, {"gpt-oss full long", 64, 8, 64, 0.125f, 0, true, 0.0f, 2.0f, {-3000, 1, 1, 9}, 5e-6});
    check_attention(be, {"gpt-oss sliding long", 64, 8, 64, 0.125f, 128, true, 0.0f, 2.0f, {-3000, 1, 9}, 5e-6});
}

// The cache in f16 and q8_0 on both backends: the two round the same f32 rows to the same values, so the outputs
// agree as closely as with an f32 cache (the tolerances of the f32 cases).
TEST(CudaAttention, CacheTypes) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const float s128 = 1.0f / std::sqrt(128.0f), u = std::sqrt(3.0f);
    for (KvType t : {KvType::f16, KvType::q8_0}) {
        const std::string n = std::string(" ") + zinc::backend::kv_type_name(t);
        check_attention(be, {"qwen3-8b" + n, 32, 8, 128, s128, 0, false, 0.0f, 2.0f, kSteps300, 2e-6, t});
        check_attention(be, {"qwen3-8b long" + n, 32, 8, 128, s128, 0, false, 0.0f, 2.0f, {-4000, 1, 1, 7, 1}, 5e-6, t});
        check_attention(be, {"gpt-oss full" + n, 64, 8, 64, 0.125f, 0, true, 0.0f, 2.0f, kSteps300, 2e-6, t});
        // Long contexts with sinks and groups of 8 heads (f16: the tensor-core kernel).
        check_attention(be, {"gpt-oss long" + n, 64, 8, 64, 0.125f, 0, true, 0.0f, 2.0f, {-3000, 1, 1, 5, 1}, 5e-6, t});
        check_attention(be, {"gemma4 global" + n, 16, 2, 512, 1.0f, 0, false, 0.0f, u, {37, 5, 1, -2000, 1, 3}, 4e-5, t});
        check_attention(be, {"gemma4 sliding" + n, 16, 8, 256, 1.0f, 1024, false, 0.0f, u, {-1000, 70, 1, 40, 1}, 2e-5,
                             t});
        // Head sizes that are not a multiple of 32 (f16 only: q8_0 blocks are 32 values) read value by value.
        if (t == KvType::f16) {
            check_attention(be, {"2/1x48" + n, 2, 1, 48, 1.0f / std::sqrt(48.0f), 0, false, 0.0f, 2.0f, {11, 1, 1},
                                 2e-6, t});
            check_attention(be, {"3/1x80 window 16" + n, 3, 1, 80, 1.0f / std::sqrt(80.0f), 16, false, 0.0f, 2.0f,
                                 {30, 1, 9}, 2e-6, t});
        }
    }
}

// Prefill chunks over an f16 cache (the flash kernel): whole prompts and chunks after a cached context, partial tiles
// of rows and keys, every head size it takes, groups of 1 to 8 heads a block, windows narrower than a block's
// positions, sinks and soft-cap. Both backends round K and V to the same f16 values, and the kernel keeps the queries
// and probabilities to about 22 bits, so the f32 cases' tolerances hold (their reasons are stated above).
TEST(CudaAttention, FlashPrefill) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const KvType f16 = KvType::f16;
    const float s64 = 0.125f, s128 = 1.0f / std::sqrt(128.0f), s256 = 1.0f / 16.0f, u = std::sqrt(3.0f);
    const AttnCase cases[] = {
        {"qwen3-8b prompt", 32, 8, 128, s128, 0, false, 0.0f, 2.0f, {1100, 1, 33, -500, 200}, 5e-6, f16},
        {"qwen3.6 16/2x256", 16, 2, 256, s256, 0, false, 0.0f, 2.0f, {300, 1, 65}, 2e-6, f16},
        {"gpt-oss sliding", 64, 8, 64, s64, 128, true, 0.0f, 2.0f, {300, 1, 200, 40}, 2e-6, f16},
        {"gpt-oss full", 64, 8, 64, s64, 0, true, 0.0f, 2.0f, {517, 1, 64}, 2e-6, f16},
        {"4/2x64 window 16", 4, 2, 64, s64, 16, false, 0.0f, 2.0f, {40, 1, 33, 7, 64}, 2e-6, f16},
        {"6/6x64 window 1 sinks", 6, 6, 64, s64, 1, true, 0.0f, 2.0f, {100, 1, 50}, 2e-6, f16},
        {"4/2x64 softcap 5", 4, 2, 64, s64, 0, false, 5.0f, 2.0f, {257, 1, 32}, 4e-6, f16},
        {"gemma4 sliding", 16, 8, 256, 1.0f, 1024, false, 0.0f, u, {-1000, 300, 1, 64}, 2e-5, f16},
        {"gemma4 global", 16, 2, 512, 1.0f, 0, false, 0.0f, u, {200, 1, 40}, 4e-5, f16},
        {"gemma4 global softcap", 16, 2, 512, 1.0f, 0, false, 30.0f, u, {97, 1, -300, 35}, 4e-5, f16},
    };
    for (const AttnCase& c : cases) check_attention(be, c);
}

// Sliding-window layers keep a ring of window + micro-batch rows on the GPU; the CPU reference keeps every position.
// The rows wrap around the ring several times, in prefill chunks, decode steps and the row-tile kernel.
TEST(CudaAttention, RingCacheOfASlidingWindow) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const std::vector<int64_t> steps = {37, 5, 1, 1, 64, 1, -64, -64, -64, -64, 1, 9, 1, 64, 1};
    check_attention(be, {"gpt-oss sliding ring", 64, 8, 64, 0.125f, 128, true, 0.0f, 2.0f, steps, 2e-6, KvType::f32,
                         128 + 64});
    check_attention(be, {"gpt-oss sliding ring f16", 64, 8, 64, 0.125f, 128, true, 0.0f, 2.0f, steps, 2e-6,
                         KvType::f16, 128 + 64});
    check_attention(be, {"4/2x64 window 16 ring q8_0", 4, 2, 64, 0.125f, 16, false, 0.0f, 2.0f,
                         {7, 9, 1, 1, 1, 21, 1, 40, 1, 30, 1}, 2e-6, KvType::q8_0, 16 + 40});
    // A window of 1024 reads through the tile kernel (f16: gemma 4's sliding layers, 16 / 8 heads of 256).
    std::vector<int64_t> long_steps(24, -64);
    long_steps.insert(long_steps.end(), {1, 9, 1, 64, 1});
    check_attention(be, {"gemma4 sliding ring f16", 16, 8, 256, 1.0f, 1024, false, 0.0f, std::sqrt(3.0f), long_steps,
                         2e-5, KvType::f16, 1024 + 64});
    // 600-row chunks over a window of 100 take the row-tile kernel.
    check_attention(be, {"2/1x48 row tiles window 100 ring", 2, 1, 48, 1.0f / std::sqrt(48.0f), 100, true, 0.0f, 2.0f,
                         {601, 1, 600, 1}, 2e-6, KvType::f16, 100 + 601});
}

TEST(CudaAttention, BadShapesThrow) {
    ZINC_REQUIRE_GPU();
    auto gpu = zinc::backend::make_cuda_backend(0);
    auto kv = gpu->alloc_kv(128, 4);
    Act q = gpu->alloc(1, 128), o = gpu->alloc(1, 128);
    EXPECT_THROW(gpu->attention(q, kv, 0, AttentionParams{1, 1, 64, 1.0f}, o), std::invalid_argument);
    AttentionParams neg{1, 1, 128, 1.0f};
    neg.window = -1;
    EXPECT_THROW(gpu->attention(q, kv, 0, neg, o), std::invalid_argument);
    EXPECT_THROW(gpu->attention(q, kv, 4, AttentionParams{1, 1, 128, 1.0f}, o), std::out_of_range);
    const F32Vector two(random_floats(2), "attn_sinks.weight");
    const Weight w = gpu->load_weight(two.info);
    AttentionParams sinks{1, 1, 128, 1.0f};
    sinks.sinks = &w;  // 2 sinks for 1 head
    EXPECT_THROW(gpu->attention(q, kv, 0, sinks, o), std::invalid_argument);
    auto kv544 = gpu->alloc_kv(544, 4);
    Act q544 = gpu->alloc(1, 544), o544 = gpu->alloc(1, 544);
    EXPECT_THROW(gpu->attention(q544, kv544, 0, AttentionParams{1, 1, 544, 1.0f}, o544), std::invalid_argument);
    // q8_0 blocks of 32 values: a width and a head size that are multiples of 32.
    EXPECT_THROW(gpu->alloc_kv(KvLayer{nullptr, nullptr, 48, 4, KvType::q8_0, KvType::f16}), std::invalid_argument);
    auto q8 = gpu->alloc_kv(KvLayer{nullptr, nullptr, 96, 4, KvType::f16, KvType::q8_0});
    Act q96 = gpu->alloc(1, 96), o96 = gpu->alloc(1, 96);
    EXPECT_THROW(gpu->attention(q96, q8, 0, AttentionParams{2, 2, 48, 1.0f}, o96), std::invalid_argument);
    // A ring needs a window that, with the rows, fits in it.
    auto ring = gpu->alloc_kv(KvLayer{nullptr, nullptr, 128, 8, KvType::f16, KvType::f16, true});
    EXPECT_THROW(gpu->attention(q, ring, 20, AttentionParams{1, 1, 128, 1.0f}, o), std::out_of_range);
    AttentionParams wide{1, 1, 128, 1.0f};
    wide.window = 9;
    EXPECT_THROW(gpu->attention(q, ring, 20, wide, o), std::out_of_range);
    wide.window = 8;
    gpu->attention(q, ring, 20, wide, o);  // fits: one row and the 7 before it
}

// ---------------------------------------------------------------- rope_kv_write (norms, RoPE and cache stores fused)


// The values of a GPU cache plane, decoded to f32 on the host.
std::vector<float> cache_values(const KvLayer& kv, bool k_plane) {
    const KvType t = k_plane ? kv.type_k : kv.type_v;
    const size_t n = size_t(kv.width * kv.capacity);
    std::vector<uint8_t> bytes(zinc::backend::kv_plane_bytes(t, kv.width, kv.capacity));
    EXPECT_EQ(cudaMemcpy(bytes.data(), k_plane ? kv.k : kv.v, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
        if (t == KvType::f32) {
            std::memcpy(&out[i], bytes.data() + 4 * i, 4);
        } else if (t == KvType::f16) {
            uint16_t h;
            std::memcpy(&h, bytes.data() + 2 * i, 2);
            out[i] = zinc::quant::fp16_to_fp32(h);
        } else {
            uint16_t d;
            std::memcpy(&d, bytes.data() + n + 2 * (i / 32), 2);
            out[i] = zinc::quant::fp16_to_fp32(d) * float(int8_t(bytes[i]));
        }
    }
    return out;
}

struct HeadCase {
    std::string name;
    int n_head, n_head_kv, head_dim;
    bool norm_q, norm_k, norm_v;
    RopeParams rope;
    KvType type;
    int64_t capacity;     // cache rows; a ring when below the last position
    std::vector<int64_t> steps;  // rows per call
};

// The fused op against the separate ops it is defined as, both on the GPU, over a sequence of calls into the same
// kind of cache: q, k and v as the ops leave them, and every cache value after each call. The norms and the store
// are the same arithmetic in the same order; the rotation may contract differently, so values agree within 2e-6
// relative (the rounding of a few float operations) and cached values within one step of their type (an f16 ulp;
// a q8_0 quantum) where a rounding lands the other way.
void check_rope_kv_write(Backends& be, const HeadCase& c) {
    zinc::backend::Backend& gpu = *be.gpu;
    SCOPED_TRACE(c.name);
    const int d = c.head_dim;
    const int64_t width = int64_t(c.n_head_kv) * d;
    int64_t total = 0;
    for (int64_t r : c.steps) total += r;
    const bool ring = c.capacity < total;
    const KvLayer spec{nullptr, nullptr, width, c.capacity, c.type, c.type, ring};
    KvLayer fused = gpu.alloc_kv(spec), separate = gpu.alloc_kv(spec);
    const F32Vector qw(random_floats(size_t(d)), "attn_q_norm.weight"), kw(random_floats(size_t(d)), "attn_k_norm.weight");
    const Weight qn = gpu.load_weight(qw.info), kn = gpu.load_weight(kw.info);
    HeadNorms norms{c.norm_q, c.norm_k, c.norm_v, &qn, &kn, 1e-6f};
    int64_t pos0 = 0;
    for (int64_t rows : c.steps) {
        const auto pos = positions(int32_t(pos0), rows);
        const auto qh = random_floats(size_t(rows * c.n_head * d)), kh = random_floats(size_t(rows * width)),
                   vh = random_floats(size_t(rows * width));
        Act q1 = gpu.alloc(rows, int64_t(c.n_head) * d), k1 = gpu.alloc(rows, width), v1 = gpu.alloc(rows, width);
        Act q2 = gpu.alloc(rows, q1.cols), k2 = gpu.alloc(rows, width), v2 = gpu.alloc(rows, width);
        gpu.upload(q1, qh);
        gpu.upload(k1, kh);
        gpu.upload(v1, vh);
        gpu.upload(q2, qh);
        gpu.upload(k2, kh);
        gpu.upload(v2, vh);
        gpu.rope_kv_write(q1, k1, v1, norms, d, pos, c.rope, fused, pos0);
        if (c.norm_q) gpu.rms_norm(q2, &qn, norms.eps, d, q2);
        if (c.norm_k) gpu.rms_norm(k2, &kn, norms.eps, d, k2);
        if (c.norm_v) gpu.rms_norm(v2, nullptr, norms.eps, d, v2);
        gpu.rope(q2, d, pos, c.rope);
        gpu.rope(k2, d, pos, c.rope);
        gpu.kv_write(separate, k2, v2, pos0);
        for (auto [a, b, what] : {std::tuple{&q1, &q2, "q"}, std::tuple{&k1, &k2, "k"}, std::tuple{&v1, &v2, "v"}}) {
            const auto x = be.get(gpu, *a), y = be.get(gpu, *b);
            for (size_t i = 0; i < x.size(); ++i)
                ASSERT_NEAR(x[i], y[i], 2e-6 * std::max(1.0f, std::fabs(y[i]))) << what << " " << i << " at " << pos0;
        }
        for (bool k_plane : {true, false}) {
            const auto x = cache_values(fused, k_plane), y = cache_values(separate, k_plane);
            for (size_t i = 0; i < x.size(); ++i) {
                float step = 2e-6f * std::max(1.0f, std::fabs(y[i]));
                if (c.type == KvType::f16) step = std::max(step, std::fabs(y[i]) / 1024.0f);
                if (c.type == KvType::q8_0) step = 0.05f;  // values of |x| <= ~5: a quantum of amax / 127
                ASSERT_NEAR(x[i], y[i], step) << (k_plane ? "K" : "V") << " cache value " << i << " at " << pos0;
            }
        }
        for (Act* a : {&q1, &k1, &v1, &q2, &k2, &v2}) gpu.free(*a);
        pos0 += rows;
    }
    gpu.free(fused);
    gpu.free(separate);
}

TEST(CudaRopeKvWrite, FusedEqualsTheSeparateOps) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const RopeParams plain{128, true, 1000000.0f, 1.0f};
    const std::vector<int64_t> steps = {7, 1, 1, 40, 1};
    for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
        const std::string n = std::string(" ") + zinc::backend::kv_type_name(t);
        check_rope_kv_write(be, {"qwen3-8b" + n, 32, 8, 128, true, true, false, plain, t, 64, steps});
        check_rope_kv_write(be, {"gpt-oss ring" + n, 64, 8, 64, false, false, false, gpt_oss_rope(), t, 24,
                                   {7, 1, 1, 20, 1, 9, 1}});
        RopeParams partial{128, true, 10000.0f, 1.0f};  // gemma 4's global layers: 512-wide heads, a quarter rotated
        check_rope_kv_write(be, {"gemma4 global" + n, 16, 2, 512, true, true, true, partial, t, 64, steps});
        check_rope_kv_write(be, {"gemma4 sliding" + n, 16, 8, 256, true, true, true, RopeParams{256, true, 10000.0f,
                                                                                                  1.0f},
                                   t, 64, steps});
    }
    // Adjacent pairs, and a head size that is not a multiple of 32 (f16; q8_0 blocks need 32).
    check_rope_kv_write(be, {"4/2x48 adjacent f16", 4, 2, 48, true, false, true, RopeParams{32, false, 10000.0f, 1.0f},
                               KvType::f16, 64, steps});
}

TEST(CudaRopeKvWrite, BadArgumentsThrow) {
    ZINC_REQUIRE_GPU();
    auto gpu = zinc::backend::make_cuda_backend(0);
    KvLayer kv = gpu->alloc_kv(KvLayer{nullptr, nullptr, 128, 8, KvType::f16, KvType::f16});
    Act q = gpu->alloc(2, 256), k = gpu->alloc(2, 128), v = gpu->alloc(2, 128), k1 = gpu->alloc(1, 128);
    const RopeParams rope{64, true, 10000.0f, 1.0f};
    const auto pos = positions(0, 2);
    EXPECT_THROW(gpu->rope_kv_write(q, k, v, {}, 128, positions(1, 2), rope, kv, 0), std::invalid_argument);
    EXPECT_THROW(gpu->rope_kv_write(q, k1, v, {}, 128, pos, rope, kv, 0), std::invalid_argument);
    EXPECT_THROW(gpu->rope_kv_write(q, k, k, {}, 128, pos, rope, kv, 0), std::invalid_argument);
    EXPECT_THROW(gpu->rope_kv_write(q, k, v, {}, 96, pos, rope, kv, 0), std::invalid_argument);
    EXPECT_THROW(gpu->rope_kv_write(q, k, v, {}, 128, positions(7, 2), rope, kv, 7), std::out_of_range);
    const F32Vector w64(random_floats(64), "attn_q_norm.weight");
    const Weight qn = gpu->load_weight(w64.info);
    EXPECT_THROW(gpu->rope_kv_write(q, k, v, HeadNorms{true, false, false, &qn, nullptr, 1e-6f}, 128, pos, rope, kv, 0),
                 std::invalid_argument);
    gpu->rope_kv_write(q, k, v, {}, 128, positions(6, 2), rope, kv, 6);  // the last two rows
}

// ---------------------------------------------------------------- rows of several sequences in one step

struct SeqRowsCase {
    std::string name;
    int n_head, n_head_kv, head_dim;
    float scale;
    KvType type;
    int64_t window = 0;
    bool sinks = false;
    std::vector<int64_t> lengths;  // the positions each sequence's cache holds before the step
    int64_t chunk = 1;             // rows of sequence 0 in the step (a prompt chunk); the others decode one row each
    double tol = 1e-5;
};

// A step of one prompt chunk and many decode rows, each sequence with a cache of its own (a ring of window + 64 rows
// under a window), through rope_kv_write and attention over ranges, against each range alone through the same ops
// into a second set of caches. rope_kv_write does the same arithmetic for a row either way: q, k, v and the caches
// are equal bit for bit. Attention splits the keys by the longest sequence in the step and by the row's own alone, so
// the online softmax merges in another order; each way is within the CacheTypes tolerances of the exact outputs, and
// the case's tolerance is twice those.
void check_sequence_rows(Backends& be, const SeqRowsCase& c) {
    zinc::backend::Backend& gpu = *be.gpu;
    SCOPED_TRACE(c.name);
    const int d = c.head_dim;
    const int64_t width = int64_t(c.n_head_kv) * d, q_cols = int64_t(c.n_head) * d, n_seq = int64_t(c.lengths.size());
    AttentionParams p{c.n_head, c.n_head_kv, d, c.scale};
    p.window = c.window;
    std::unique_ptr<F32Vector> sinks;
    Weight sg;
    if (c.sinks) {
        sinks = std::make_unique<F32Vector>(random_floats(size_t(c.n_head), -2.0f, 4.0f), "blk.0.attn_sinks.weight");
        sg = gpu.load_weight(sinks->info);
        p.sinks = &sg;
    }
    const RopeParams rope{d, true, 1000000.0f, 1.0f};
    const F32Vector kw(random_floats(size_t(d)), "attn_k_norm.weight");
    const Weight kn = gpu.load_weight(kw.info);
    const HeadNorms norms{false, true, false, nullptr, &kn, 1e-6f};

    // Sequence s's earlier positions, the same in both of its caches.
    std::vector<KvLayer> batch_kv, alone_kv;
    for (int64_t s = 0; s < n_seq; ++s) {
        const int64_t len = c.lengths[size_t(s)], cap = c.window > 0 ? c.window + 64 : len + c.chunk;
        const KvLayer spec{nullptr, nullptr, width, cap, c.type, c.type, c.window > 0};
        batch_kv.push_back(gpu.alloc_kv(spec));
        alone_kv.push_back(gpu.alloc_kv(spec));
        for (int64_t p0 = 0; p0 < len; p0 += 64) {
            const int64_t rows = std::min<int64_t>(64, len - p0);
            Act k = gpu.alloc(rows, width), v = gpu.alloc(rows, width);
            gpu.upload(k, random_floats(size_t(rows * width), -2.0f, 2.0f));
            gpu.upload(v, random_floats(size_t(rows * width)));
            gpu.kv_write(batch_kv.back(), k, v, p0);
            gpu.kv_write(alone_kv.back(), k, v, p0);
            gpu.free(k);
            gpu.free(v);
        }
    }
    // The step: sequences 1, 2, ..., with sequence 0's chunk in the middle.
    std::vector<int64_t> order;
    for (int64_t s = 1; s < n_seq; ++s) order.push_back(s);
    order.insert(order.begin() + std::ptrdiff_t(order.size() / 2), 0);
    std::vector<zinc::backend::AttentionRange> batch, alone;
    std::vector<int32_t> pos;
    for (int64_t s : order) {
        const int64_t rows = s == 0 ? c.chunk : 1, len = c.lengths[size_t(s)], first = int64_t(pos.size());
        for (int64_t t = 0; t < rows; ++t) pos.push_back(int32_t(len + t));
        batch.push_back({first, rows, len, &batch_kv[size_t(s)]});
        alone.push_back({first, rows, len, &alone_kv[size_t(s)]});
    }
    const int64_t T = int64_t(pos.size());
    const auto qh = random_floats(size_t(T * q_cols), -2.0f, 2.0f), kh = random_floats(size_t(T * width), -2.0f, 2.0f),
               vh = random_floats(size_t(T * width));
    Act q1 = gpu.alloc(T, q_cols), k1 = gpu.alloc(T, width), v1 = gpu.alloc(T, width), o1 = gpu.alloc(T, q_cols);
    Act q2 = gpu.alloc(T, q_cols), k2 = gpu.alloc(T, width), v2 = gpu.alloc(T, width), o2 = gpu.alloc(T, q_cols);
    for (auto [a, h] : {std::pair{&q1, &qh}, {&k1, &kh}, {&v1, &vh}, {&q2, &qh}, {&k2, &kh}, {&v2, &vh}})
        gpu.upload(*a, *h);
    const std::vector<float> nan(size_t(T * q_cols), std::numeric_limits<float>::quiet_NaN());
    gpu.upload(o1, nan);
    gpu.upload(o2, nan);

    gpu.rope_kv_write(q1, k1, v1, norms, d, pos, rope, batch);
    gpu.attention(q1, batch, p, o1);
    for (const zinc::backend::AttentionRange& r : alone) {
        Act qr = Backend::rows_of(q2, r.first, r.rows), kr = Backend::rows_of(k2, r.first, r.rows);
        Act vr = Backend::rows_of(v2, r.first, r.rows), orow = Backend::rows_of(o2, r.first, r.rows);
        gpu.rope_kv_write(qr, kr, vr, norms, d, std::span<const int32_t>(pos).subspan(size_t(r.first), size_t(r.rows)),
                          rope, *r.kv, r.pos0);
        gpu.attention(qr, *r.kv, r.pos0, p, orow);
    }
    for (auto [a, b, what] : {std::tuple{&q1, &q2, "q"}, std::tuple{&k1, &k2, "k"}, std::tuple{&v1, &v2, "v"}})
        EXPECT_EQ(be.get(gpu, *a), be.get(gpu, *b)) << what;
    for (int64_t s = 0; s < n_seq; ++s)
        for (bool k_plane : {true, false})
            EXPECT_EQ(cache_values(batch_kv[size_t(s)], k_plane), cache_values(alone_kv[size_t(s)], k_plane))
                << "sequence " << s << (k_plane ? " K" : " V");
    const double err = max_err(be.get(gpu, o1), be.get(gpu, o2));
    EXPECT_LE(err, c.tol);
    std::cout << "  rows of " << n_seq << " sequences, " << c.name << ": max difference " << err << "\n";
    for (Act* a : {&q1, &k1, &v1, &o1, &q2, &k2, &v2, &o2}) gpu.free(*a);
    for (KvLayer& kv : batch_kv) gpu.free(kv);
    for (KvLayer& kv : alone_kv) gpu.free(kv);
}

TEST(CudaSequenceRows, OneStepOfManySequencesEqualsEachAlone) {
    ZINC_REQUIRE_GPU();
    Backends be;
    const float s128 = 1.0f / std::sqrt(128.0f);
    const std::vector<int64_t> lengths = {40, 1, 5, 100, 300, 1500, 17, 2, 700, 3000, 64, 129};
    for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
        const std::string n = std::string(" ") + zinc::backend::kv_type_name(t);
        check_sequence_rows(be, {"qwen3-8b" + n, 32, 8, 128, s128, t, 0, false, lengths, 7});
        check_sequence_rows(be, {"qwen3-8b decode only" + n, 32, 8, 128, s128, t, 0, false, {3, 2000, 9, 60}, 1});
        check_sequence_rows(be, {"gpt-oss sliding ring" + n, 64, 8, 64, 0.125f, t, 128, true, lengths, 20});
        check_sequence_rows(be, {"gemma4 global" + n, 16, 2, 512, 1.0f, t, 0, false, {30, 1, 2100, 200}, 3, 8e-5});
        check_sequence_rows(be, {"gemma4 sliding" + n, 16, 8, 256, 1.0f, t, 1024, false, {1200, 2, 3000}, 1, 4e-5});
    }
}

}  // namespace
