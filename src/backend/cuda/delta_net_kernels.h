// Host-side launchers of the CUDA backend's gated delta-net kernels (delta_net.cu), and the per-thread and per-block
// bodies of those kernels that the tests also run on the host (tests/cuda/cuda_delta_net_test.cpp): the conv of one
// channel, the key rows of one sequential-recurrence thread, and the phases of the chunked (WY) form. Plain C++17 for
// nvcc; each launcher enqueues on `s` and returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul_kernels.h"

#ifdef __CUDACC__
#define ZINC_DN_HD __host__ __device__ __forceinline__
#define ZINC_DN_UNROLL _Pragma("unroll")
#else
#define ZINC_DN_HD inline
#define ZINC_DN_UNROLL
#endif

namespace zinc::backend::cuda {

// ---- launchers (delta_net.cu) ----

// out[i] = x[i] * sigmoid(gate[per_row ? i / cols : i]) for the rows * cols values.
cudaError_t sigmoid_mul(const float* x, const float* gate, int64_t rows, int64_t cols, bool per_row, float* out,
                        cudaStream_t s);
// out[i] += a[i] + b[i] * sigmoid(gate[per_row ? i / cols : i]), each step rounded as sigmoid_mul and add round it.
cudaError_t shared_expert_add(const float* a, const float* b, const float* gate, int64_t rows, int64_t cols,
                              bool per_row, float* out, cudaStream_t s);
cudaError_t fill(float* a, float value, int64_t n, cudaStream_t s);
// out[t][gi * width + i] = src[t][gi * group + offset + i], width = out_cols / (src_cols / group).
cudaError_t slice_groups(const float* src, int64_t rows, int64_t src_cols, int64_t group, int64_t offset, float* out,
                         int64_t out_cols, cudaStream_t s);
// beta = sigmoid(b), g = softplus(a + dt_bias) * ssm_a over rows of n heads.
cudaError_t delta_net_gates(const float* a, const float* b, const float* dt_bias, const float* ssm_a, int64_t rows,
                            int64_t n, float* g, float* beta, cudaStream_t s);

// The conv kernel's filter width is a template parameter: 1 <= K <= kMaxConvK.
constexpr int kMaxConvK = 8;
// x, out: T rows of C; state: K-1 rows of C; w: C rows of K. `aliased`: out is x (each channel then runs as one
// sequential thread, reading every input before overwriting it).
cudaError_t conv1d_causal(const float* x, float* state, const float* w, int64_t T, int64_t C, int K, bool silu,
                          bool aliased, float* out, cudaStream_t s);

// Limits of the recurrence kernels: d_k <= kMaxKeyDim; chunks of at most kMaxChunk tokens (shared-memory tiles).
constexpr int kMaxKeyDim = 256;
constexpr int kMaxChunk = 64;
// The chunked form runs at most this many chunks per pair of launches, which bounds its scratch.
constexpr int64_t kSegmentChunks = 64;

// The recurrence's tensors (device pointers) and dimensions, as DeltaNetParams and the Act shapes describe them.
struct DeltaNetArgs {
    const float *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
    float* state = nullptr;
    float* out = nullptr;
    int64_t T = 0;
    int n_k = 0, n_v = 0, d_k = 0, d_v = 0;
    bool tiled = true;
    float scale = 1.0f;
    // Rows of several sequences (T = 1, `rows` of them; delta_net_step): row r's state is states[r] (device), its
    // q, k and v are in_stride values after row r - 1's, its g, beta and out one row of n_v, n_v and n_v d_v after.
    float* const* states = nullptr;
    int64_t rows = 1, in_stride = 0;
};

// Token by token: one thread per (value head, value column, quarter of the key rows); the state stays in
// registers for all T tokens.
cudaError_t delta_net(const DeltaNetArgs& a, cudaStream_t s);

// What Backend::delta_net_step reads and writes besides DeltaNetArgs's tensors (device pointers): the projections
// qkv, z, a and b, the conv's filters and state, the gates' and the gated norm's weights, and the scratch conv, g and
// beta that DeltaNetArgs's q, k, v, g and beta point into.
struct DeltaNetStepArgs {
    const float *qkv = nullptr, *z = nullptr, *a = nullptr, *b = nullptr;
    const float *conv_w = nullptr, *dt_bias = nullptr, *ssm_a = nullptr, *norm_w = nullptr;
    float *conv_state = nullptr, *conv = nullptr, *g = nullptr, *beta = nullptr;
    int K = 0;  // the conv's taps
    float eps = 0.0f;
    float* const* conv_states = nullptr;  // with DeltaNetArgs::states: row r's conv state (device)
};
bool delta_net_step_fits(int d_k, int K);
// The most Q8_1 blocks of a value head whose quantized output delta_net_step writes (value heads of up to 256 values).
constexpr int kMaxStepNormBlocks = 8;
// One token's delta_net_step (a.T = 1) in three launches: the gates, the conv of every channel and the L2 norms of the
// query and key heads in one; the recurrence (delta_net's kernel); the gated RMSNorm, with q8 (value heads of a whole
// number of 32-value blocks, at most kMaxStepNormBlocks; one row) also out's Q8_1 blocks, for the output
// projection's matvec. With a.states, the same three launches for a.rows rows of as many sequences, each row of
// qkv, z, a, b, conv, g, beta and out one after the other and every row with its own states.
// Every value is the one the separate kernels (delta_net_gates, conv1d_causal, l2_norm, delta_net, gated_rms_norm,
// quantize_q8_1) compute, bit for bit.
cudaError_t delta_net_step(const DeltaNetArgs& a, const DeltaNetStepArgs& st, BlockQ8_1f* q8, cudaStream_t s);

// The chunk length the kernels use for a requested chunk (> 0): at most kMaxChunk. The chunk only changes how the
// sums are rounded, so a longer one is run as chunks of kMaxChunk.
inline int dn_chunk_len(int chunk) { return chunk < kMaxChunk ? chunk : kMaxChunk; }
// Floats of the scratch buffer delta_net_chunked needs for T tokens.
size_t delta_net_chunked_scratch(int n_v, int64_t T, int chunk);
// The chunked (WY) form of the same recurrence, with a scratch buffer of delta_net_chunked_scratch floats.
cudaError_t delta_net_chunked(const DeltaNetArgs& a, int chunk, float* scratch, cudaStream_t s);

// ---- logic shared by the kernels and the host tests ----

ZINC_DN_HD int64_t dn_min(int64_t a, int64_t b) { return a < b ? a : b; }

// The key head that value head h reads: GGUF tiled order (h mod n_k) or HF order (h / (n_v / n_k)).
ZINC_DN_HD int dn_key_head(bool tiled, int n_k, int n_v, int h) { return tiled ? h % n_k : h / (n_v / n_k); }
// The m-th value head (m < n_v / n_k) that reads key head kh; the inverse of dn_key_head.
ZINC_DN_HD int dn_value_head(bool tiled, int n_k, int n_v, int kh, int m) {
    return tiled ? kh + m * n_k : kh * (n_v / n_k) + m;
}

// slice_groups: the src offset of flat output element e.
ZINC_DN_HD int64_t dn_slice_src(int64_t e, int64_t out_cols, int64_t width, int64_t src_cols, int64_t group,
                                int64_t offset) {
    const int64_t t = e / out_cols, r = e % out_cols;
    return t * src_cols + (r / width) * group + offset + r % width;
}

ZINC_DN_HD float dn_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
ZINC_DN_HD float dn_silu(float x) { return x / (1.0f + expf(-x)); }
ZINC_DN_HD float dn_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }  // torch's threshold
// The log-decay gate g = softplus(a + dt_bias) * ssm_a of one value head.
ZINC_DN_HD float dn_decay_gate(float a, float dt_bias, float ssm_a) { return dn_softplus(a + dt_bias) * ssm_a; }

