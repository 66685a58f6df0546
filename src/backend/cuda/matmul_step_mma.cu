// A decode step's matmul on tensor cores: out[t][o] = W[o] . x[t] for the rows of a step of many sequences (from
// past what the matvec of several rows takes up to kStepMaxRows), W of Q4_K, Q6_K, Q8_0 or MXFP4, x the step's Q8_1
// rows; and the same for the (token, expert) pairs of a MoE step, sorted by expert into groups (moe_step_mma): a
// block takes one group's pairs as its tokens and that group's expert as its weights.
// Each weight and activation enters an int8 mma.sync as the integer it is (a Q4_K nibble, a Q6_K quant less 32, a
// Q8_0 byte, MXFP4's doubled E2M1 value; the activation's int8), so every block's integer dot product is exact, as
// the dp4a matvecs' are, and the blocks' scales are then applied in f32. The scales are the matvec's; the f32 products
// they enter are grouped otherwise (a Q4_K block's (s d_x) (d sc) less (dmin m) (d_x sum), with d_x sum made once per
// activation block by quantize_q8_1), and a row's blocks are added in ascending order by the thread that holds the
// output, so a value is within a few f32 roundings of that row's matvec, far inside the activations' own Q8_1
// rounding.
//
// Tiles: a block of 8 warps, WM x WN, takes 16 WM weight rows and 8 NT WN tokens, warp w the 16 rows 16 (w % WM)
// against the 8 NT tokens 8 NT (w / WM). A tile of 8 tokens has WN = 1, so that its 128 rows' bytes are unpacked and
// their scales made once; larger tiles have WN = 2, more warps of shorter work for as many rows. A row's values go
// through in steps of 256 (a K-quant super-block, eight 32-value blocks): each step's weights, the activations'
// quants and their scales are copied into shared memory with cp.async, kPipeline - 1 steps ahead of the products. The
// weights are asked for before the kernel waits for the one before it (no kernel writes weights).
//
// The k order inside an mma is free, as long as A and B share it: k = 4t .. 4t + 3 of a fragment hold a block's
// values 8t .. 8t + 3, k = 16 + 4t .. its values 8t + 4 .. 8t + 7, so a lane loads 8 contiguous bytes of each.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_row.cuh"
#include "backend/cuda/mma.cuh"

namespace zinc::backend::cuda {
namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
template <int WN>
constexpr int BM = 16 * (kWarps / WN);  // weight rows of a block
constexpr int kStepBlocks = 8;    // 32-value blocks of a row per step
constexpr int kPipeline = 3;      // steps in shared memory at a time
constexpr int kMinSplitSteps = 2;  // the fewest steps of a row a split takes
constexpr int kQsBytes = 32;  // the quants of a Q8_1 block, the first bytes of its BlockQ8_1f
// A token's quants of a step in shared memory, kActStride apart: 72 words, 8 banks on from the token before, so the
// 8-byte loads of a half-warp's B fragments (tokens g = 0..3, words 2t, 2t + 1) fall in 32 different banks.
constexpr int kActStride = kStepBlocks * kQsBytes + 32;
// A token's scales of a step: (d, d sum) of each of its blocks, as quantize_q8_1 wrote them, kScaleStride apart: 20
// words, so that the 16-byte loads of a quarter-warp (tokens 2t + c, t = 0..3) fall in different banks.
constexpr int kScaleBytes = kStepBlocks * int(sizeof(float2));
constexpr int kScaleStride = kScaleBytes + 16, kScaleFloats = kScaleStride / 4;

// The 32-value block types end a row whose blocks are not a whole number of steps with a shorter step (gpt-oss's 2880
// values: 90 blocks, the last step 2 of them; Gemma 4's 704: 22); the K-quants' rows are whole super-blocks, 8 blocks.
template <int T>
constexpr bool kBlock32 = T == kQ8_0 || T == kMXFP4;

__device__ __forceinline__ void copy_8_async(void* dst, const void* src) {
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(src) : "memory");
}

