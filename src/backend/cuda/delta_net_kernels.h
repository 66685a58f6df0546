// Host-side launchers of the CUDA backend's gated delta-net kernels (delta_net.cu), and the per-thread and per-block
// bodies of those kernels that the tests also run on the host (tests/cuda/cuda_delta_net_test.cpp): the conv of one
// channel, the key rows of one sequential-recurrence thread, and the phases of the chunked (WY) form. Plain C++17 for
// nvcc; each launcher enqueues on `s` and returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

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
};

// Token by token: one thread per (value head, value column, quarter of the key rows); the state stays in
// registers for all T tokens.
cudaError_t delta_net(const DeltaNetArgs& a, cudaStream_t s);

// The chunk length the kernels use for a requested chunk (> 0): at most kMaxChunk. The chunk only changes how the
// sums are rounded, so a longer one is run as chunks of kMaxChunk.
inline int dn_chunk_len(int chunk) { return chunk < kMaxChunk ? chunk : kMaxChunk; }
// Floats of each of the two scratch buffers delta_net_chunked needs for T tokens.
size_t delta_net_chunked_scratch(int n_v, int64_t T, int chunk);
// The chunked (WY) form of the same recurrence; A and B are scratch buffers of delta_net_chunked_scratch floats.
cudaError_t delta_net_chunked(const DeltaNetArgs& a, int chunk, float* A, float* B, cudaStream_t s);

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
// As the CPU's delta_net_chunked: within a chunk of n tokens with cumulative log-decays G and start state S0,
//   delta_t = beta_t (v_t - e^{G_t} S0^T k_t - sum_{s<t} A[t][s] delta_s),  A[t][s] = e^{G_t - G_s} k_t.k_s
//   o_t     = scale (e^{G_t} S0^T q_t + sum_{s<=t} B[t][s] delta_s),        B[t][s] = e^{G_t - G_s} q_t.k_s
//   S_n     = e^{G_n} S0 + sum_s (e^{G_n - G_s} k_s) delta_s^T
// A kernel of gram blocks (one per chunk and key head) first computes A and B for every chunk at once; then one
// block per (value head, kChunkCols value columns) walks the chunks in order with its slice of the state in shared
// memory. Value columns are independent throughout, so the blocks never communicate. Every sum runs in the CPU's
// order; the forward substitution (sequential in t) is done by one thread per column.
//
// The block bodies are written as phases separated by block barriers, each phase a function of the thread index
// that keeps nothing in registers across a barrier; Block::run(f) runs f for every thread of the block and then
// synchronizes. On the GPU that is f(threadIdx.x) then __syncthreads(); the host tests run f for each index in turn.

constexpr int kChunkThreads = 256;
constexpr int kChunkCols = 16;  // value columns per recurrence block
constexpr int kKeyTile = 32;    // key dims staged at a time by the recurrence block
constexpr int kGramTile = 16;   // key dims staged at a time by the gram block

// The pointers of one launch: q, k, v, g, beta, out start at the launch's first token; A and B hold C x C floats per
// (value head, chunk of the launch), at ((h * n_chunks + c) * C + t) * C + s.
struct ChunkArgs {
    DeltaNetArgs d;
    int C = 0;
    int64_t n_chunks = 0;
    float *A = nullptr, *B = nullptr;
};

struct GramShared {
    float K[kMaxChunk][kGramTile + 1];  // +1: rows read down a column hit distinct banks
    float Q[kMaxChunk][kGramTile + 1];
    float kk[kMaxChunk][kMaxChunk];
    float qk[kMaxChunk][kMaxChunk];
    float G[kMaxChunk];
};

struct ChunkShared {
    float S[kMaxKeyDim * kChunkCols];  // the block's columns of the state, S[i * kChunkCols + j]
    float K[kMaxChunk][kKeyTile + 1];
    float Q[kMaxChunk][kKeyTile + 1];
    float SD[kMaxChunk][kChunkCols];  // S0^T k_t, overwritten in t order by delta_t
    float SQ[kMaxChunk][kChunkCols];  // S0^T q_t
    float G[kMaxChunk], beta[kMaxChunk], w[kMaxChunk];
};
static_assert(sizeof(GramShared) <= 48 * 1024 && sizeof(ChunkShared) <= 48 * 1024, "static shared memory limit");
static_assert(kChunkCols <= 32 && 32 + kMaxChunk <= kChunkThreads, "the forward substitution and w phase threads");

#ifdef __CUDACC__
struct DeviceBlock {
    template <class F>
    __host__ __device__ void run(F&& f) const {
#ifdef __CUDA_ARCH__
        f(int(threadIdx.x));
        __syncthreads();
#else
        (void)f;
#endif
    }
};
#endif

struct HostBlock {
    template <class F>
    void run(F&& f) const {
        for (int tid = 0; tid < kChunkThreads; ++tid) f(tid);
    }
};