// conv1d_causal splits each channel's tokens into tiles of this many (one thread each). A thread of a later tile
// reads its K-1 preceding inputs from x, so a tile must be at least K-1 long; when out aliases x one thread must
// see the whole sequence. Grid rows are limited to 65535 tiles.
constexpr int64_t kConvTile = 16;
inline int64_t dn_conv_tile(int64_t T, int K, bool aliased) {
    if (aliased || T <= kConvTile) return T > 0 ? T : 1;
    int64_t tile = kConvTile > K - 1 ? kConvTile : K - 1;
    if ((T + tile - 1) / tile > 65535) tile = (T + 65534) / 65535;
    return tile;
}

// One thread of conv1d_causal: channel c over tokens [t_begin, t_end), with KM1 = K - 1 inputs of history in
// registers. seq[u] is state row u for u < K-1, else x row u - (K-1); out[t] = sum_j w[c][j] * seq[t + j] summed in
// j order as the CPU does. Only the thread of the first tile reads the channel's state, so it alone writes the new
// one: from its window when it covered all tokens, else from the last K-1 rows of x (not aliased then).
template <int KM1>
ZINC_DN_HD void dn_conv_channel(const float* x, float* state, const float* w, int64_t T, int64_t C, int64_t c,
                                int64_t t_begin, int64_t t_end, bool silu, float* out) {
    float wc[KM1 + 1];
    ZINC_DN_UNROLL
    for (int j = 0; j <= KM1; ++j) wc[j] = w[c * (KM1 + 1) + j];
    float win[KM1 > 0 ? KM1 : 1];
    ZINC_DN_UNROLL
    for (int j = 0; j < KM1; ++j) {
        const int64_t u = t_begin + j;
        win[j] = u < KM1 ? state[u * C + c] : x[(u - KM1) * C + c];
    }
    for (int64_t t = t_begin; t < t_end; ++t) {
        const float xt = x[t * C + c];
        float s = 0.0f;
        ZINC_DN_UNROLL
        for (int j = 0; j < KM1; ++j) s += wc[j] * win[j];
        s += wc[KM1] * xt;
        out[t * C + c] = silu ? dn_silu(s) : s;
        if constexpr (KM1 > 0) {
            ZINC_DN_UNROLL
            for (int j = 0; j + 1 < KM1; ++j) win[j] = win[j + 1];
            win[KM1 - 1] = xt;
        }
    }
    if (t_begin == 0) {
        const bool whole = t_end == T;
        ZINC_DN_UNROLL
        for (int j = 0; j < KM1; ++j) state[int64_t(j) * C + c] = whole ? win[j] : x[(T - KM1 + j) * C + c];
    }
}