// The pairs of a MoE step sorted by expert, for moe_step_mma: a block takes group blockIdx.y (of *n_groups) of
// `groups`, whose pairs pairs[first ..] read activation row pair / x_div and write output row pair, and whose expert's
// weights start expert * expert_bytes in.
struct StepGroups {
    const PairGroup* groups = nullptr;
    const int32_t* n_groups = nullptr;
    const int32_t* pairs = nullptr;
    int x_div = 1;
    size_t expert_bytes = 0;
};

// A weight row's step in shared memory: the 16-byte pieces that hold its bytes, copied whole, so that the step starts
// m bytes in (m: its address modulo 16; 0 for Q4_K's 144-byte super-blocks). Rows are kRowStride apart,
// room for m and the step, and a stride whose words fall 8 banks on (Q4_K: 160 bytes; Q8_0: 288) or 4 back (Q6_K: 240)
// from the row before, so that the 8 rows g of a fragment's loads do not collide.
template <int T>
constexpr int kStepBytes = int(chunks_bytes<T>(kStepBlocks));
template <int T>
constexpr int kRowStride = (kStepBytes<T> + 30) / 16 * 16;

template <int T, int WN, int NT>
constexpr int kStageBytes = BM<WN> * kRowStride<T> + 8 * NT * WN * (kActStride + kScaleStride);

