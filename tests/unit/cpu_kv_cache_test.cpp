// The KV cache's element types and sliding-window rings on the CPU backend: f16 and q8_0 hold exactly what f16
// rounding and ggml's Q8_0 quantizer make of the rows, attention over them stays close to attention over f32, a ring
// gives the same outputs as a full-length cache, and the sizes the memory plan counts follow the types.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/sizing_backend.h"
#include "gguf/tensor_type.h"
#include "quant/dequantize.h"
#include "quant/float_convert.h"
#include "quant/quantize.h"

namespace {

using zinc::backend::Act;
using zinc::backend::AttentionParams;
using zinc::backend::Backend;
using zinc::backend::KvLayer;
using zinc::backend::KvType;

std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

Act upload(Backend& be, const std::vector<float>& v, int64_t rows, int64_t cols) {
    Act a = be.alloc(rows, cols);
    be.upload(a, v);
    return a;
}

std::vector<float> download(Backend& be, const Act& a) {
    std::vector<float> v(size_t(a.size()));
    be.download(a, v);
    return v;
}

// With a window of 1 a query sees only its own position: the output is the cache's V row as the cache holds it.
std::vector<float> stored_v_row(Backend& be, KvType type, const std::vector<float>& v_row) {
    const int d = int(v_row.size());
    KvLayer kv = be.alloc_kv(KvLayer{nullptr, nullptr, d, 4, KvType::f32, type});
    const Act k = upload(be, random_floats(size_t(d), -1, 1, 1), 1, d), v = upload(be, v_row, 1, d);
    be.kv_write(kv, k, v, 2);
    const Act q = upload(be, random_floats(size_t(d), -1, 1, 2), 1, d);
    Act out = be.alloc(1, d);
    AttentionParams p{1, 1, d, 1.0f};
    p.window = 1;
    be.attention(q, kv, 2, p, out);
    return download(be, out);
}

TEST(KvCache, F16AndQ8_0HoldTheRoundedRows) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    // Values across many magnitudes, with a zero block (scale 0) for q8_0.
    std::vector<float> row = random_floats(128, -3, 3, 7);
    for (int i = 0; i < 32; ++i) row[size_t(i)] *= std::pow(10.0f, float(i % 8 - 4));
    std::fill(row.begin() + 64, row.begin() + 96, 0.0f);

    std::vector<float> want(row.size());
    for (size_t i = 0; i < row.size(); ++i) want[i] = zinc::quant::fp16_to_fp32(zinc::quant::fp32_to_fp16(row[i]));
    EXPECT_EQ(stored_v_row(*cpu, KvType::f16, row), want);

    std::vector<uint8_t> blocks(row.size() / 32 * 34);
    zinc::quant::quantize_row(zinc::gguf::TensorType::Q8_0, row.data(), blocks.data(), row.size());
    zinc::quant::dequantize_row(zinc::gguf::TensorType::Q8_0, blocks.data(), want.data(), row.size());
    EXPECT_EQ(stored_v_row(*cpu, KvType::q8_0, row), want);

    EXPECT_EQ(stored_v_row(*cpu, KvType::f32, row), row);
}

// Attention at Qwen3-8B's head geometry over 300 positions: outputs are convex combinations of V rows in [-1, 1),
// and the cache's rounding moves them by about its relative precision (f16 2^-11, q8_0 1/254 of a block's largest
// X
TEST(KvCache, AttentionOverF16AndQ8_0StaysCloseToF32) {
    auto cpu = zinc::backend::make_cpu_backend(2);
    const int n_head = 32, n_kv = 8, d = 128, T = 300;
    const int64_t width = n_kv * d;
    const Act k = upload(*cpu, random_floats(size_t(T * width), -2, 2, 3), T, width);
    const Act v = upload(*cpu, random_floats(size_t(T * width), -1, 1, 4), T, width);
    const Act q = upload(*cpu, random_floats(size_t(T * n_head * d), -2, 2, 5), T, n_head * d);
    const AttentionParams p{n_head, n_kv, d, 1.0f / std::sqrt(float(d))};
    std::vector<float> ref;
    for (const KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
        KvLayer kv = cpu->alloc_kv(KvLayer{nullptr, nullptr, width, T, t, t});
        cpu->kv_write(kv, k, v, 0);
        Act out = cpu->alloc(T, n_head * d);
        cpu->attention(q, kv, 0, p, out);
        const std::vector<float> got = download(*cpu, out);
        if (t == KvType::f32) {
            ref = got;
            continue;
        }
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - ref[i])));
        std::printf("  %s cache: largest difference from f32 %.2e\n", zinc::backend::kv_type_name(t), worst);
        EXPECT_LE(worst, t == KvType::f16 ? 2e-3 : 3e-2) << zinc::backend::kv_type_name(t);
        EXPECT_GT(worst, 0.0) << "the cache did not round";
    }
}