// The sequential recurrence: kSeqSplit threads share value column j of a head, thread r owning key rows
// i = r + kSeqSplit * ii (ii < kRows); their partial sums are added across the group (butterfly, so every thread of
// the group gets the same bits).
constexpr int kSeqSplit = 4;
constexpr int kSeqThreads = 64;  // 16 value columns per block

template <int kRows>
ZINC_DN_HD void dn_seq_load(float (&s)[kRows], const float* S, int r, int j, bool valid, int d_k, int d_v) {
    ZINC_DN_UNROLL
    for (int ii = 0; ii < kRows; ++ii) {
        const int i = r + kSeqSplit * ii;
        s[ii] = valid && i < d_k ? S[int64_t(i) * d_v + j] : 0.0f;
    }
}
template <int kRows>
ZINC_DN_HD void dn_seq_store(const float (&s)[kRows], float* S, int r, int j, bool valid, int d_k, int d_v) {
    ZINC_DN_UNROLL
    for (int ii = 0; ii < kRows; ++ii) {
        const int i = r + kSeqSplit * ii;
        if (valid && i < d_k) S[int64_t(i) * d_v + j] = s[ii];
    }
}
// S *= decay, then this thread's part of m = S^T k.
template <int kRows>
ZINC_DN_HD float dn_seq_decay_read(float (&s)[kRows], int r, int d_k, const float* kt, float decay) {
    float m = 0.0f;
    ZINC_DN_UNROLL
    for (int ii = 0; ii < kRows; ++ii) {
        const int i = r + kSeqSplit * ii;
        if (i < d_k) {
            s[ii] *= decay;
            m += s[ii] * kt[i];
        }
    }
    return m;
}
// S += k d, then this thread's part of S^T q.
template <int kRows>
ZINC_DN_HD float dn_seq_write_out(float (&s)[kRows], int r, int d_k, const float* kt, const float* qt, float d) {
    float o = 0.0f;
    ZINC_DN_UNROLL
    for (int ii = 0; ii < kRows; ++ii) {
        const int i = r + kSeqSplit * ii;
        if (i < d_k) {
            s[ii] += kt[i] * d;
            o += s[ii] * qt[i];
        }
    }
    return o;
}

