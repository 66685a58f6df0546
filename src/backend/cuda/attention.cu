// Causal GQA attention with the optional sliding window, sinks and score soft-cap (plan_attention picks the kernel):
//  - keys_kernel (decode, short prefill chunks): a block of warps per (query row, group of query heads sharing a KV
//    head, key split); the block's keys are dealt to its warps, each K and V row read once for all the group's
//    heads, and the warps merge through shared memory. With one split the block writes the normalized output; with
//    several (long contexts) each block writes its unnormalized partials (max, denominator, output) and
//    combine_kernel merges the splits (flash-decoding), so one row still fills the GPU.
//  - rows_kernel (prefill): a block of kTileRows warps, one query row each, of one head; the K/V rows the block's
//    rows see pass through shared memory in tiles, fetched once for all of them.
// The cache holds f32, f16 or q8_0 values (kv_type.h); kernels read them as f32. kv_write stores a micro-batch's K
// and V rows at the cache rows of its positions, converting them.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/attention_kernels.h"

namespace zinc::backend::cuda {
namespace {

// Warps of a keys_kernel block. Each warp takes its keys a batch at a time, every batch a chain of dependent loads,
// shuffles and exponentials, so a block's time is about its longest warp's batches. Without splits (short contexts)
// a block holds all of its heads' keys: up to 16 warps (a 128-key decode call took 22 µs with 4 warps, 9.4 µs with
// 16), fewer when their merge would not fit in 32 KiB of shared memory. With splits the pieces already spread the
// keys over the GPU, and 4 warps did better (4096 keys: 41 µs against 50).
constexpr int kWarpsSplit = 4;
constexpr int kCombineThreads = 128;
static_assert(kMaxSplits <= kCombineThreads, "the merge kernel computes one split factor per thread");

// ---------------------------------------------------------------- cache reads and writes

__device__ inline int64_t ring_row(int64_t pos, int64_t capacity) { return pos < capacity ? pos : pos % capacity; }

// The q8_0 scales follow all the rows' int8 values (kv_type.h).
__device__ inline const __half* q8_scales(const void* plane, int64_t width, int64_t capacity) {
    return reinterpret_cast<const __half*>(static_cast<const int8_t*>(plane) + capacity * width);
}

// Value `col` of cache row `row`.
__device__ inline float cache_value(const CachePlane& c, int64_t width, int64_t capacity, int64_t row, int64_t col) {
    const int64_t at = row * width + col;
    switch (c.type) {
    case KvType::f16: return __half2float(static_cast<const __half*>(c.data)[at]);
    case KvType::q8_0:
        return __half2float(q8_scales(c.data, width, capacity)[at / kKvBlock]) *
               float(static_cast<const int8_t*>(c.data)[at]);
    default: return static_cast<const float*>(c.data)[at];
    }
}

// Values [col, col + n) of cache row `row` into x (zeros past n). `wide`: n == P and the values start at a multiple of
// P, so that they come in one or a few aligned vector loads (P * 4, P * 2 or P bytes).
template <int P>
__device__ inline void load_values(const CachePlane& c, int64_t width, int64_t capacity, int64_t row, int64_t col,
                                   int n, bool wide, float (&x)[P]) {
    const int64_t at = row * width + col;
    if (!wide) {
#pragma unroll
        for (int e = 0; e < P; ++e) x[e] = e < n ? cache_value(c, width, capacity, row, col + e) : 0.0f;
        return;
    }
    if (c.type == KvType::f32) {
        const float* p = static_cast<const float*>(c.data) + at;
        if constexpr (P >= 4) {
#pragma unroll
            for (int i = 0; i < P / 4; ++i) {
                const float4 w = reinterpret_cast<const float4*>(p)[i];
                x[4 * i] = w.x;
                x[4 * i + 1] = w.y;
                x[4 * i + 2] = w.z;
                x[4 * i + 3] = w.w;
            }
        } else if constexpr (P == 2) {
            const float2 w = *reinterpret_cast<const float2*>(p);
            x[0] = w.x;
            x[1] = w.y;
        } else {
            x[0] = *p;
        }
    } else if (c.type == KvType::f16) {
        const __half* p = static_cast<const __half*>(c.data) + at;
        if constexpr (P >= 8) {
#pragma unroll
            for (int i = 0; i < P / 8; ++i) {
                const uint4 w = reinterpret_cast<const uint4*>(p)[i];
                const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[k]));
                    x[8 * i + 2 * k] = f.x;
                    x[8 * i + 2 * k + 1] = f.y;
                }
            }
        } else if constexpr (P == 4) {
            const uint2 w = *reinterpret_cast<const uint2*>(p);
            const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&w.x));
            const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&w.y));
            x[0] = a.x;
            x[1] = a.y;
            x[2] = b.x;
            x[3] = b.y;
        } else if constexpr (P == 2) {
            const float2 f = __half22float2(*reinterpret_cast<const __half2*>(p));
            x[0] = f.x;
            x[1] = f.y;
        } else {
            x[0] = __half2float(*p);
        }
    } else {
        // q8_0: P divides 32 and the values start at a multiple of P, so they share one block's scale.
        const int8_t* p = static_cast<const int8_t*>(c.data) + at;
        const float d = __half2float(q8_scales(c.data, width, capacity)[at / kKvBlock]);
        if constexpr (P >= 4) {
#pragma unroll
            for (int i = 0; i < P / 4; ++i) {
                const uint32_t w = reinterpret_cast<const uint32_t*>(p)[i];
#pragma unroll
                for (int k = 0; k < 4; ++k) x[4 * i + k] = d * float(int8_t(w >> (8 * k)));
            }
        } else {
#pragma unroll
            for (int e = 0; e < P; ++e) x[e] = d * float(p[e]);
        }
    }
}

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