// The chunk's cumulative log-decays of value head h, summed in order as the CPU does.
ZINC_DN_HD void dn_cumulative_decay(const DeltaNetArgs& d, int h, int64_t t0, int n, float* G) {
    float acc = 0.0f;
    for (int t = 0; t < n; ++t) G[t] = acc += d.g[(t0 + t) * d.n_v + h];
}

// Copies key dims [i0, i0 + ni) of the chunk's rows of x (q or k of key head kh) to tile rows 0..n-1, zero-padded
// to `width` columns.
template <int kWidth>
ZINC_DN_HD void dn_stage(int tid, float (*tile)[kWidth + 1], const float* x, const DeltaNetArgs& d, int kh, int64_t t0,
                         int n, int i0, int ni) {
    const int64_t kw = int64_t(d.n_k) * d.d_k;
    for (int e = tid; e < n * kWidth; e += kChunkThreads) {
        const int t = e / kWidth, ii = e % kWidth;
        tile[t][ii] = ii < ni ? x[(t0 + t) * kw + int64_t(kh) * d.d_k + i0 + ii] : 0.0f;
    }
}

// Gram block (chunk c, key head kh): A and B of chunk c for every value head that reads kh.
template <class Block>
ZINC_DN_HD void dn_gram_block(const Block& blk, GramShared& sm, const ChunkArgs& a, int64_t c, int kh) {
    const DeltaNetArgs& d = a.d;
    const int C = a.C;
    const int64_t t0 = c * C;
    const int n = int(dn_min(C, d.T - t0));
    blk.run([&](int tid) {
        for (int e = tid; e < kMaxChunk * kMaxChunk; e += kChunkThreads) {
            sm.kk[e / kMaxChunk][e % kMaxChunk] = 0.0f;
            sm.qk[e / kMaxChunk][e % kMaxChunk] = 0.0f;
        }
    });
    // k_t.k_s and q_t.k_s for s <= t, each summed in ascending key dim.
    for (int i0 = 0; i0 < d.d_k; i0 += kGramTile) {
        const int ni = int(dn_min(kGramTile, d.d_k - i0));
        blk.run([&](int tid) {
            dn_stage<kGramTile>(tid, sm.K, d.k, d, kh, t0, n, i0, ni);
            dn_stage<kGramTile>(tid, sm.Q, d.q, d, kh, t0, n, i0, ni);
        });
        blk.run([&](int tid) {
            for (int t = tid / 32; t < n; t += kChunkThreads / 32)
                for (int s = tid % 32; s <= t; s += 32) {
                    float kk = sm.kk[t][s], qk = sm.qk[t][s];
                    for (int ii = 0; ii < ni; ++ii) {
                        const float ks = sm.K[s][ii];
                        kk += sm.K[t][ii] * ks;
                        qk += sm.Q[t][ii] * ks;
                    }
                    sm.kk[t][s] = kk;
                    sm.qk[t][s] = qk;
                }
        });
    }
    for (int m = 0; m < d.n_v / d.n_k; ++m) {
        const int h = dn_value_head(d.tiled, d.n_k, d.n_v, kh, m);
        blk.run([&](int tid) {
            if (tid == 0) dn_cumulative_decay(d, h, t0, n, sm.G);
        });
        blk.run([&](int tid) {
            float* A = a.A + (int64_t(h) * a.n_chunks + c) * C * C;
            float* B = a.B + (int64_t(h) * a.n_chunks + c) * C * C;
            for (int e = tid; e < C * C; e += kChunkThreads) {
                const int t = e / C, s = e % C;
                float av = 0.0f, bv = 0.0f;
                if (t < n && s <= t) {
                    const float decay = expf(sm.G[t] - sm.G[s]);
                    if (s < t) av = decay * sm.kk[t][s];
                    bv = decay * sm.qk[t][s];
                }
                A[e] = av;
                B[e] = bv;
            }
        });
    }
}

