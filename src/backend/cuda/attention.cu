// Causal GQA attention with the optional sliding window, sinks and score soft-cap (plan_attention picks the kernel):
//  - keys_kernel (decode, short prefill chunks): a block of kWarps warps per (query row, query head, key split); the
//    block's keys are dealt to its warps, and the warps merge through shared memory. With one split the block writes
//    the normalized output; with several (long contexts) each block writes its unnormalized partial (max,
//    denominator, output) and combine_kernel merges the splits (flash-decoding), so one row still fills the GPU.
//  - rows_kernel (prefill): a block of kTileRows warps, one query row each, of one head; the K/V rows the block's
//    rows see pass through shared memory in tiles, fetched once for all of them.
// kv_write stores a micro-batch's K and V rows at the cache rows of its positions.
// Every warp keeps an online softmax of its keys in registers (WarpSoftmax); the sink joins the max and the
// denominator when the output is normalized.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/attention_kernels.h"

namespace zinc::backend::cuda {
namespace {

// Warps of a keys_kernel block. Each warp takes its keys a batch at a time, every batch a chain of dependent loads,
// shuffles and exponentials, so a block's time is about its longest warp's batches. Without splits (short contexts)
// a block holds all of a head's keys: 16 warps (a 128-key decode call took 22 µs with 4 warps, 9.4 µs with 16). With
// splits the pieces already spread the keys over the GPU, and 4 warps did better (4096 keys: 41 µs against 50).
constexpr int kWarpsWhole = 16;
constexpr int kWarpsSplit = 4;
constexpr int kCombineThreads = 128;
static_assert(kMaxSplits <= kCombineThreads, "the merge kernel computes one split factor per thread");

__device__ inline float score(float dot, float scale, float softcap) {
    const float s = dot * scale;
    return softcap > 0.0f ? softcap * tanhf(s / softcap) : s;
}

// One warp's running softmax over the keys it has seen: max m, denominator l (both the same on every lane) and the
// unnormalized output, value c (< head_dim) on lane c % 32 in acc[c / 32]. kPerLane >= ceil(head_dim / 32).
template <int kPerLane>
struct WarpSoftmax {
    float m = -INFINITY, l = 0.0f, acc[kPerLane];

    __device__ void load_q(const float* qv, int lane, int d, float* qr) {
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            qr[i] = lane + 32 * i < d ? qv[lane + 32 * i] : 0.0f;
            acc[i] = 0.0f;
        }
    }

    // Adds the n (1..kBatch, the same on every lane) keys whose K and V rows start at kr[b] and vr[b]. The batch's
    // loads and shuffle reductions overlap.
    template <int kBatch>
    __device__ void add(const float* qr, const float* const (&kr)[kBatch], const float* const (&vr)[kBatch], int n,
                        int lane, int d, float scale, float softcap) {
        float s[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            s[b] = 0.0f;
            if (b < n) {
#pragma unroll
                for (int i = 0; i < kPerLane; ++i)
                    if (lane + 32 * i < d) s[b] += qr[i] * kr[b][lane + 32 * i];
            }
        }
        // The xor butterfly leaves the same sum on every lane, so m and l stay lane-uniform.
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
#pragma unroll
            for (int b = 0; b < kBatch; ++b) s[b] += __shfl_xor_sync(0xffffffffu, s[b], off);
        float m_new = m;
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            s[b] = score(s[b], scale, softcap);
            if (b < n) m_new = fmaxf(m_new, s[b]);
        }
        // m_new is finite (key 0 is real), so corr is 0 before the first key, when l and acc are 0 anyway.
        const float corr = expf(m - m_new);
        float p[kBatch];
        l *= corr;
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            p[b] = b < n ? expf(s[b] - m_new) : 0.0f;
            l += p[b];
        }
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) acc[i] *= corr;
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            if (b < n) {
#pragma unroll
                for (int i = 0; i < kPerLane; ++i)
                    if (lane + 32 * i < d) acc[i] += p[b] * vr[b][lane + 32 * i];
            }
        }
        m = m_new;
    }
};