// Block x: query row x / (n_head / G), query heads [h0, h0 + G) with h0 = x % (n_head / G) * G, which share one KV
// head; block y: the key split. Lane `lane` holds values [lane * P, lane * P + P) of each head (those below
// head_dim): of the G queries, of the G running outputs, and of every K and V row it reads. Each warp keeps a running
// softmax per head; the scores of a batch of keys for all G heads are summed by one butterfly.
template <int P, int G, int kBatch, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) keys_kernel(AttentionArgs a, int n_split, float* part) {
    const int groups = a.n_head / G;
    const int64_t bt = blockIdx.x, t = bt / groups;
    const int h0 = int(bt % groups) * G, split = int(blockIdx.y);
    const int64_t pos0 = *a.pos;
    const int d = a.head_dim, kvh = h0 / (a.n_head / a.n_head_kv);
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const int c0 = lane * P, nv = d - c0 >= P ? P : (d > c0 ? d - c0 : 0);
    const bool wide = d == 32 * P && a.kv_width % P == 0;
    const int64_t chunk = split_chunk(visible_keys(pos0 + a.n_q - 1, a.window), n_split);
    const KeyRange keys = split_keys(visible_keys(pos0 + t, a.window), chunk, split);
    const int64_t q_cols = int64_t(a.n_head) * d, col = int64_t(kvh) * d + c0;

    float q[G][P], acc[G][P], m[G], l[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < P; ++e) {
            q[g][e] = e < nv ? a.q[t * q_cols + int64_t(h0 + g) * d + c0 + e] : 0.0f;
            acc[g][e] = 0.0f;
        }
    }
    for (int64_t j0 = keys.begin + int64_t(warp) * kBatch; j0 < keys.end; j0 += int64_t(kWarps) * kBatch) {
        const int n = keys.end - j0 < kBatch ? int(keys.end - j0) : kBatch;
        float kx[kBatch][P], vx[kBatch][P];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int64_t row = ring_row(j0 + (b < n ? b : 0), a.capacity);  // stays inside the cache
            load_values<P>(a.k, a.kv_width, a.capacity, row, col, nv, wide, kx[b]);
            load_values<P>(a.v, a.kv_width, a.capacity, row, col, nv, wide, vx[b]);
        }
        float s[kBatch][G];
#pragma unroll
        for (int b = 0; b < kBatch; ++b)
#pragma unroll
            for (int g = 0; g < G; ++g) {
                s[b][g] = 0.0f;
#pragma unroll
                for (int e = 0; e < P; ++e) s[b][g] += q[g][e] * kx[b][e];
            }
        // The xor butterfly leaves the same sums on every lane, so m and l stay lane-uniform.
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
#pragma unroll
            for (int b = 0; b < kBatch; ++b)
#pragma unroll
                for (int g = 0; g < G; ++g) s[b][g] += __shfl_xor_sync(0xffffffffu, s[b][g], off);