// The products of one step: the rows p[0] (row g) and p[1] (row g + 8) of the warp's 16, from their step's first
// byte; act, the warp's first token's quants of the step, xsc their scales (token n's block j: d at xsc[kScaleFloats n
// + 2 j], d sum after it).
// acc[nt][2 h + c]: row g + 8 h against token 8 nt + 2 t + c.
// blocks: the step's 32-value blocks (kStepBlocks but in a row's short last step); the products of the others are
// left out, since their weights in shared memory are not the row's.
template <int T, int NT>
__device__ __forceinline__ void step_products(const uint8_t* const (&p)[2], const uint8_t* act, const float* xsc, int g,
                                              int t, int blocks, float (&acc)[NT][4]) {
    constexpr uint32_t kLow = 0x0F0F0F0Fu;
    if constexpr (T == kQ4_K) {
        uint32_t hdr[2][4];
        load_16_bytes(p[0], hdr[0]);
        load_16_bytes(p[1], hdr[1]);
        float d[2], dmin[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            d[h] = f16_to_f32(uint16_t(hdr[h][0]));
            dmin[h] = f16_to_f32(uint16_t(hdr[h][0] >> 16));
        }
#pragma unroll
        for (int grp = 0; grp < 4; ++grp) {  // sub-blocks 2 grp (low nibbles) and 2 grp + 1 (high)
            const uint2 q0 = *reinterpret_cast<const uint2*>(p[0] + 16 + 32 * grp + 8 * t);
            const uint2 q1 = *reinterpret_cast<const uint2*>(p[1] + 16 + 32 * grp + 8 * t);
            const uint32_t lo[4] = {q0.x & kLow, q1.x & kLow, q0.y & kLow, q1.y & kLow};
            const uint32_t hi[4] = {(q0.x >> 4) & kLow, (q1.x >> 4) & kLow, (q0.y >> 4) & kLow, (q1.y >> 4) & kLow};
            float wsc[2][2], wm[2][2];  // [row h][sub-block]: d sc and dmin m
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const KScales k = k_group_scales(hdr[h], grp);
                wsc[h][0] = mul_rn(d[h], float(k.sc0));
                wsc[h][1] = mul_rn(d[h], float(k.sc1));
                wm[h][0] = mul_rn(dmin[h], float(k.m0));
                wm[h][1] = mul_rn(dmin[h], float(k.m1));
            }
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const uint8_t* xb = act + (8 * nt + g) * kActStride + 2 * grp * kQsBytes + 8 * t;
                const uint2 bl = *reinterpret_cast<const uint2*>(xb);
                const uint2 bh = *reinterpret_cast<const uint2*>(xb + kQsBytes);
                int cl[4] = {0, 0, 0, 0}, ch[4] = {0, 0, 0, 0};
                mma_16832_s8(cl, lo, bl.x, bl.y);
                mma_16832_s8(ch, hi, bh.x, bh.y);
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    // d and d sum of the token's blocks 2 grp and 2 grp + 1
                    const float4 x =
                        *reinterpret_cast<const float4*>(xsc + kScaleFloats * (8 * nt + 2 * t + c) + 4 * grp);
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        float a = acc[nt][2 * h + c];
                        a = fma_rn(mul_rn(float(cl[2 * h + c]), x.x), wsc[h][0], a);
                        a = fma_rn(mul_rn(float(ch[2 * h + c]), x.z), wsc[h][1], a);
                        a = fma_rn(-wm[h][0], x.y, a);
                        acc[nt][2 * h + c] = fma_rn(-wm[h][1], x.w, a);
                    }
                }
            }
        }
    } else if constexpr (T == kQ6_K) {
        // Block j = 4 hf + i of the super-block: its values 16 half .. 16 half + 15 (piece `half`) have low bits in
        // ql bytes 64 hf + 32 (i % 2) + 16 half + 0..15 (low nibbles for i < 2, high for i >= 2), high bits in bits
        // 2i, 2i + 1 of qh bytes 128 + 32 hf + 16 half + 0..15, and the int8 scale 2 j + half. A lane takes bytes
        // 4t .. 4t + 3 of each piece, the k of an m16n8k16 fragment.
        uint32_t sc[2][4];
        float dw[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            load_words_any_alignment(p[h] + 192, sc[h]);
            dw[h] = f16_to_f32(load_u16(p[h] + 208));
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            uint32_t ql0[2][2], ql1[2][2], qh[2][2];  // [half][row]
#pragma unroll
            for (int half = 0; half < 2; ++half)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    uint32_t v[1];
                    load_words_any_alignment(p[h] + 64 * hf + 16 * half + 4 * t, v);
                    ql0[half][h] = v[0];
                    load_words_any_alignment(p[h] + 64 * hf + 32 + 16 * half + 4 * t, v);
                    ql1[half][h] = v[0];
                    load_words_any_alignment(p[h] + 128 + 32 * hf + 16 * half + 4 * t, v);
                    qh[half][h] = v[0];
                }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int j = 4 * hf + i;
                uint32_t a[2][2];  // [half][row]: the quants less 32
#pragma unroll
                for (int half = 0; half < 2; ++half)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const uint32_t l = i % 2 == 0 ? ql0[half][h] : ql1[half][h];
                        const uint32_t lo = (i < 2 ? l : l >> 4) & kLow;
                        const uint32_t q = qh[half][h];
                        const uint32_t hb = (i < 2 ? q << (4 - 2 * i) : q >> (2 * i - 4)) & 0x30303030u;
                        a[half][h] = uint32_t(vsubss4(int(lo | hb), 0x20202020));
                    }
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const uint8_t* xb = act + (8 * nt + g) * kActStride + j * kQsBytes + 4 * t;
                    int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
                    mma_16816_s8(c0, a[0][0], a[0][1], *reinterpret_cast<const uint32_t*>(xb));
                    mma_16816_s8(c1, a[1][0], a[1][1], *reinterpret_cast<const uint32_t*>(xb + 16));
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const float xd = xsc[kScaleFloats * (8 * nt + 2 * t + c) + 2 * j];
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            // Scales 2j and 2j + 1: bytes 2 (i % 2) and 2 (i % 2) + 1 of word 2 hf + i / 2.
                            const uint32_t sw = sc[h][2 * hf + i / 2] >> (16 * (i % 2));
                            // |sc s| <= 128 * 32 * 16 * 127 each, so their sum (< 2^24) converts exactly.
                            const int s = int(int8_t(sw)) * c0[2 * h + c] + int(int8_t(sw >> 8)) * c1[2 * h + c];
                            acc[nt][2 * h + c] = fma_rn(mul_rn(dw[h], xd), float(s), acc[nt][2 * h + c]);
                        }
                    }
                }
            }
        }
    } else {  // Q8_0: 34-byte blocks, a half-precision d and 32 int8 quants; MXFP4: 17-byte blocks, an E8M0 scale
              // and 16 bytes of 4-bit indices into fp4_table (values 0-15 in the low nibbles, 16-31 in the high)
#pragma unroll 2
        for (int j = 0; j < kStepBlocks; ++j) {
            if (j >= blocks) break;
            uint32_t q[2][2];
            float dw[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                if constexpr (T == kQ8_0) {
                    load_words_any_alignment(p[h] + 34 * j + 2 + 8 * t, q[h]);
                    dw[h] = f16_to_f32(load_u16(p[h] + 34 * j));
                } else {
                    // Values 8t .. 8t + 7: the low nibbles of bytes 8t .. 8t + 7 for t < 2, else the high nibbles of
                    // bytes 8 (t - 2) ...
                    uint32_t b[2];
                    load_words_any_alignment(p[h] + 17 * j + 1 + 8 * (t % 2), b);
#pragma unroll
                    for (int i = 0; i < 2; ++i) {
                        int lo, hi;
                        table16_lookup(b[i], fp4_table(), lo, hi);
                        q[h][i] = uint32_t(t < 2 ? lo : hi);
                    }
                    dw[h] = e8m0_half_to_f32(p[h][17 * j]);
                }
            }
            const uint32_t a[4] = {q[0][0], q[1][0], q[0][1], q[1][1]};
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const uint8_t* xb = act + (8 * nt + g) * kActStride + j * kQsBytes + 8 * t;
                const uint2 b = *reinterpret_cast<const uint2*>(xb);
                int c4[4] = {0, 0, 0, 0};
                mma_16832_s8(c4, a, b.x, b.y);
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const float xd = xsc[kScaleFloats * (8 * nt + 2 * t + c) + 2 * j];
#pragma unroll
                    for (int h = 0; h < 2; ++h)
                        acc[nt][2 * h + c] = fma_rn(mul_rn(dw[h], xd), float(c4[2 * h + c]), acc[nt][2 * h + c]);
                }
            }
        }
    }
}