// Partials of split s of block bt (= t * n_head + h): head_dim output values, then (max, denominator) after all of
// them.
__device__ inline float* partial_acc(float* part, int64_t bt, int n_split, int split, int head_dim) {
    return part + (bt * n_split + split) * head_dim;
}
__device__ inline float* partial_ml(float* part, const AttentionArgs& a, int64_t bt, int n_split, int split) {
    return part + a.n_q * a.n_head * n_split * int64_t(a.head_dim) + (bt * n_split + split) * 2;
}

template <int kPerLane, int kBatch, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) keys_kernel(AttentionArgs a, int n_split, float* part) {
    const int64_t bt = blockIdx.x;
    const int h = int(bt % a.n_head), split = int(blockIdx.y);
    const int64_t t = bt / a.n_head, pos0 = *a.pos;
    const int d = a.head_dim, kvh = h / (a.n_head / a.n_head_kv);
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const int64_t chunk = split_chunk(visible_keys(pos0 + a.n_q - 1, a.window), n_split);
    const KeyRange keys = split_keys(visible_keys(pos0 + t, a.window), chunk, split);
    const int64_t q_cols = int64_t(a.n_head) * d;
    const float* kb = a.k + int64_t(kvh) * d;
    const float* vb = a.v + int64_t(kvh) * d;

    WarpSoftmax<kPerLane> w;
    float qr[kPerLane];
    w.load_q(a.q + t * q_cols + int64_t(h) * d, lane, d, qr);
    for (int64_t j0 = keys.begin + int64_t(warp) * kBatch; j0 < keys.end; j0 += int64_t(kWarps) * kBatch) {
        const int n = keys.end - j0 < kBatch ? int(keys.end - j0) : kBatch;
        const float* kr[kBatch];
        const float* vr[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int64_t j = j0 + (b < n ? b : 0);  // stays inside the cache
            kr[b] = kb + j * a.kv_width;
            vr[b] = vb + j * a.kv_width;
        }
        w.add(qr, kr, vr, n, lane, d, a.scale, a.softcap);
    }

    __shared__ float sm_m[kWarps], sm_l[kWarps];
    __shared__ float sm_acc[kWarps][kPerLane * 32];
    if (lane == 0) {
        sm_m[warp] = w.m;
        sm_l[warp] = w.l;
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
        if (lane + 32 * i < d) sm_acc[warp][lane + 32 * i] = w.acc[i];
    __syncthreads();

    // A warp that saw no key has l = 0 (one that did has l >= 1: its running max key adds exp(0)) and m = -inf;
    // it gets the factor 0 rather than exp(-inf - -inf).
    const bool sink = n_split == 1 && a.sinks;
    float mx = sink ? a.sinks[h] : -INFINITY;
    for (int i = 0; i < kWarps; ++i)
        if (sm_l[i] > 0.0f) mx = fmaxf(mx, sm_m[i]);
    float f[kWarps], den = sink ? expf(a.sinks[h] - mx) : 0.0f;
    for (int i = 0; i < kWarps; ++i) {
        f[i] = sm_l[i] > 0.0f ? expf(sm_m[i] - mx) : 0.0f;
        den += sm_l[i] * f[i];
    }
    if (n_split == 1) {
        // The query's own position is always visible, so den > 0.
        float* o = a.out + t * q_cols + int64_t(h) * d;
        for (int c = int(threadIdx.x); c < d; c += int(blockDim.x)) {
            float num = 0.0f;
            for (int i = 0; i < kWarps; ++i) num += sm_acc[i][c] * f[i];
            o[c] = num / den;
        }
    } else {
        // An empty split (a row that sees fewer keys than the longest) writes max -inf and denominator 0.
        float* pa = partial_acc(part, bt, n_split, split, d);
        for (int c = int(threadIdx.x); c < d; c += int(blockDim.x)) {
            float num = 0.0f;
            for (int i = 0; i < kWarps; ++i) num += sm_acc[i][c] * f[i];
            pa[c] = num;
        }
        if (threadIdx.x == 0) {
            float* ml = partial_ml(part, a, bt, n_split, split);
            ml[0] = mx;
            ml[1] = den;
        }
    }
}

// Merges the n_split partials of one (row, head) block with the sink: out = sum_s f_s acc_s / (sum_s f_s l_s +
// exp(sink - M)), f_s = exp(m_s - M), M the largest of the splits' maxima and the sink.
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(AttentionArgs a, int n_split, float* part) {
    const int64_t bt = blockIdx.x;
    const int h = int(bt % a.n_head), d = a.head_dim;
    const int64_t t = bt / a.n_head;
    const float* ml = partial_ml(part, a, bt, n_split, 0);
    float mx = a.sinks ? a.sinks[h] : -INFINITY;
    for (int s = 0; s < n_split; ++s)
        if (ml[2 * s + 1] > 0.0f) mx = fmaxf(mx, ml[2 * s]);
    // Split 0 holds the row's first visible key, so mx is finite.
    __shared__ float sm_f[kMaxSplits];
    if (int(threadIdx.x) < n_split) {
        const int s = int(threadIdx.x);
        sm_f[s] = ml[2 * s + 1] > 0.0f ? expf(ml[2 * s] - mx) : 0.0f;
    }
    __syncthreads();
    float den = a.sinks ? expf(a.sinks[h] - mx) : 0.0f;
    for (int s = 0; s < n_split; ++s) den += ml[2 * s + 1] * sm_f[s];
    const float* pa = partial_acc(part, bt, n_split, 0, d);
    float* o = a.out + t * int64_t(a.n_head) * d + int64_t(h) * d;
    for (int c = int(threadIdx.x); c < d; c += int(blockDim.x)) {
        float num = 0.0f;
        for (int s = 0; s < n_split; ++s) num += pa[int64_t(s) * d + c] * sm_f[s];
        o[c] = num / den;
    }
}

// Block x: query rows [x / n_head * kTileRows, + kTileRows) of head x % n_head. Shared memory: tile_keys rows of K,
// then of V (head_dim values each).
template <int kPerLane, int kBatch>
__global__ void __launch_bounds__(kTileRows * 32) rows_kernel(AttentionArgs a, int tile_keys) {
    extern __shared__ float sm_kv[];
    const int h = int(blockIdx.x % a.n_head);
    const int64_t t0 = int64_t(blockIdx.x / a.n_head) * kTileRows;
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const int64_t t_last = (t0 + kTileRows < a.n_q ? t0 + kTileRows : a.n_q) - 1, t = t0 + warp;
    const bool active = t <= t_last;
    const int d = a.head_dim, kvh = h / (a.n_head / a.n_head_kv);
    const int64_t q_cols = int64_t(a.n_head) * d;
    // The block reads the keys its first row sees onwards, up to its last row's position.
    const int64_t pos0 = *a.pos;
    const int64_t begin = visible_keys(pos0 + t0, a.window).begin, end = pos0 + t_last + 1;
    const KeyRange mine = visible_keys(pos0 + (active ? t : t_last), a.window);
    float* ks = sm_kv;
    float* vs = sm_kv + tile_keys * d;

    WarpSoftmax<kPerLane> w;
    float qr[kPerLane];
    w.load_q(a.q + (active ? t : t_last) * q_cols + int64_t(h) * d, lane, d, qr);
    for (int64_t j0 = begin; j0 < end; j0 += tile_keys) {
        const int n_keys = end - j0 < tile_keys ? int(end - j0) : tile_keys;
        __syncthreads();  // the previous tile is no longer read
        for (int e = int(threadIdx.x); e < n_keys * d; e += int(blockDim.x)) {
            const int64_t src = (j0 + e / d) * a.kv_width + int64_t(kvh) * d + e % d;
            ks[e] = a.k[src];
            vs[e] = a.v[src];
        }
        __syncthreads();
        if (!active) continue;
        const int64_t lo = mine.begin > j0 ? mine.begin : j0, hi = mine.end < j0 + n_keys ? mine.end : j0 + n_keys;
        for (int64_t j = lo; j < hi; j += kBatch) {
            const int n = hi - j < kBatch ? int(hi - j) : kBatch;
            const float* kr[kBatch];
            const float* vr[kBatch];
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
                const int r = int(j - j0) + (b < n ? b : 0);  // stays inside the tile
                kr[b] = ks + r * d;
                vr[b] = vs + r * d;
            }
            w.add(qr, kr, vr, n, lane, d, a.scale, a.softcap);
        }
    }
    if (!active) return;
    // Every row sees its own position, so m is finite and the denominator positive.
    const float sink = a.sinks ? a.sinks[h] : -INFINITY;
    const float mx = fmaxf(w.m, sink), f = expf(w.m - mx);
    const float den = w.l * f + (a.sinks ? expf(sink - mx) : 0.0f);
    float* o = a.out + t * q_cols + int64_t(h) * d;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
        if (lane + 32 * i < d) o[lane + 32 * i] = w.acc[i] * f / den;
}