#pragma unroll
        for (int g = 0; g < G; ++g) {
            float m_new = m[g];
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
                s[b][g] = score(s[b][g], a.scale, a.softcap);
                if (b < n) m_new = fmaxf(m_new, s[b][g]);
            }
            // m_new is finite (key 0 is real), so corr is 0 before the first key, when l and acc are 0 anyway.
            const float corr = expf(m[g] - m_new);
            float p[kBatch];
            l[g] *= corr;
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
                p[b] = b < n ? expf(s[b][g] - m_new) : 0.0f;
                l[g] += p[b];
            }
#pragma unroll
            for (int e = 0; e < P; ++e) {
                float v = acc[g][e] * corr;
#pragma unroll
                for (int b = 0; b < kBatch; ++b) v += p[b] * vx[b][e];
                acc[g][e] = v;
            }
            m[g] = m_new;
        }
    }

    __shared__ float sm_m[kWarps][G], sm_l[kWarps][G], sm_f[kWarps][G], sm_mx[G], sm_den[G];
    __shared__ float sm_acc[kWarps][G][32 * P];
    if (lane == 0)
#pragma unroll
        for (int g = 0; g < G; ++g) {
            sm_m[warp][g] = m[g];
            sm_l[warp][g] = l[g];
        }
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
        for (int e = 0; e < P; ++e) sm_acc[warp][g][c0 + e] = acc[g][e];
    __syncthreads();

    // A warp that saw no key has l = 0 (one that did has l >= 1: its running max key adds exp(0)) and m = -inf;
    // it gets the factor 0 rather than exp(-inf - -inf).
    if (int(threadIdx.x) < G) {
        const int g = int(threadIdx.x);
        const bool sink = n_split == 1 && a.sinks;
        float mx = sink ? a.sinks[h0 + g] : -INFINITY;
        for (int i = 0; i < kWarps; ++i)
            if (sm_l[i][g] > 0.0f) mx = fmaxf(mx, sm_m[i][g]);
        float den = sink ? expf(a.sinks[h0 + g] - mx) : 0.0f;
        for (int i = 0; i < kWarps; ++i) {
            const float f = sm_l[i][g] > 0.0f ? expf(sm_m[i][g] - mx) : 0.0f;
            sm_f[i][g] = f;
            den += sm_l[i][g] * f;
        }
        sm_mx[g] = mx;
        sm_den[g] = den;
    }
    __syncthreads();
    for (int c = int(threadIdx.x); c < G * d; c += int(blockDim.x)) {
        const int g = c / d, i_c = c % d;
        float num = 0.0f;
        for (int i = 0; i < kWarps; ++i) num += sm_acc[i][g][i_c] * sm_f[i][g];
        if (n_split == 1)
            a.out[t * q_cols + int64_t(h0 + g) * d + i_c] = num / sm_den[g];  // the own position is seen: den > 0
        else
            partial_acc(part, t * a.n_head + h0 + g, n_split, split, d)[i_c] = num;
    }
    // An empty split (a row that sees fewer keys than the longest) writes max -inf and denominator 0.
    if (n_split > 1 && int(threadIdx.x) < G) {
        const int g = int(threadIdx.x);
        float* ml = partial_ml(part, a, t * a.n_head + h0 + g, n_split, split);
        ml[0] = sm_mx[g];
        ml[1] = sm_den[g];
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
            const int64_t row = ring_row(j0 + e / d, a.capacity), c = int64_t(kvh) * d + e % d;
            ks[e] = cache_value(a.k, a.kv_width, a.capacity, row, c);
            vs[e] = cache_value(a.v, a.kv_width, a.capacity, row, c);
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
cudaError_t launch_rows(const AttentionArgs& a, cudaStream_t s) {
    const int tile_keys = kTileFloats / a.head_dim;
    const int64_t tiles = (a.n_q + kTileRows - 1) / kTileRows;
    const size_t smem = size_t(2) * size_t(tile_keys) * size_t(a.head_dim) * sizeof(float);
    rows_kernel<kPerLane, kBatch><<<unsigned(tiles * a.n_head), kTileRows * 32, smem, s>>>(a, tile_keys);
    return cudaGetLastError();
}

// Batches of 4 keys where a lane's queries and outputs leave the registers for it, else 2; whole-context blocks
// of up to 16 warps whose merge fits in 32 KiB.
template <int P, int G>
cudaError_t launch_keys(const AttentionArgs& a, const AttentionPlan& p, float* part, cudaStream_t s) {
    constexpr int kBatch = G * P <= 16 ? 4 : 2;
    constexpr int kWarpsWhole = 256 / (G * P) < 16 ? 256 / (G * P) : 16;
    const dim3 grid{unsigned(a.n_q * (a.n_head / G)), unsigned(p.n_split)};
    if (p.n_split == 1) {
        keys_kernel<P, G, kBatch, kWarpsWhole><<<grid, kWarpsWhole * 32, 0, s>>>(a, p.n_split, part);
        return cudaGetLastError();
    }
    keys_kernel<P, G, kBatch, kWarpsSplit><<<grid, kWarpsSplit * 32, 0, s>>>(a, p.n_split, part);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    combine_kernel<<<unsigned(a.n_q * a.n_head), kCombineThreads, 0, s>>>(a, p.n_split, part);
    return cudaGetLastError();
}

template <int P>
cudaError_t launch_keys_p(const AttentionArgs& a, const AttentionPlan& p, float* part, cudaStream_t s) {
    // heads_per_block keeps G * P <= 32.
    if constexpr (8 * P <= 32)
        if (p.heads == 8) return launch_keys<P, 8>(a, p, part, s);
    if constexpr (4 * P <= 32)
        if (p.heads == 4) return launch_keys<P, 4>(a, p, part, s);
    if (p.heads == 2) return launch_keys<P, 2>(a, p, part, s);
    return launch_keys<P, 1>(a, p, part, s);
}

// kv_write: thread i converts value i % width of row i / width. For q8_0 the 32 threads of a warp hold one block
// (width is a multiple of 32, so blocks never straddle rows, and rows * width is, so whole warps return together).
__device__ inline void store_value(const CachePlane& c, int64_t width, int64_t capacity, int64_t row, int64_t col,
                                   float x) {
    const int64_t at = row * width + col;
    switch (c.type) {
    case KvType::f16: static_cast<__half*>(c.data)[at] = __float2half_rn(x); return;
    case KvType::q8_0: {
        // d = amax / 127 and q = round(x / d), as the CPU backend and ggml's reference quantize_row_q8_0.
        float amax = fabsf(x);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        static_cast<int8_t*>(c.data)[at] = int8_t(roundf(x * id));
        if (col % kKvBlock == 0)
            const_cast<__half*>(q8_scales(c.data, width, capacity))[at / kKvBlock] = __float2half_rn(d);
        return;
    }
    default: static_cast<float*>(c.data)[at] = x; return;
    }
}

__global__ void kv_write_kernel(CachePlane kc, CachePlane vc, int64_t width, int64_t capacity, const float* k,
                                const float* v, int64_t n, const int32_t* pos) {
    const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const int64_t row = ring_row(int64_t(*pos) + i / width, capacity), col = i % width;
    store_value(kc, width, capacity, row, col, k[i]);
    store_value(vc, width, capacity, row, col, v[i]);
}

}  // namespace