// Split z = blockIdx.z of `splits` takes the steps [z n / splits, (z + 1) n / splits) of the n of a row and writes its
// sums to out + z * split_stride (the partial sums add_splits adds up, where splits > 1).
// G: the MoE form (StepGroups), whose blocks take a group each along y; otherwise tiles of BN tokens along y.
template <int T, int WN, int NT, bool G>
__global__ void __launch_bounds__(kThreads) matmul_step_kernel(const uint8_t* w, size_t row_bytes, int64_t n_out,
                                                               int64_t cols, const BlockQ8_1f* xq, const float2* xs,
                                                               int64_t n_act, float* out, int64_t out_stride,
                                                               int splits, int64_t split_stride, StepGroups gr) {
    constexpr int WM = kWarps / WN, BM = cuda::BM<WN>, BN = 8 * NT * WN;
    constexpr int kWeights = BM * kRowStride<T>, kPieces = kRowStride<T> / 16;
    constexpr int kActs = BN * kActStride;
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ int32_t pair_of[G ? BN : 1];
    const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int wm = warp % WM, wn = warp / WM;
    const int64_t o0 = int64_t(blockIdx.x) * BM, t0 = G ? 0 : int64_t(blockIdx.y) * BN, nb = cols / 32;
    const int all_steps = int((nb + kStepBlocks - 1) / kStepBlocks);
    const int first_step = int(int64_t(all_steps) * blockIdx.z / splits);
    const int n_steps = int(int64_t(all_steps) * (blockIdx.z + 1) / splits) - first_step;
    out += int64_t(blockIdx.z) * split_stride;
    int n_tokens = int(n_act - t0 < BN ? n_act - t0 : BN);
    if constexpr (G) {
        // The groups are the kernel before's output, so nothing, not even the weights, is asked for before them.
        begin_kernel();
        if (int(blockIdx.y) >= *gr.n_groups) return;
        const PairGroup pg = gr.groups[blockIdx.y];
        w += size_t(pg.expert) * gr.expert_bytes;
        n_tokens = pg.count < BN ? pg.count : BN;
        for (int i = tid; i < n_tokens; i += kThreads) pair_of[i] = gr.pairs[pg.first + i];
        __syncthreads();
    }
    // Tile token tok's activation row and output row.
    const auto act_row = [&](int tok) { return G ? int64_t(pair_of[tok] / gr.x_div) : t0 + tok; };
    const auto out_row = [&](int tok) { return G ? int64_t(pair_of[tok]) : t0 + tok; };
    const auto blocks_of = [&](int step) {
        const int64_t left = nb - int64_t(first_step + step) * kStepBlocks;
        return int(left < kStepBlocks ? left : kStepBlocks);
    };
    // Steps are counted from the split's first. A row's step starts m bytes past a 16-byte boundary, m the same for
    // every row where the rows are 16-byte aligned (always for Q4_K, has_step_mma); Q6_K's 210-byte super-blocks
    // (Gemma 4's 2816-value rows: 2310 bytes) and Q8_0's 34-byte blocks may leave each row its own.
    const auto step_bytes = [&](int step) { return chunks_bytes<T>(int64_t(first_step + step) * kStepBlocks); };
    const auto offset_of = [&](int64_t row, int64_t bytes) {
        return int((reinterpret_cast<uintptr_t>(w) + uint64_t(row) * row_bytes + uint64_t(bytes)) % 16);
    };
    const auto ask_weights = [&](int step) {
        if (step >= n_steps) return;
        uint8_t* dst = smem + (step % kPipeline) * kStageBytes<T, WN, NT>;
        const int64_t bytes = step_bytes(step);
        const int end = kBlock32<T> ? int(chunks_bytes<T>(blocks_of(step))) : kStepBytes<T>;
        for (int i = tid; i < BM * kPieces; i += kThreads) {
            const int r = i / kPieces, c = i % kPieces;
            if (o0 + r >= n_out) continue;
            const int m = offset_of(o0 + r, bytes);
            if (16 * c < m + end)
                copy_16_async(dst + r * kRowStride<T> + 16 * c,
                              w + (o0 + r) * int64_t(row_bytes) + bytes - m + 16 * c);
        }
    };
    const auto ask_acts = [&](int step) {
        if (step >= n_steps) return;
        uint8_t* dst = smem + (step % kPipeline) * kStageBytes<T, WN, NT> + kWeights;
        const int64_t first = int64_t(first_step + step) * kStepBlocks;  // the step's first block in a row
        const int blocks = blocks_of(step), qs_pieces = 2 * blocks;
        for (int i = tid; i < n_tokens * qs_pieces; i += kThreads) {
            const int tok = i / qs_pieces, c = i % qs_pieces;  // piece c % 2 of block c / 2
            copy_16_async(dst + tok * kActStride + 16 * c,
                          reinterpret_cast<const uint8_t*>(xq + act_row(tok) * nb + first + c / 2) + 16 * (c % 2));
        }
        if (blocks == kStepBlocks) {
            constexpr int kScalePieces = kScaleBytes / 16;
            for (int i = tid; i < n_tokens * kScalePieces; i += kThreads) {
                const int tok = i / kScalePieces, c = i % kScalePieces;
                copy_16_async(dst + kActs + tok * kScaleStride + 16 * c,
                              reinterpret_cast<const uint8_t*>(xs + act_row(tok) * nb + first) + 16 * c);
            }
        } else {  // a short last step: block by block, none past the row
            for (int i = tid; i < n_tokens * blocks; i += kThreads) {
                const int tok = i / blocks, c = i % blocks;
                copy_8_async(dst + kActs + tok * kScaleStride + 8 * c, xs + act_row(tok) * nb + first + c);
            }
        }
    };

    // The tokens past the last have zero quants and scales, so their (unstored) products stay finite.
    for (int buf = 0; buf < kPipeline; ++buf) {
        uint8_t* stage = smem + buf * kStageBytes<T, WN, NT> + kWeights;
        for (int i = tid; i < (BN - n_tokens) * kActStride / 16; i += kThreads)
            reinterpret_cast<uint4*>(stage + n_tokens * kActStride)[i] = make_uint4(0, 0, 0, 0);
        for (int i = tid; i < (BN - n_tokens) * kScaleStride / 16; i += kThreads)
            reinterpret_cast<uint4*>(stage + kActs + n_tokens * kScaleStride)[i] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int s = 0; s < kPipeline - 1; ++s) ask_weights(s);
    if constexpr (!G) begin_kernel();
#pragma unroll
    for (int s = 0; s < kPipeline - 1; ++s) {
        ask_acts(s);
        copies_commit();  // step s's activations, and with the first, the weights of steps 0 .. kPipeline - 2
    }

    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
    const int r0 = 16 * wm + g;
    for (int step = 0; step < n_steps; ++step) {
        copies_wait<kPipeline - 2>();  // this thread's copies of the step have landed ...
        __syncthreads();               // ... and every thread's; all are done with the step before
        ask_weights(step + kPipeline - 1);
        ask_acts(step + kPipeline - 1);
        copies_commit();
        const uint8_t* stage = smem + (step % kPipeline) * kStageBytes<T, WN, NT>;
        const int64_t bytes = step_bytes(step);
        const uint8_t* const p[2] = {stage + r0 * kRowStride<T> + offset_of(o0 + r0, bytes),
                                     stage + (r0 + 8) * kRowStride<T> + offset_of(o0 + r0 + 8, bytes)};
        step_products<T, NT>(p, stage + kWeights + 8 * NT * wn * kActStride,
                             reinterpret_cast<const float*>(stage + kWeights + kActs + 8 * NT * wn * kScaleStride), g,
                             t, blocks_of(step), acc);
    }

#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int tok = 8 * NT * wn + 8 * nt + 2 * t + e % 2;
            const int64_t o = o0 + r0 + 8 * (e / 2);
            if (tok < n_tokens && o < n_out) out[out_row(tok) * out_stride + o] = acc[nt][e];
        }
}