// Recurrence block (value columns [col_tile * kChunkCols, ...) of value head h): every chunk in order.
template <class Block>
ZINC_DN_HD void dn_chunk_block(const Block& blk, ChunkShared& sm, const ChunkArgs& a, int col_tile, int h) {
    const DeltaNetArgs& d = a.d;
    const int C = a.C, dk = d.d_k, dv = d.d_v;
    const int kh = dn_key_head(d.tiled, d.n_k, d.n_v, h);
    const int j0 = col_tile * kChunkCols;
    const int64_t vw = int64_t(d.n_v) * dv;
    float* Sg = d.state + int64_t(h) * dk * dv;
    constexpr int kRowStep = kChunkThreads / kChunkCols;
    blk.run([&](int tid) {
        for (int e = tid; e < dk * kChunkCols; e += kChunkThreads) {
            const int i = e / kChunkCols, j = e % kChunkCols;
            sm.S[e] = j0 + j < dv ? Sg[int64_t(i) * dv + j0 + j] : 0.0f;
        }
    });
    for (int64_t c = 0; c < a.n_chunks; ++c) {
        const int64_t t0 = c * C;
        const int n = int(dn_min(C, d.T - t0));
        blk.run([&](int tid) {
            if (tid == 0) dn_cumulative_decay(d, h, t0, n, sm.G);
            if (tid < n) sm.beta[tid] = d.beta[(t0 + tid) * d.n_v + h];
            for (int e = tid; e < kMaxChunk * kChunkCols; e += kChunkThreads) {
                sm.SD[e / kChunkCols][e % kChunkCols] = 0.0f;
                sm.SQ[e / kChunkCols][e % kChunkCols] = 0.0f;
            }
        });
        // S0^T k_t and S0^T q_t, summed in ascending key dim.
        for (int i0 = 0; i0 < dk; i0 += kKeyTile) {
            const int ni = int(dn_min(kKeyTile, dk - i0));
            blk.run([&](int tid) {
                dn_stage<kKeyTile>(tid, sm.K, d.k, d, kh, t0, n, i0, ni);
                dn_stage<kKeyTile>(tid, sm.Q, d.q, d, kh, t0, n, i0, ni);
            });
            blk.run([&](int tid) {
                const int j = tid % kChunkCols;
                for (int t = tid / kChunkCols; t < n; t += kRowStep) {
                    float sk = sm.SD[t][j], sq = sm.SQ[t][j];
                    for (int ii = 0; ii < ni; ++ii) {
                        const float sv = sm.S[(i0 + ii) * kChunkCols + j];
                        sk += sv * sm.K[t][ii];
                        sq += sv * sm.Q[t][ii];
                    }
                    sm.SD[t][j] = sk;
                    sm.SQ[t][j] = sq;
                }
            });
        }
        // delta by forward substitution (one thread per column); meanwhile the state-update weights.
        blk.run([&](int tid) {
            if (tid < kChunkCols) {
                const int j = tid;
                const bool valid = j0 + j < dv;
                const float* A = a.A + (int64_t(h) * a.n_chunks + c) * C * C;
                for (int t = 0; t < n; ++t) {
                    float acc = expf(sm.G[t]) * sm.SD[t][j];
                    for (int s = 0; s < t; ++s) acc += A[t * C + s] * sm.SD[s][j];
                    const float vt = valid ? d.v[(t0 + t) * vw + int64_t(h) * dv + j0 + j] : 0.0f;
                    sm.SD[t][j] = sm.beta[t] * (vt - acc);
                }
            } else if (tid >= 32 && tid < 32 + n) {
                const int s = tid - 32;
                sm.w[s] = expf(sm.G[n - 1] - sm.G[s]);
            }
        });
        // Outputs.
        blk.run([&](int tid) {
            const int j = tid % kChunkCols;
            if (j0 + j >= dv) return;
            const float* B = a.B + (int64_t(h) * a.n_chunks + c) * C * C;
            for (int t = tid / kChunkCols; t < n; t += kRowStep) {
                float o = expf(sm.G[t]) * sm.SQ[t][j];
                for (int s = 0; s <= t; ++s) o += B[t * C + s] * sm.SD[s][j];
                d.out[(t0 + t) * vw + int64_t(h) * dv + j0 + j] = o * d.scale;
            }
        });
        // The state at the end of the chunk.
        for (int i0 = 0; i0 < dk; i0 += kKeyTile) {
            const int ni = int(dn_min(kKeyTile, dk - i0));
            blk.run([&](int tid) { dn_stage<kKeyTile>(tid, sm.K, d.k, d, kh, t0, n, i0, ni); });
            blk.run([&](int tid) {
                const int j = tid % kChunkCols;
                const float egn = expf(sm.G[n - 1]);
                for (int ii = tid / kChunkCols; ii < ni; ii += kRowStep) {
                    float sv = sm.S[(i0 + ii) * kChunkCols + j] * egn;
                    for (int s = 0; s < n; ++s) sv += (sm.w[s] * sm.K[s][ii]) * sm.SD[s][j];
                    sm.S[(i0 + ii) * kChunkCols + j] = sv;
                }
            });
        }
    }
    blk.run([&](int tid) {
        for (int e = tid; e < dk * kChunkCols; e += kChunkThreads) {
            const int i = e / kChunkCols, j = e % kChunkCols;
            if (j0 + j < dv) Sg[int64_t(i) * dv + j0 + j] = sm.S[e];
        }
    });
}

// The arguments of the launch pair that covers tokens [t0, t0 + T) of a.
inline ChunkArgs dn_segment(const DeltaNetArgs& a, int C, int64_t t0, int64_t T, float* A, float* B) {
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
    s.A = A;
    s.B = B;
    return s;
}

}  // namespace zinc::backend::cuda