// Steps of prefill chunks and decode rows over a window of 16, the ring holding the window and the largest step:
// position p in row p % capacity gives the same outputs, bit for bit, as a full-length cache.
TEST(KvCache, RingGivesTheFullCachesOutputs) {
    auto cpu = zinc::backend::make_cpu_backend(2);
    const int n_head = 4, n_kv = 2, d = 32, window = 16, widest = 20;
    const int64_t width = n_kv * d;
    const std::vector<int64_t> steps = {7, 9, 1, 1, 20, 1, 3, 20, 20, 1, 1, 13, 1};
    int64_t total = 0;
    for (int64_t s : steps) total += s;
    for (const KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
        KvLayer full = cpu->alloc_kv(KvLayer{nullptr, nullptr, width, total, t, t});
        KvLayer ring = cpu->alloc_kv(KvLayer{nullptr, nullptr, width, window + widest, t, t, true});
        AttentionParams p{n_head, n_kv, d, 0.2f};
        p.window = window;
        int64_t pos = 0;
        uint32_t seed = 10;
        for (int64_t T : steps) {
            const Act k = upload(*cpu, random_floats(size_t(T * width), -2, 2, seed++), T, width);
            const Act v = upload(*cpu, random_floats(size_t(T * width), -1, 1, seed++), T, width);
            const Act q = upload(*cpu, random_floats(size_t(T * n_head * d), -2, 2, seed++), T, n_head * d);
            cpu->kv_write(full, k, v, pos);
            cpu->kv_write(ring, k, v, pos);
            Act a = cpu->alloc(T, n_head * d), b = cpu->alloc(T, n_head * d);
            cpu->attention(q, full, pos, p, a);
            cpu->attention(q, ring, pos, p, b);
            ASSERT_EQ(download(*cpu, a), download(*cpu, b)) << zinc::backend::kv_type_name(t) << " at " << pos;
            pos += T;
        }
    }
}

// One attention over the rows of several sequences (decode rows, a prompt chunk, each with its own cache, a ring among
// them) gives each sequence's outputs bit for bit as its attention alone, whatever the threads and so the way the
// work is split (by sequence, or by groups of heads).
TEST(KvCache, RangesOfSequencesEqualEachAlone) {
    const int n_head = 8, n_kv = 4, d = 32;
    const int64_t width = n_kv * d;
    struct Seq {
        int64_t rows, pos0;
        KvType type;
        int window;
    };
    const std::vector<Seq> seqs = {{1, 40, KvType::f16, 0}, {20, 0, KvType::f16, 0}, {1, 7, KvType::q8_0, 0},
                                   {3, 50, KvType::f32, 16}, {1, 0, KvType::f16, 0}};
    for (const int threads : {1, 2, 3}) {
        auto cpu = zinc::backend::make_cpu_backend(threads);
        int64_t total = 0;
        for (const Seq& s : seqs) total += s.rows;
        const Act q = upload(*cpu, random_floats(size_t(total * n_head * d), -2, 2, 21), total, n_head * d);
        AttentionParams p{n_head, n_kv, d, 0.3f};
        for (const int window : {0, 16}) {
            p.window = window;
            std::vector<KvLayer> kv;
            std::vector<zinc::backend::AttentionRange> ranges;
            Act alone = cpu->alloc(total, n_head * d);
            int64_t first = 0;
            uint32_t seed = 30;
            for (const Seq& s : seqs) {
                const bool ring = s.window > 0 && window > 0;
                const int64_t end = s.pos0 + s.rows;
                kv.push_back(cpu->alloc_kv(KvLayer{nullptr, nullptr, width, ring ? window + s.rows : end, s.type,
                                                   s.type, ring}));
                const Act k = upload(*cpu, random_floats(size_t(end * width), -2, 2, seed++), end, width);
                const Act v = upload(*cpu, random_floats(size_t(end * width), -1, 1, seed++), end, width);
                if (ring) {  // the positions a ring keeps: the window before the rows, then the rows
                    const int64_t from = std::max<int64_t>(0, s.pos0 - window);
                    cpu->kv_write(kv.back(), Backend::rows_of(k, from, end - from), Backend::rows_of(v, from, end - from),
                                  from);
                } else {
                    cpu->kv_write(kv.back(), k, v, 0);
                }
                Act out = Backend::rows_of(alone, first, s.rows);
                cpu->attention(Backend::rows_of(q, first, s.rows), kv.back(), s.pos0, p, out);
                ranges.push_back({first, s.rows, s.pos0, nullptr});
                first += s.rows;
            }
            for (size_t i = 0; i < seqs.size(); ++i) ranges[i].kv = &kv[i];
            Act together = cpu->alloc(total, n_head * d);
            cpu->attention(q, ranges, p, together);
            EXPECT_EQ(download(*cpu, together), download(*cpu, alone)) << threads << " threads, window " << window;
        }
    }
}