// out[t * out_stride + o] = the sum of part[(z * n_act + t) * n_out + o] over z = 0 .. splits - 1, in that order.
__global__ void add_splits_kernel(const float* part, int splits, int64_t n_out, int64_t n_act, float* out,
                                  int64_t out_stride) {
    begin_kernel();
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_out * n_act;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / n_out, o = i % n_out;
        float sum = part[i];
        for (int z = 1; z < splits; ++z) sum = __fadd_rn(sum, part[z * n_out * n_act + i]);
        out[t * out_stride + o] = sum;
    }
}

constexpr int tokens_per_tile(int64_t n_act) { return n_act <= 8 ? 8 : n_act <= 16 ? 16 : n_act <= 32 ? 32 : 64; }

template <int T, int WN, int NT>
cudaError_t launch_step(const uint8_t* w, size_t row_bytes, int64_t n_out, int64_t cols, const BlockQ8_1f* xq,
                        const float2* xs, int64_t n_act, float* out, int64_t out_stride, int splits, float* part,
                        cudaStream_t s) {
    constexpr int BN = 8 * NT * WN, BM = cuda::BM<WN>;
    const int64_t tiles = (n_act + BN - 1) / BN;
    if (tiles > 65535) return cudaErrorInvalidValue;
    constexpr size_t smem = size_t(kPipeline) * kStageBytes<T, WN, NT>;
    constexpr auto kernel = matmul_step_kernel<T, WN, NT, false>;
    if (cudaError_t e = allow_shared_memory<kernel>(smem); e != cudaSuccess) return e;
    const dim3 grid(unsigned((n_out + BM - 1) / BM), unsigned(tiles), unsigned(splits));
    if (splits == 1)
        return launch(kernel, grid, kThreads, smem, s, w, row_bytes, n_out, cols, xq, xs, n_act, out, out_stride, 1,
                      int64_t{0}, StepGroups{});
    if (cudaError_t e = launch(kernel, grid, kThreads, smem, s, w, row_bytes, n_out, cols, xq, xs, n_act, part, n_out,
                               splits, n_out * n_act, StepGroups{});
        e != cudaSuccess)
        return e;
    const int64_t n = n_out * n_act, blocks = (n + 255) / 256;
    return launch(add_splits_kernel, unsigned(blocks < 1024 ? blocks : 1024), 256, 0, s, part, splits, n_out, n_act,
                  out, out_stride);
}