// ---- the chunked (WY) form ----
//
// Within a chunk of n tokens with cumulative log-decays G and start state S0 (the CPU's delta_net_chunked):
//   L[t][s] = beta_t e^{G_t - G_s} k_t.k_s for s < t,   T = (I + L)^{-1} (unit lower triangular)
//   delta   = T r,  r_t = beta_t (v_t - e^{G_t} S0^T k_t)
//   o_t     = scale (e^{G_t} S0^T q_t + sum_{s<=t} B[t][s] delta_s),   B[t][s] = e^{G_t - G_s} q_t.k_s
//   S_n     = e^{G_n} S0 + sum_s (e^{G_n - G_s} k_s) delta_s^T
// delta = T r is the CPU's forward substitution (I + L) delta = r, with the inverse taken once per chunk and head so
// that what remains sequential across chunks is products. A prepare kernel (blocks per chunk and key head) computes G,
// T and B for every chunk at once; then one block per (value head, kChunkCols value columns) walks the chunks in
// order with its columns of the state in shared memory. Value columns are independent throughout, so the blocks
// never communicate. The walk is a chain of short phases, so every phase that reads global memory issues all its
// loads before it stores any (dn_copy): one memory latency per phase rather than one per element.
//
// The block bodies are written as phases separated by block barriers, each phase a function of the thread index
// that keeps nothing in registers across a barrier: Block::run(f) runs f for every thread of the block and then
// synchronizes; Block::gemm(M, N, K, A, B, epi) calls epi(m, n, sum_k A(m, k) B(k, n)) once for every (m, n) of an
// M x N product (M and N multiples of 16, K of 8; operands in shared memory, not written by epi) and then
// synchronizes. On the GPU run is f(threadIdx.x) then __syncthreads(), and gemm runs on tensor cores, each operand
// split into two tf32 parts (hi hi + hi lo + lo hi, about 22 bits; delta_net.cu); the host tests run f for each
// index in turn and sum the products in f32 in ascending k.

constexpr int kChunkThreads = 256;
constexpr int kChunkCols = 16;  // value columns per recurrence block
constexpr int kKeyTile = 32;    // key dims staged at a time
constexpr int kDiag = 16;       // T is inverted by diagonal blocks of this size
// Row strides of the shared tiles, in floats, chosen so that a tensor-core fragment's 32 loads hit distinct banks:
// 4 mod 32 for the tiles read as A (rows by key dims or by tokens), 24 mod 32 for the value-column tiles read as B.
// (T and P are also read as B, and the weighted keys as a transposed A, with two-way conflicts.)
constexpr int kTileLd = kKeyTile + 4;
constexpr int kTokLd = kMaxChunk + 4;
constexpr int kColLd = kChunkCols + 8;

// A matrix in shared memory: element (r, c) at p[r * rs + c * cs].
struct SmemMat {
    const float* p;
    int rs, cs;
    ZINC_DN_HD float at(int r, int c) const { return p[r * rs + c * cs]; }
};

// The pointers of one launch: q, k, v, g, beta, out start at the launch's first token; for each (value head h, chunk
// c of the launch) at i = h * n_chunks + c, T and B hold C x C floats at (i * C + t) * C + s and G holds C floats at
// i * C + t. All three lie in one scratch buffer of delta_net_chunked_scratch floats.
struct ChunkArgs {
    DeltaNetArgs d;
    int C = 0;
    int64_t n_chunks = 0;
    float *T = nullptr, *B = nullptr, *G = nullptr;
};