TEST(KvCache, BadRangesThrow) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    const int d = 32;
    KvLayer kv = cpu->alloc_kv(KvLayer{nullptr, nullptr, d, 8, KvType::f16, KvType::f16});
    const Act q = cpu->alloc(4, d);
    Act out = cpu->alloc(4, d);
    const AttentionParams p{1, 1, d, 1.0f};
    using R = zinc::backend::AttentionRange;
    const std::vector<std::vector<R>> bad = {{{0, 2, 0, &kv}, {1, 2, 0, &kv}},  // overlapping rows
                                             {{2, 3, 0, &kv}},                  // past q's rows
                                             {{0, 2, 0, nullptr}},              // no cache
                                             {{0, 4, 6, &kv}}};                 // past the cache
    for (const std::vector<R>& ranges : bad) EXPECT_ANY_THROW(cpu->attention(q, ranges, p, out));
}

// A paged layer is its pool's rows in its page table's order: written and read through pages scattered in the pool,
// attention gives a cache in one piece's outputs bit for bit; pages outside the pool or positions past the table
// are refused.
TEST(KvCache, PagedLayerReadsItsPagesInOrder) {
    auto cpu = zinc::backend::make_cpu_backend(2);
    const int n_head = 4, n_kv = 2, d = 32, T = 10;
    const int64_t width = n_kv * d;
    const Act k = upload(*cpu, random_floats(size_t(T * width), -2, 2, 41), T, width);
    const Act v = upload(*cpu, random_floats(size_t(T * width), -1, 1, 42), T, width);
    const Act q = upload(*cpu, random_floats(size_t(T * n_head * d), -2, 2, 43), T, n_head * d);
    const AttentionParams p{n_head, n_kv, d, 0.3f};
    for (const KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
        KvLayer whole = cpu->alloc_kv(KvLayer{nullptr, nullptr, width, T, t, t});
        KvLayer paged = cpu->alloc_kv(KvLayer{nullptr, nullptr, width, 16, t, t});  // a pool of 4 pages of 4
        const std::vector<int32_t> table = {3, 0, 2};
        paged.page_rows = 4;
        paged.pages = table.data();
        paged.n_pages = 3;
        cpu->kv_write(whole, k, v, 0);
        cpu->kv_write(paged, Backend::rows_of(k, 0, 6), Backend::rows_of(v, 0, 6), 0);  // over two pages
        cpu->kv_write(paged, Backend::rows_of(k, 6, 4), Backend::rows_of(v, 6, 4), 6);
        Act a = cpu->alloc(T, n_head * d), b = cpu->alloc(T, n_head * d);
        cpu->attention(q, whole, 0, p, a);
        cpu->attention(q, paged, 0, p, b);
        EXPECT_EQ(download(*cpu, a), download(*cpu, b)) << zinc::backend::kv_type_name(t);

        EXPECT_THROW(cpu->kv_write(paged, Backend::rows_of(k, 0, 3), Backend::rows_of(v, 0, 3), 10),
                     std::out_of_range);  // position 12 is past the table's 12
        const std::vector<int32_t> outside = {3, 4, 0};
        paged.pages = outside.data();
        Act out6 = Backend::rows_of(a, 0, 6);
        try {
            cpu->attention(Backend::rows_of(q, 0, 6), paged, 0, p, out6);
            ADD_FAILURE() << "a page outside the pool was read";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("a page outside the pool"), std::string::npos) << e.what();
        }
    }
}