template <int T>
cudaError_t launch_type(const uint8_t* w, size_t row_bytes, int64_t n_out, int64_t cols, const BlockQ8_1f* xq,
                        const float2* xs, int64_t n_act, float* out, int64_t out_stride, int splits, float* part,
                        cudaStream_t s) {
    switch (tokens_per_tile(n_act)) {
    case 8: return launch_step<T, 1, 1>(w, row_bytes, n_out, cols, xq, xs, n_act, out, out_stride, splits, part, s);
    case 16: return launch_step<T, 2, 1>(w, row_bytes, n_out, cols, xq, xs, n_act, out, out_stride, splits, part, s);
    case 32: return launch_step<T, 2, 2>(w, row_bytes, n_out, cols, xq, xs, n_act, out, out_stride, splits, part, s);
    default: return launch_step<T, 2, 4>(w, row_bytes, n_out, cols, xq, xs, n_act, out, out_stride, splits, part, s);
    }
}

// The MoE form: a block per (64 or 128 weight rows, group); groups past *n_groups leave at once.
template <int T, int WN, int NT>
cudaError_t launch_groups(const uint8_t* w, size_t row_bytes, int64_t n_out, int64_t cols, const BlockQ8_1f* xq,
                          const float2* xs, const StepGroups& gr, int64_t max_groups, float* out, int64_t out_stride,
                          cudaStream_t s) {
    constexpr int BN = 8 * NT * WN, BM = cuda::BM<WN>;
    constexpr size_t smem = size_t(kPipeline) * kStageBytes<T, WN, NT>;
    constexpr auto kernel = matmul_step_kernel<T, WN, NT, true>;
    if (cudaError_t e = allow_shared_memory<kernel>(smem); e != cudaSuccess) return e;
    const dim3 grid(unsigned((n_out + BM - 1) / BM), unsigned(max_groups), 1);
    return launch(kernel, grid, kThreads, smem, s, w, row_bytes, n_out, cols, xq, xs, int64_t{BN}, out, out_stride, 1,
                  int64_t{0}, gr);
}