struct PrepareShared {
    float KQ[2 * kMaxChunk][kTileLd];  // a key tile of the chunk's keys (rows 0..np-1), then its queries
    float kk[kMaxChunk][kTokLd];
    float qk[kMaxChunk][kTokLd];
    float L[kMaxChunk][kTokLd];
    float T[kMaxChunk][kTokLd];
    float P[kDiag][kTokLd];  // L T for one block row of T
    float g[kMaxChunk], G[kMaxChunk], beta[kMaxChunk];
};

struct ChunkShared {
    float S[kMaxKeyDim][kColLd];       // the block's columns of the state
    float KQ[2 * kMaxChunk][kTileLd];  // as PrepareShared's; for the state update the weighted keys alone
    float T[kMaxChunk][kTokLd];
    float B[kMaxChunk][kTokLd];
    float X[kMaxChunk][kColLd];  // S0^T k_t, then r_t
    float Y[kMaxChunk][kColLd];  // S0^T q_t
    float D[kMaxChunk][kColLd];  // v_t, then delta_t
    float eg[kMaxChunk], beta[kMaxChunk], w[kMaxChunk];
};
// Both are dynamic shared memory: within the 99 KiB a block may have on every GPU the build targets.
static_assert(sizeof(PrepareShared) <= 99 * 1024 && sizeof(ChunkShared) <= 99 * 1024, "shared memory per block");
static_assert(kMaxChunk <= kChunkThreads && kMaxKeyDim % kKeyTile == 0, "one thread per token; whole key tiles");
static_assert(kMaxChunk % kDiag == 0, "T's diagonal blocks tile the chunk");

struct HostBlock {
    template <class F>
    void run(F&& f) const {
        for (int tid = 0; tid < kChunkThreads; ++tid) f(tid);
    }
    template <class Epi>
    void gemm(int M, int N, int K, SmemMat A, SmemMat B, Epi&& epi) const {
        for (int m = 0; m < M; ++m)
            for (int n = 0; n < N; ++n) {
                float acc = 0.0f;
                for (int k = 0; k < K; ++k) acc += A.at(m, k) * B.at(k, n);
                epi(m, n, acc);
            }
    }
};

ZINC_DN_HD int dn_round16(int n) { return (n + 15) / 16 * 16; }

// This thread's share of copying `count` <= kPer * kChunkThreads elements: store(e, load(e)) for e = tid, tid +
// kChunkThreads, ..., every load issued before the first store.
template <int kPer, class Load, class Store>
ZINC_DN_HD void dn_copy(int tid, int count, Load load, Store store) {
    float r[kPer];
    ZINC_DN_UNROLL
    for (int u = 0; u < kPer; ++u) {
        const int e = tid + u * kChunkThreads;
        r[u] = e < count ? load(e) : 0.0f;
    }
    ZINC_DN_UNROLL
    for (int u = 0; u < kPer; ++u) {
        const int e = tid + u * kChunkThreads;
        if (e < count) store(e, r[u]);
    }
}

// This thread's share of staging key dims [i0, i0 + kKeyTile) of the chunk's rows of x (q or k of key head kh),
// times weight(t), to tile rows row0..row0+rows-1; zero past the chunk's n tokens and past d_k.
template <class Weight>
ZINC_DN_HD void dn_stage(int tid, float (*tile)[kTileLd], int row0, const float* x, const DeltaNetArgs& d, int kh,
                         int64_t t0, int n, int rows, int i0, Weight weight) {
    const int kw = d.n_k * d.d_k, width = d.d_k - i0;
    const float* base = x + t0 * kw + int64_t(kh) * d.d_k + i0;
    dn_copy<kMaxChunk * kKeyTile / kChunkThreads>(
        tid, rows * kKeyTile,
        [&](int e) {
            const int t = e / kKeyTile, ii = e % kKeyTile;
            return t < n && ii < width ? weight(t) * base[t * kw + ii] : 0.0f;
        },
        [&](int e, float v) { tile[row0 + e / kKeyTile][e % kKeyTile] = v; });
}
ZINC_DN_HD float dn_one(int) { return 1.0f; }