// kv_copy_rows copies rows as the cache stores them (q8_0's scales with their values): with a window of 1 a query
// reads its own position's V row, so the copies' outputs are the originals' bit for bit.
TEST(KvCache, CopiedRowsReadAsTheOriginals) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    const int d = 64;
    const Act k = upload(*cpu, random_floats(size_t(8 * d), -2, 2, 51), 8, d);
    const Act v = upload(*cpu, random_floats(size_t(8 * d), -3, 3, 52), 8, d);
    const Act q = upload(*cpu, random_floats(size_t(4 * d), -2, 2, 53), 4, d);
    AttentionParams p{1, 1, d, 1.0f};
    p.window = 1;
    for (const KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
        KvLayer a = cpu->alloc_kv(KvLayer{nullptr, nullptr, d, 8, t, t});
        KvLayer b = cpu->alloc_kv(KvLayer{nullptr, nullptr, d, 6, t, t});
        cpu->kv_write(a, k, v, 0);
        cpu->kv_copy_rows(a, 2, b, 1, 4);
        Act from_a = cpu->alloc(4, d), from_b = cpu->alloc(4, d);
        cpu->attention(q, a, 2, p, from_a);
        cpu->attention(q, b, 1, p, from_b);
        EXPECT_EQ(download(*cpu, from_a), download(*cpu, from_b)) << zinc::backend::kv_type_name(t);
        cpu->kv_copy_rows(a, 0, a, 4, 4);  // within one layer
        cpu->attention(q, a, 4, p, from_b);
        cpu->attention(q, a, 0, p, from_a);
        EXPECT_EQ(download(*cpu, from_a), download(*cpu, from_b)) << zinc::backend::kv_type_name(t);
        EXPECT_ANY_THROW(cpu->kv_copy_rows(a, 0, a, 2, 4));  // overlapping
        EXPECT_ANY_THROW(cpu->kv_copy_rows(a, 4, b, 4, 4));  // past b
    }
}

TEST(KvCache, SizesFollowTheTypes) {
    EXPECT_EQ(zinc::backend::kv_plane_bytes(KvType::f32, 1024, 10), 40960u);
    EXPECT_EQ(zinc::backend::kv_plane_bytes(KvType::f16, 1024, 10), 20480u);
    EXPECT_EQ(zinc::backend::kv_plane_bytes(KvType::q8_0, 1024, 10), 10240u + 640u);  // 34 bytes per 32 values
    zinc::backend::MemoryUse use;
    auto sizing = zinc::backend::make_sizing_backend(use);
    KvLayer kv = sizing->alloc_kv(KvLayer{nullptr, nullptr, 1024, 10, KvType::f16, KvType::q8_0});
    EXPECT_EQ(use.cache, 20480u + 10880u);
    sizing->free(kv);
    EXPECT_EQ(use.cache, 0u);
    KvType t;
    EXPECT_TRUE(zinc::backend::parse_kv_type("q8_0", t));
    EXPECT_EQ(t, KvType::q8_0);
    EXPECT_FALSE(zinc::backend::parse_kv_type("q4_0", t));
}

TEST(KvCache, BadUsesThrow) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    EXPECT_THROW(cpu->alloc_kv(KvLayer{nullptr, nullptr, 48, 4, KvType::q8_0, KvType::f32}), std::invalid_argument);
    KvLayer ring = cpu->alloc_kv(KvLayer{nullptr, nullptr, 32, 8, KvType::f16, KvType::f16, true});
    const Act rows9 = cpu->alloc(9, 32), row = cpu->alloc(1, 32);
    EXPECT_THROW(cpu->kv_write(ring, rows9, rows9, 100), std::out_of_range);  // more rows than the ring holds
    cpu->kv_write(ring, row, row, 100);                                       // any position: it wraps
    Act out = cpu->alloc(1, 32);
    EXPECT_THROW(cpu->attention(row, ring, 100, AttentionParams{1, 1, 32, 1.0f}, out), std::out_of_range);
}