template <int kPerLane, int kBatch>
cudaError_t launch(const AttentionArgs& a, const AttentionPlan& p, float* part, cudaStream_t s) {
    if (p.row_tiles) {
        const int tile_keys = kTileFloats / a.head_dim;
        const int64_t tiles = (a.n_q + kTileRows - 1) / kTileRows;
        const size_t smem = size_t(2) * size_t(tile_keys) * size_t(a.head_dim) * sizeof(float);
        rows_kernel<kPerLane, kBatch><<<unsigned(tiles * a.n_head), kTileRows * 32, smem, s>>>(a, tile_keys);
        return cudaGetLastError();
    }
    const dim3 grid{unsigned(a.n_q * a.n_head), unsigned(p.n_split)};
    if (p.n_split == 1)
        keys_kernel<kPerLane, kBatch, kWarpsWhole><<<grid, kWarpsWhole * 32, 0, s>>>(a, p.n_split, part);
    else
        keys_kernel<kPerLane, kBatch, kWarpsSplit><<<grid, kWarpsSplit * 32, 0, s>>>(a, p.n_split, part);
    if (p.n_split > 1) {
        if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
        combine_kernel<<<unsigned(a.n_q * a.n_head), kCombineThreads, 0, s>>>(a, p.n_split, part);
    }
    return cudaGetLastError();
}