// Prepare block (chunk c, key head kh): G, T and B of chunk c for every value head that reads kh.
template <class Block>
ZINC_DN_HD void dn_prepare_block(const Block& blk, PrepareShared& sm, const ChunkArgs& a, int64_t c, int kh) {
    const DeltaNetArgs& d = a.d;
    const int C = a.C;
    const int64_t t0 = c * C;
    const int n = int(dn_min(C, d.T - t0));
    const int np = dn_round16(n);
    // k_t.k_s and q_t.k_s over key tiles, the keys and queries stacked as one product's rows.
    for (int i0 = 0; i0 < d.d_k; i0 += kKeyTile) {
        blk.run([&](int tid) {
            dn_stage(tid, sm.KQ, 0, d.k, d, kh, t0, n, np, i0, dn_one);
            dn_stage(tid, sm.KQ, np, d.q, d, kh, t0, n, np, i0, dn_one);
        });
        const bool first = i0 == 0;
        blk.gemm(2 * np, np, kKeyTile, SmemMat{&sm.KQ[0][0], kTileLd, 1}, SmemMat{&sm.KQ[0][0], 1, kTileLd},
                 [&](int t, int s, float v) {
                     float& out = t < np ? sm.kk[t][s] : sm.qk[t - np][s];
                     out = first ? v : out + v;
                 });
    }
    for (int m = 0; m < d.n_v / d.n_k; ++m) {
        const int h = dn_value_head(d.tiled, d.n_k, d.n_v, kh, m);
        const int64_t i = int64_t(h) * a.n_chunks + c;
        float *T = a.T + i * C * C, *B = a.B + i * C * C;
        blk.run([&](int tid) {
            if (tid < n) {
                sm.g[tid] = d.g[(t0 + tid) * d.n_v + h];
                sm.beta[tid] = d.beta[(t0 + tid) * d.n_v + h];
            }
        });
        blk.run([&](int tid) {
            if (tid < n) {
                float acc = 0.0f;  // summed in order, as the CPU does
                for (int u = 0; u <= tid; ++u) acc += sm.g[u];
                sm.G[tid] = acc;
                a.G[i * C + tid] = acc;
            }
        });
        blk.run([&](int tid) {
            for (int e = tid; e < kMaxChunk * kMaxChunk; e += kChunkThreads) {
                const int t = e / kMaxChunk, s = e % kMaxChunk;
                float lv = 0.0f, bv = 0.0f;
                if (t < n && s <= t) {
                    const float decay = expf(sm.G[t] - sm.G[s]);
                    if (s < t) lv = sm.beta[t] * (decay * sm.kk[t][s]);
                    bv = decay * sm.qk[t][s];
                }
                sm.L[t][s] = lv;
                if (t < n && s < n) B[t * C + s] = bv;
            }
        });
        // T's diagonal blocks by forward substitution, one thread per column (columns do not depend on each other),
        // and zeros above them.
        blk.run([&](int tid) {
            if (tid >= np) return;
            const int j = tid, base = j / kDiag * kDiag;
            for (int t = 0; t < base + kDiag; ++t) {
                float v = t == j ? 1.0f : 0.0f;
                if (t > j) {
                    float acc = 0.0f;
                    for (int s = j; s < t; ++s) acc += sm.L[t][s] * sm.T[s][j];
                    v = -acc;
                }
                sm.T[t][j] = v;
            }
        });
        // Then block row by block row: T_ib = -T_ii sum_{b <= k < i} L_ik T_kb for the blocks b left of i.
        for (int r0 = kDiag; r0 < np; r0 += kDiag) {
            blk.gemm(kDiag, r0, r0, SmemMat{&sm.L[r0][0], kTokLd, 1}, SmemMat{&sm.T[0][0], kTokLd, 1},
                     [&](int t, int s, float v) { sm.P[t][s] = v; });
            blk.gemm(kDiag, r0, kDiag, SmemMat{&sm.T[r0][r0], kTokLd, 1}, SmemMat{&sm.P[0][0], kTokLd, 1},
                     [&](int t, int s, float v) { sm.T[r0 + t][s] = -v; });
        }
        blk.run([&](int tid) {
            for (int e = tid; e < kMaxChunk * kMaxChunk; e += kChunkThreads) {
                const int t = e / kMaxChunk, s = e % kMaxChunk;
                if (t < n && s < n) T[t * C + s] = sm.T[t][s];
            }
        });
    }
}