template <int T>
cudaError_t launch_groups_type(const uint8_t* w, size_t row_bytes, int64_t n_out, int64_t cols, const BlockQ8_1f* xq,
                               const float2* xs, const StepGroups& gr, int64_t max_groups, int group_size, float* out,
                               int64_t out_stride, cudaStream_t s) {
    switch (tokens_per_tile(group_size)) {
    case 8: return launch_groups<T, 1, 1>(w, row_bytes, n_out, cols, xq, xs, gr, max_groups, out, out_stride, s);
    case 16: return launch_groups<T, 2, 1>(w, row_bytes, n_out, cols, xq, xs, gr, max_groups, out, out_stride, s);
    case 32: return launch_groups<T, 2, 2>(w, row_bytes, n_out, cols, xq, xs, gr, max_groups, out, out_stride, s);
    default: return launch_groups<T, 2, 4>(w, row_bytes, n_out, cols, xq, xs, gr, max_groups, out, out_stride, s);
    }
}

// Each block's (d, d (sum_lo + sum_hi)), as quantize_q8_1 writes them beside its blocks, for blocks quantized without.
__global__ void q8_1_scales_kernel(const BlockQ8_1f* xq, int64_t n_blocks, float2* xs) {
    begin_kernel();
    for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < n_blocks; b += int64_t(gridDim.x) * blockDim.x)
        xs[b] = make_float2(xq[b].d, __fmul_rn(xq[b].d, float(int(xq[b].sum_lo) + int(xq[b].sum_hi))));
}

}  // namespace

bool has_step_mma(int type, const void* w, size_t row_bytes, int64_t cols) {
    // Q4_K's products load its header and quants 16 and 8 bytes at a time; Q6_K's and Q8_0's read words at any
    // alignment and their f16 scales at even addresses (their blocks are of even size); MXFP4's read bytes and words.
    switch (type) {
    case kQ4_K: return aligned_rows(w, row_bytes) && cols % 256 == 0;
    case kQ6_K: return reinterpret_cast<uintptr_t>(w) % 2 == 0 && cols % 256 == 0;
    case kQ8_0: return reinterpret_cast<uintptr_t>(w) % 2 == 0 && cols % 32 == 0 && cols > 0;
    case kMXFP4: return cols % 32 == 0 && cols > 0;
    default: return false;
    }
}