// rope_kv_write is its ops in turn (the CPU backend runs the base class's sequence; the CUDA backend's fused kernel is
// checked against that sequence on the GPU): the heads normalized as asked, rotated, and the cache rows written.
TEST(KvCache, RopeKvWriteIsItsOpsInTurn) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    const int d = 64, rows = 3;
    const auto qh = random_floats(4 * d * rows, -2, 2, 3), kh = random_floats(2 * d * rows, -2, 2, 4),
               vh = random_floats(2 * d * rows, -2, 2, 5), wh = random_floats(d, 0.5f, 1.5f, 6);
    zinc::gguf::TensorInfo wi;
    wi.name = "attn_q_norm.weight";
    wi.type = zinc::gguf::TensorType::F32;
    wi.n_dims = 1;
    wi.ne = {d, 1, 1, 1};
    wi.nbytes = d * sizeof(float);
    wi.n_elements = d;
    wi.data = reinterpret_cast<const uint8_t*>(wh.data());
    const zinc::backend::Weight w = cpu->load_weight(wi);
    const zinc::backend::RopeParams rope{32, true, 10000.0f, 1.0f};
    const std::vector<int32_t> pos = {5, 6, 7};
    for (KvType type : {KvType::f32, KvType::q8_0}) {
        const KvLayer spec{nullptr, nullptr, 2 * d, 16, type, type};
        KvLayer fused = cpu->alloc_kv(spec), separate = cpu->alloc_kv(spec);
        Act q1 = upload(*cpu, qh, rows, 4 * d), k1 = upload(*cpu, kh, rows, 2 * d), v1 = upload(*cpu, vh, rows, 2 * d);
        Act q2 = upload(*cpu, qh, rows, 4 * d), k2 = upload(*cpu, kh, rows, 2 * d), v2 = upload(*cpu, vh, rows, 2 * d);
        cpu->rope_kv_write(q1, k1, v1, zinc::backend::HeadNorms{true, false, true, &w, nullptr, 1e-6f}, d, pos, rope,
                           fused, 5);
        cpu->rms_norm(q2, &w, 1e-6f, d, q2);
        cpu->rms_norm(v2, nullptr, 1e-6f, d, v2);
        cpu->rope(q2, d, pos, rope);
        cpu->rope(k2, d, pos, rope);
        cpu->kv_write(separate, k2, v2, 5);
        EXPECT_EQ(download(*cpu, q1), download(*cpu, q2));
        EXPECT_EQ(download(*cpu, k1), download(*cpu, k2));
        EXPECT_EQ(download(*cpu, v1), download(*cpu, v2));
        EXPECT_NE(download(*cpu, q1), qh);  // the ops did change q
        // The cached rows, read back through attention with a window of 1 (each query sees only its own row).
        const Act probe = upload(*cpu, random_floats(4 * d * rows, -1, 1, 7), rows, 4 * d);
        Act o1 = cpu->alloc(rows, 4 * d), o2 = cpu->alloc(rows, 4 * d);
        AttentionParams p{4, 2, d, 0.125f};
        p.window = 1;
        cpu->attention(probe, fused, 5, p, o1);
        cpu->attention(probe, separate, 5, p, o2);
        EXPECT_EQ(download(*cpu, o1), download(*cpu, o2));
    }
    // Its arguments are checked as its ops check theirs.
    KvLayer kv = cpu->alloc_kv(KvLayer{nullptr, nullptr, 2 * d, 4, KvType::f16, KvType::f16});
    Act q = cpu->alloc(rows, 4 * d), k = cpu->alloc(rows, 2 * d), v = cpu->alloc(rows, 2 * d);
    EXPECT_THROW(cpu->rope_kv_write(q, k, v, {}, d, pos, rope, kv, 5), std::out_of_range);  // past the cache
    EXPECT_THROW(cpu->rope_kv_write(q, k, v, {}, d, pos, rope, kv, 0), std::invalid_argument);  // pos is not 0, 1, 2
    EXPECT_THROW(cpu->rope_kv_write(q, q, v, {}, d, pos, rope, kv, 5), std::invalid_argument);
}