// Recurrence block (value columns [col_tile * kChunkCols, ...) of value head h): every chunk in order.
template <class Block>
ZINC_DN_HD void dn_chunk_block(const Block& blk, ChunkShared& sm, const ChunkArgs& a, int col_tile, int h) {
    const DeltaNetArgs& d = a.d;
    const int C = a.C, dk = d.d_k, dv = d.d_v;
    const int dkp = (dk + kKeyTile - 1) / kKeyTile * kKeyTile;
    const int kh = dn_key_head(d.tiled, d.n_k, d.n_v, h);
    const int j0 = col_tile * kChunkCols;
    const int64_t vw = int64_t(d.n_v) * dv;
    float* Sg = d.state + int64_t(h) * dk * dv;
    blk.run([&](int tid) {
        for (int e = tid; e < dkp * kChunkCols; e += kChunkThreads) {
            const int i = e / kChunkCols, j = e % kChunkCols;
            sm.S[i][j] = i < dk && j0 + j < dv ? Sg[int64_t(i) * dv + j0 + j] : 0.0f;
        }
    });
    for (int64_t c = 0; c < a.n_chunks; ++c) {
        const int64_t t0 = c * C, i = int64_t(h) * a.n_chunks + c;
        const int n = int(dn_min(C, d.T - t0));
        const int np = dn_round16(n);
        const float *Tc = a.T + i * C * C, *Bc = a.B + i * C * C, *Gc = a.G + i * C;
        // Everything the chunk reads but the key tiles after the first, in one phase.
        blk.run([&](int tid) {
            if (tid < n) {
                const float G = Gc[tid];
                sm.eg[tid] = expf(G);
                sm.w[tid] = expf(Gc[n - 1] - G);
                sm.beta[tid] = d.beta[(t0 + tid) * d.n_v + h];
            }
            constexpr int kSquare = kMaxChunk * kMaxChunk;
            const auto in = [&](int e) { return e / kMaxChunk < n && e % kMaxChunk < n; };
            const auto at = [&](int e) { return e / kMaxChunk * C + e % kMaxChunk; };
            dn_copy<kSquare / kChunkThreads>(
                tid, kSquare, [&](int e) { return in(e) ? Tc[at(e)] : 0.0f; },
                [&](int e, float v) { sm.T[e / kMaxChunk][e % kMaxChunk] = v; });
            dn_copy<kSquare / kChunkThreads>(
                tid, kSquare, [&](int e) { return in(e) ? Bc[at(e)] : 0.0f; },
                [&](int e, float v) { sm.B[e / kMaxChunk][e % kMaxChunk] = v; });
            const float* vc = d.v + t0 * vw + int64_t(h) * dv + j0;
            const int vcols = dv - j0;
            dn_copy<kMaxChunk * kChunkCols / kChunkThreads>(
                tid, np * kChunkCols,
                [&](int e) {
                    const int t = e / kChunkCols, j = e % kChunkCols;
                    return t < n && j < vcols ? vc[t * int(vw) + j] : 0.0f;
                },
                [&](int e, float v) { sm.D[e / kChunkCols][e % kChunkCols] = v; });
            dn_stage(tid, sm.KQ, 0, d.k, d, kh, t0, n, np, 0, dn_one);
            dn_stage(tid, sm.KQ, np, d.q, d, kh, t0, n, np, 0, dn_one);
        });
        // S0^T k_t and S0^T q_t over key tiles.
        for (int i0 = 0; i0 < dk; i0 += kKeyTile) {
            if (i0 > 0)
                blk.run([&](int tid) {
                    dn_stage(tid, sm.KQ, 0, d.k, d, kh, t0, n, np, i0, dn_one);
                    dn_stage(tid, sm.KQ, np, d.q, d, kh, t0, n, np, i0, dn_one);
                });
            const bool first = i0 == 0;
            blk.gemm(2 * np, kChunkCols, kKeyTile, SmemMat{&sm.KQ[0][0], kTileLd, 1}, SmemMat{&sm.S[i0][0], kColLd, 1},
                     [&](int t, int j, float v) {
                         float& out = t < np ? sm.X[t][j] : sm.Y[t - np][j];
                         out = first ? v : out + v;
                     });
        }
        blk.run([&](int tid) {
            for (int e = tid; e < np * kChunkCols; e += kChunkThreads) {
                const int t = e / kChunkCols, j = e % kChunkCols;
                sm.X[t][j] = t < n ? sm.beta[t] * (sm.D[t][j] - sm.eg[t] * sm.X[t][j]) : 0.0f;
            }
        });
        blk.gemm(np, kChunkCols, np, SmemMat{&sm.T[0][0], kTokLd, 1}, SmemMat{&sm.X[0][0], kColLd, 1},
                 [&](int t, int j, float v) { sm.D[t][j] = v; });
        const SmemMat D{&sm.D[0][0], kColLd, 1};
        float* oc = d.out + t0 * vw + int64_t(h) * dv + j0;
        blk.gemm(np, kChunkCols, np, SmemMat{&sm.B[0][0], kTokLd, 1}, D, [&](int t, int j, float v) {
            if (t < n && j < dv - j0) oc[t * int(vw) + j] = (sm.eg[t] * sm.Y[t][j] + v) * d.scale;
        });
        // The state at the end of the chunk: S = e^{G_n} S0 + (w k)^T delta, key tile by key tile.
        const float egn = sm.eg[n - 1];
        for (int i0 = 0; i0 < dk; i0 += kKeyTile) {
            blk.run([&](int tid) {
                dn_stage(tid, sm.KQ, 0, d.k, d, kh, t0, n, np, i0, [&](int t) { return sm.w[t]; });
            });
            blk.gemm(kKeyTile, kChunkCols, np, SmemMat{&sm.KQ[0][0], 1, kTileLd}, D,
                     [&](int ii, int j, float v) { sm.S[i0 + ii][j] = egn * sm.S[i0 + ii][j] + v; });
        }
    }
    blk.run([&](int tid) {
        for (int e = tid; e < dk * kChunkCols; e += kChunkThreads) {
            const int i = e / kChunkCols, j = e % kChunkCols;
            if (j0 + j < dv) Sg[int64_t(i) * dv + j0 + j] = sm.S[i][j];
        }
    });
}

// The arguments of the launch pair that covers tokens [t0, t0 + T) of a.
inline ChunkArgs dn_segment(const DeltaNetArgs& a, int C, int64_t t0, int64_t T, float* scratch) {
    ChunkArgs s;
    s.d = a;
    const int64_t kw = int64_t(a.n_k) * a.d_k, vw = int64_t(a.n_v) * a.d_v;
    s.d.q = a.q + t0 * kw;
    s.d.k = a.k + t0 * kw;
    s.d.v = a.v + t0 * vw;
    s.d.g = a.g + t0 * a.n_v;
    s.d.beta = a.beta + t0 * a.n_v;
    s.d.out = a.out + t0 * vw;
    s.d.T = T;
    s.C = C;
    s.n_chunks = (T + C - 1) / C;
    const int64_t mats = int64_t(a.n_v) * s.n_chunks * C * C;
    s.T = scratch;
    s.B = scratch + mats;
    s.G = scratch + 2 * mats;
    return s;
}

}  // namespace zinc::backend::cuda