int step_mma_splits(int64_t n_out, int64_t cols, int64_t n_act, int64_t target_blocks) {
    const int64_t bn = tokens_per_tile(n_act), bm = bn == 8 ? BM<1> : BM<2>;
    const int64_t blocks = (n_out + bm - 1) / bm * ((n_act + bn - 1) / bn);
    const int64_t most = cols / (32 * kStepBlocks) / kMinSplitSteps;
    const int64_t want = (target_blocks + blocks - 1) / blocks;
    return int(want < 1 || most < 1 ? 1 : want < most ? want : most);
}

cudaError_t matmul_step_mma(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols,
                            const BlockQ8_1f* xq, const float2* xs, int64_t n_act, float* out, int64_t out_stride,
                            int splits, float* part, cudaStream_t s) {
    if (!has_step_mma(type, w, row_bytes, cols) || !xs || splits < 1 || splits > 65535 || (splits > 1 && !part))
        return cudaErrorInvalidValue;
    if (n_out <= 0 || n_act <= 0) return cudaGetLastError();
    const auto* wb = static_cast<const uint8_t*>(w);
    switch (type) {
    case kQ4_K: return launch_type<kQ4_K>(wb, row_bytes, n_out, cols, xq, xs, n_act, out, out_stride, splits, part, s);
    case kQ6_K: return launch_type<kQ6_K>(wb, row_bytes, n_out, cols, xq, xs, n_act, out, out_stride, splits, part, s);
    case kQ8_0: return launch_type<kQ8_0>(wb, row_bytes, n_out, cols, xq, xs, n_act, out, out_stride, splits, part, s);
    default: return launch_type<kMXFP4>(wb, row_bytes, n_out, cols, xq, xs, n_act, out, out_stride, splits, part, s);
    }
}

bool has_moe_step_mma(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t cols) {
    // Every expert's rows placed as the first expert's are.
    return has_step_mma(type, w, row_bytes, cols) && (type != kQ4_K || expert_bytes % 16 == 0) && expert_bytes % 2 == 0;
}

cudaError_t q8_1_scales(const BlockQ8_1f* xq, int64_t n_blocks, float2* xs, cudaStream_t s) {
    if (n_blocks <= 0) return cudaGetLastError();
    const int64_t blocks = (n_blocks + 255) / 256;
    return launch(q8_1_scales_kernel, unsigned(blocks < 1024 ? blocks : 1024), 256, 0, s, xq, n_blocks, xs);
}

cudaError_t moe_step_mma(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                         const BlockQ8_1f* xq, const float2* xs, int x_div, const PairGroups& groups, int group_size,
                         float* out, int64_t out_stride, cudaStream_t s) {
    if (!has_moe_step_mma(type, w, row_bytes, expert_bytes, cols) || !xs || x_div < 1 || group_size < 1 ||
        group_size > 64 || groups.max_groups > 65535)
        return cudaErrorInvalidValue;
    if (n_out <= 0 || groups.max_groups <= 0) return cudaGetLastError();
    const auto* wb = static_cast<const uint8_t*>(w);
    const StepGroups gr{groups.groups, groups.n_groups, groups.pairs, x_div, expert_bytes};
    const int64_t mg = groups.max_groups;
    const auto run = [&](auto launch_for_type) {
        return launch_for_type(wb, row_bytes, n_out, cols, xq, xs, gr, mg, group_size, out, out_stride, s);
    };
    switch (type) {
    case kQ4_K: return run(launch_groups_type<kQ4_K>);
    case kQ6_K: return run(launch_groups_type<kQ6_K>);
    case kQ8_0: return run(launch_groups_type<kQ8_0>);
    default: return run(launch_groups_type<kMXFP4>);
    }
}

}  // namespace zinc::backend::cuda