// rope_kv_write over the ranges of several sequences is each range's rope_kv_write into its own cache; ranges that
// overlap, leave q, leave a row out, name no cache or do not follow the positions are refused.
TEST(KvCache, RopeKvWriteOfRangesIsEachRangeAlone) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    const int d = 32, rows = 5;
    const auto qh = random_floats(2 * d * rows, -2, 2, 8), kh = random_floats(d * rows, -2, 2, 9),
               vh = random_floats(d * rows, -2, 2, 10);
    const zinc::backend::RopeParams rope{32, true, 10000.0f, 1.0f};
    const std::vector<int32_t> pos = {7, 3, 4, 5, 0};  // sequence 0 at 7, sequence 1 at 3-5, sequence 2 at 0
    const KvLayer spec{nullptr, nullptr, d, 16, KvType::f16, KvType::f16};
    std::vector<KvLayer> together, alone;
    for (int s = 0; s < 3; ++s) {
        together.push_back(cpu->alloc_kv(spec));
        alone.push_back(cpu->alloc_kv(spec));
    }
    using R = zinc::backend::AttentionRange;
    const std::vector<R> ranges = {{0, 1, 7, &together[0]}, {1, 3, 3, &together[1]}, {4, 1, 0, &together[2]}};
    Act q1 = upload(*cpu, qh, rows, 2 * d), k1 = upload(*cpu, kh, rows, d), v1 = upload(*cpu, vh, rows, d);
    Act q2 = upload(*cpu, qh, rows, 2 * d), k2 = upload(*cpu, kh, rows, d), v2 = upload(*cpu, vh, rows, d);
    cpu->rope_kv_write(q1, k1, v1, {}, d, pos, rope, ranges);
    for (size_t i = 0; i < ranges.size(); ++i) {
        const R& r = ranges[i];
        Act q = Backend::rows_of(q2, r.first, r.rows), k = Backend::rows_of(k2, r.first, r.rows);
        Act v = Backend::rows_of(v2, r.first, r.rows);
        cpu->rope_kv_write(q, k, v, {}, d, std::span<const int32_t>(pos).subspan(size_t(r.first), size_t(r.rows)),
                           rope, alone[i], r.pos0);
    }
    EXPECT_EQ(download(*cpu, q1), download(*cpu, q2));
    EXPECT_EQ(download(*cpu, k1), download(*cpu, k2));
    // Each sequence's cache, read back through attention from every row.
    const Act probe = upload(*cpu, random_floats(2 * d * rows, -1, 1, 11), rows, 2 * d);
    Act o1 = cpu->alloc(rows, 2 * d), o2 = cpu->alloc(rows, 2 * d);
    const AttentionParams p{2, 1, d, 0.2f};
    std::vector<R> read_alone = ranges;
    for (size_t i = 0; i < read_alone.size(); ++i) read_alone[i].kv = &alone[i];
    cpu->attention(probe, ranges, p, o1);
    cpu->attention(probe, read_alone, p, o2);
    EXPECT_EQ(download(*cpu, o1), download(*cpu, o2));

    // Each a covering of the five rows but for one flaw.
    const std::vector<std::vector<R>> bad = {
        {{0, 2, 7, &together[0]}, {1, 3, 3, &together[1]}, {4, 1, 0, &together[2]}},  // overlapping rows
        {{0, 1, 7, &together[0]}, {1, 3, 3, &together[1]}, {4, 2, 0, &together[2]}},  // past q's rows
        {{0, 1, 7, &together[0]}, {1, 3, 3, nullptr}, {4, 1, 0, &together[2]}},       // no cache
        {{0, 1, 7, &together[0]}, {1, 3, 4, &together[1]}, {4, 1, 0, &together[2]}},  // not positions 4, 5, 6
        {{0, 1, 7, &together[0]}, {1, 3, 3, &together[1]}},                            // row 4 in none
    };
    for (const std::vector<R>& b : bad) EXPECT_ANY_THROW(cpu->rope_kv_write(q1, k1, v1, {}, d, pos, rope, b));
}

}  // namespace