cudaError_t kv_write(CachePlane k_cache, CachePlane v_cache, int64_t width, int64_t capacity, const float* k,
                     const float* v, int64_t rows, const int32_t* pos, cudaStream_t s) {
    const int64_t n = rows * width;
    if (n > 0)
        kv_write_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(k_cache, v_cache, width, capacity, k, v, n, pos);
    return cudaGetLastError();
}

cudaError_t attention(const AttentionArgs& a, const AttentionPlan& p, float* partials, cudaStream_t s) {
    if (a.n_q <= 0 || a.n_head <= 0) return cudaGetLastError();
    if (p.row_tiles) {
        const int per_lane = (a.head_dim + 31) / 32;
        if (per_lane <= 2) return launch_rows<2, 4>(a, s);
        if (per_lane <= 4) return launch_rows<4, 4>(a, s);
        if (per_lane <= 8) return launch_rows<8, 4>(a, s);
        return launch_rows<16, 2>(a, s);
    }
    switch (values_per_lane(a.head_dim)) {
    case 1: return launch_keys_p<1>(a, p, partials, s);
    case 2: return launch_keys_p<2>(a, p, partials, s);
    case 4: return launch_keys_p<4>(a, p, partials, s);
    case 8: return launch_keys_p<8>(a, p, partials, s);
    default: return launch_keys_p<16>(a, p, partials, s);
    }
}

}  // namespace zinc::backend::cuda