__global__ void kv_write_kernel(float* kc, float* vc, const float* k, const float* v, int64_t n, int64_t width,
                                const int32_t* pos) {
    const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const int64_t dst = int64_t(*pos) * width + i;  // rows follow each other in the cache as in k and v
    kc[dst] = k[i];
    vc[dst] = v[i];
}

}  // namespace

cudaError_t kv_write(float* k_cache, float* v_cache, const float* k, const float* v, int64_t rows, int64_t width,
                     const int32_t* pos, cudaStream_t s) {
    const int64_t n = rows * width;
    if (n > 0) kv_write_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(k_cache, v_cache, k, v, n, width, pos);
    return cudaGetLastError();
}

cudaError_t attention(const AttentionArgs& a, const AttentionPlan& p, float* partials, cudaStream_t s) {
    if (a.n_q <= 0 || a.n_head <= 0) return cudaGetLastError();
    const int per_lane = (a.head_dim + 31) / 32;
    if (per_lane <= 2) return launch<2, 4>(a, p, partials, s);
    if (per_lane <= 4) return launch<4, 4>(a, p, partials, s);
    if (per_lane <= 8) return launch<8, 4>(a, p, partials, s);
    return launch<16, 2>(a, p, partials, s);
}

}  // namespace zinc::backend::cuda
