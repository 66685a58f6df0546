// Causal GQA attention with the optional sliding window, sinks and score soft-cap (plan_attention picks the kernel):
//  - keys_kernel (decode and short prefill chunks at short contexts): a block of warps per (query row, head, key
//    split); the block's keys are dealt to its warps, and the warps merge through shared memory.
//  - over an f16 cache with head_dim 64, 128 or 256, the tensor-core kernel of attention_mma.cu instead of these two,
//    and for prefill chunks over an f16 cache (head_dim up to 512) the flash kernel of attention_flash.cu;
//  - tile_kernel (the same at long contexts): a block per (query row, group of query heads sharing a KV head, key
//    split) that copies its keys' K and V rows into shared memory a tile at a time, in the background, and reads
//    each row once for all the group's heads.
//  With one split a block writes the normalized output; with several (long contexts) each block writes its
//  unnormalized partials (max, denominator, output) and combine_kernel merges the splits (flash-decoding), so one
//  row still fills the GPU.
//  - rows_kernel (prefill): a block of kTileRows warps, one query row each, of one head; the K/V rows the block's
//    rows see pass through shared memory in tiles, fetched once for all of them.
// The cache holds f32, f16 or q8_0 values (kv_type.h); kernels compute in f32. kv_write stores a micro-batch's K
// and V rows at the cache rows of its positions, converting them.
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/attention_split.cuh"
#include "backend/cuda/kv_store.cuh"
#include "backend/cuda/launch.cuh"

namespace zinc::backend::cuda {
namespace {

// Warps of a keys_kernel block. Each warp takes its keys a batch at a time, every batch a chain of dependent loads,
// shuffles and exponentials, so a block's time is about its longest warp's batches. Without splits (short contexts)
// a block holds all of a head's keys: up to 16 warps (a 128-key decode call took 22 µs with 4 warps, 9.4 µs with
// 16), fewer when their merge would not fit in 32 KiB of shared memory. With splits the pieces already spread the
// keys over the GPU, and 4 warps did better (4096 keys: 41 µs against 50).
constexpr int kWarpsSplit = 4;
constexpr int kCombineThreads = 128;
// The tile kernel: 4 warps; K and V tiles of about 8 KiB each, twice (one in use, one arriving), at most 64 keys;
// up to two pieces of 8 outputs a thread (G * head_dim <= 2048); within the 48 KiB a block gets without asking.
constexpr int kTileThreads = 128;
constexpr int kTileBytes = 8192;
constexpr int kTileMaxKeys = 64;
constexpr size_t kTileSmem = 48 * 1024;
static_assert(kMaxSplits <= kCombineThreads, "the merge kernel computes one split factor per thread");

// ---------------------------------------------------------------- cache reads and writes

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

// One batch of n (1..kBatch, the same on every lane) keys into a warp's running softmax: sums each lane's partial dot
// products s over the warp, turns them into the weights p = exp(score - max) (0 past n), and updates the running max m
// and denominator l. Returns the factor that rescales the output accumulated so far.
template <int kBatch>
__device__ __forceinline__ float softmax_batch(float (&s)[kBatch], int n, float scale, float softcap, float& m,
                                               float& l, float (&p)[kBatch]) {
    // The xor butterfly leaves the same sums on every lane, so m and l stay lane-uniform.
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
    // m_new is finite (key 0 is real), so corr is 0 before the first key, when l and the output are 0 anyway.
    const float corr = expf(m - m_new);
    l *= corr;
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
        p[b] = b < n ? expf(s[b] - m_new) : 0.0f;
        l += p[b];
    }
    m = m_new;
    return corr;
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
        float p[kBatch];
        const float corr = softmax_batch<kBatch>(s, n, scale, softcap, m, l, p);
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
    }
};

// Block x: query row x / n_head, head x % n_head; block y: the key split. Lane `lane` holds values [lane * P,
// lane * P + P) of the head (those below head_dim): of the query, of the running output, and of every K and V row it
// reads. Each warp keeps a running softmax of its keys; the warps merge through shared memory.
template <int P, int kBatch, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) keys_kernel(AttentionArgs a, int n_split, float* part) {
    begin_kernel();
    const int64_t bt = blockIdx.x, t = bt / a.n_head;
    const int h = int(bt % a.n_head), split = int(blockIdx.y);
    int64_t pos0, last;
    select_row(a, t, pos0, last);
    const int d = a.head_dim, kvh = h / (a.n_head / a.n_head_kv);
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const int c0 = lane * P, nv = d - c0 >= P ? P : (d > c0 ? d - c0 : 0);
    const bool wide = d == 32 * P && a.kv_width % P == 0;
    const int64_t chunk = split_chunk(visible_keys(last, a.window), n_split);
    const KeyRange keys = split_keys(visible_keys(pos0 + t, a.window), chunk, split);
    const int64_t q_cols = int64_t(a.n_head) * d, col = int64_t(kvh) * d + c0;

    float q[P], acc[P], m = -INFINITY, l = 0.0f;
#pragma unroll
    for (int e = 0; e < P; ++e) {
        q[e] = e < nv ? a.q[t * q_cols + int64_t(h) * d + c0 + e] : 0.0f;
        acc[e] = 0.0f;
    }
    for (int64_t j0 = keys.begin + int64_t(warp) * kBatch; j0 < keys.end; j0 += int64_t(kWarps) * kBatch) {
        const int n = keys.end - j0 < kBatch ? int(keys.end - j0) : kBatch;
        float kx[kBatch][P], vx[kBatch][P], s[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            const int64_t row = cache_row(a, j0 + (b < n ? b : 0));  // stays inside the cache
            load_values<P>(a.k, a.kv_width, a.capacity, row, col, nv, wide, kx[b]);
            load_values<P>(a.v, a.kv_width, a.capacity, row, col, nv, wide, vx[b]);
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            s[b] = 0.0f;
#pragma unroll
            for (int e = 0; e < P; ++e) s[b] += q[e] * kx[b][e];
        }
        float pb[kBatch];
        const float corr = softmax_batch<kBatch>(s, n, a.scale, a.softcap, m, l, pb);
#pragma unroll
        for (int e = 0; e < P; ++e) {
            float v = acc[e] * corr;
#pragma unroll
            for (int b = 0; b < kBatch; ++b) v += pb[b] * vx[b][e];
            acc[e] = v;
        }
    }

    __shared__ float sm_m[kWarps], sm_l[kWarps];
    __shared__ float sm_acc[kWarps][32 * P];
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
    }
#pragma unroll
    for (int e = 0; e < P; ++e) sm_acc[warp][c0 + e] = acc[e];
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
    for (int c = int(threadIdx.x); c < d; c += int(blockDim.x)) {
        float num = 0.0f;
        for (int i = 0; i < kWarps; ++i) num += sm_acc[i][c] * f[i];
        if (n_split == 1)
            a.out[t * q_cols + int64_t(h) * d + c] = num / den;  // the own position is seen: den > 0
        else
            partial_acc(part, bt, n_split, split, d)[c] = num;
    }
    // An empty split (a row that sees fewer keys than the longest) writes max -inf and denominator 0.
    if (n_split > 1 && threadIdx.x == 0) {
        float* ml = partial_ml(part, a, bt, n_split, split);
        ml[0] = mx;
        ml[1] = den;
    }
}

// ---------------------------------------------------------------- tile kernel (long contexts)

// A tile of keys in shared memory: the rows of one KV head as the cache stores them (a q8_0 row's scales after its
// values), `stride` bytes apart; the padding past each row keeps the 16-byte reads of consecutive rows on distinct
// banks.
struct TilePlane {
    const char* base = nullptr;  // shared memory
    KvType type = KvType::f32;
    int stride = 0, d = 0;

    // Values [c, c + 8) of row r (c a multiple of 8).
    __device__ void eight(int r, int c, float (&x)[8]) const {
        const char* row = base + r * stride;
        if (type == KvType::f32) {
            const float4 a = *reinterpret_cast<const float4*>(row + 4 * c);
            const float4 b = *reinterpret_cast<const float4*>(row + 4 * c + 16);
            x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
        } else if (type == KvType::f16) {
            const uint4 w = *reinterpret_cast<const uint4*>(row + 2 * c);
            const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float2 f = __half22float2(__halves2half2(__ushort_as_half(uint16_t(words[k] & 0xffffu)),
                                                               __ushort_as_half(uint16_t(words[k] >> 16))));
                x[2 * k] = f.x;
                x[2 * k + 1] = f.y;
            }
        } else {
            const uint2 w = *reinterpret_cast<const uint2*>(row + c);
            const float scale = __half2float(reinterpret_cast<const __half*>(row + d)[c / kKvBlock]);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                x[k] = scale * float(int8_t(w.x >> (8 * k)));
                x[4 + k] = scale * float(int8_t(w.y >> (8 * k)));
            }
        }
    }
};

// Bytes of one row of a plane in a tile: its values, a q8_0 row's scales, 16 bytes of padding.
__host__ __device__ inline int tile_stride(KvType t, int d) {
    const int values = t == KvType::f32 ? 4 * d : (t == KvType::f16 ? 2 * d : d);
    const int scales = t == KvType::q8_0 ? d / kKvBlock * 2 : 0;
    return (values + scales + 15) / 16 * 16 + 16;
}

// Starts copying the cache rows of keys [j, j + n) of KV head kvh from plane c into shared memory at dst, in 16-byte
// pieces (4-byte pieces for the q8_0 scales) that complete in the background.
__device__ inline void tile_fetch(const AttentionArgs& a, const CachePlane& c, int kvh, int64_t j, int n, char* dst,
                                  int stride) {
    const int d = a.head_dim;
    const int value_bytes = c.type == KvType::f32 ? 4 * d : (c.type == KvType::f16 ? 2 * d : d);
    const int elem = c.type == KvType::f32 ? 4 : (c.type == KvType::f16 ? 2 : 1);
    const int pieces = value_bytes / 16;
    for (int i = int(threadIdx.x); i < n * pieces; i += int(blockDim.x)) {
        const int r = i / pieces, k = i % pieces;
        const int64_t row = cache_row(a, j + r);
        const char* src = static_cast<const char*>(c.data) + (row * a.kv_width + int64_t(kvh) * d) * elem + 16 * k;
        __pipeline_memcpy_async(dst + r * stride + 16 * k, src, 16);
    }
    if (c.type == KvType::q8_0) {
        const int scale_pieces = d / 64;  // 4 bytes: two scales
        const char* scales = static_cast<const char*>(c.data) + a.capacity * a.kv_width;
        for (int i = int(threadIdx.x); i < n * scale_pieces; i += int(blockDim.x)) {
            const int r = i / scale_pieces, k = i % scale_pieces;
            const int64_t row = cache_row(a, j + r);
            const char* src = scales + (row * a.kv_width + int64_t(kvh) * d) / kKvBlock * 2 + 4 * k;
            __pipeline_memcpy_async(dst + r * stride + d + 4 * k, src, 4);
        }
    }
}

// Block x: query row x / (n_head / G) and its G query heads h0 = x % (n_head / G) * G, ... that share one KV head;
// block y: the key split. The block's keys pass through shared memory in tiles of tile_keys (the next one copied
// while the current one is used), and each tile is used in three steps: the threads' (head, key) scores, one warp
// per head updating its running softmax with the tile's scores, and the outputs. The G * head_dim outputs are cut
// into pieces of 8 values; with n_piece of them, thread i keeps pieces i % n_piece + 128 k (kPieces of them) summed
// over every parts-th key of the tile from key i / n_piece, parts = 128 / n_piece (1 when n_piece >= 128), and the
// parts are added up at the end.
template <int kPieces>
__global__ void __launch_bounds__(kTileThreads) tile_kernel(AttentionArgs a, int G, int tile_keys, int n_split,
                                                            float* part_out) {
    begin_kernel();
    extern __shared__ __align__(16) char sm[];
    const int d = a.head_dim, groups = a.n_head / G;
    const int64_t bt = blockIdx.x, t = bt / groups;
    const int h0 = int(bt % groups) * G, split = int(blockIdx.y), kvh = h0 / (a.n_head / a.n_head_kv);
    const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
    int64_t pos0, last;
    select_row(a, t, pos0, last);
    const int64_t chunk = split_chunk(visible_keys(last, a.window), n_split);
    const KeyRange keys = split_keys(visible_keys(pos0 + t, a.window), chunk, split);
    const int64_t q_cols = int64_t(a.n_head) * d;
    const int k_stride = tile_stride(a.k.type, d), v_stride = tile_stride(a.v.type, d);

    // Shared memory: G queries, two K tiles, two V tiles, the tile's scores, and per head the running max, the
    // denominator and the tile's correction factor.
    float* qs = reinterpret_cast<float*>(sm);
    char* const k_tiles = sm + 4 * G * d;                     // buffer b at b * tile_keys * k_stride
    char* const v_tiles = k_tiles + 2 * tile_keys * k_stride;  // buffer b at b * tile_keys * v_stride
    float* sc = reinterpret_cast<float*>(v_tiles + 2 * tile_keys * v_stride);
    float* run_m = sc + G * tile_keys;
    float* run_l = run_m + G;
    float* corr = run_l + G;

    for (int i = tid; i < G * d; i += kTileThreads) qs[i] = a.q[t * q_cols + int64_t(h0) * d + i];
    if (tid < G) {
        run_m[tid] = -INFINITY;
        run_l[tid] = 0.0f;
    }
    const int n_piece = G * d / 8, parts = n_piece < kTileThreads ? kTileThreads / n_piece : 1;
    const int piece0 = tid % n_piece, part = tid / n_piece;  // part >= parts: the thread has no piece
    float acc[kPieces][8];
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[i][e] = 0.0f;
    const int64_t n_keys = keys.end - keys.begin;
    const int n_tiles = int((n_keys + tile_keys - 1) / tile_keys);
    if (n_tiles > 0) {
        const int n0 = int(n_keys < tile_keys ? n_keys : tile_keys);
        tile_fetch(a, a.k, kvh, keys.begin, n0, k_tiles, k_stride);
        tile_fetch(a, a.v, kvh, keys.begin, n0, v_tiles, v_stride);
        __pipeline_commit();
    }
    for (int it = 0; it < n_tiles; ++it) {
        const int64_t j = keys.begin + int64_t(it) * tile_keys;
        const int n = int(keys.end - j < tile_keys ? keys.end - j : tile_keys);
        if (it + 1 < n_tiles) {
            const int64_t jn = j + tile_keys;
            const int nn = int(keys.end - jn < tile_keys ? keys.end - jn : tile_keys);
            const int b = (it + 1) & 1;
            tile_fetch(a, a.k, kvh, jn, nn, k_tiles + b * tile_keys * k_stride, k_stride);
            tile_fetch(a, a.v, kvh, jn, nn, v_tiles + b * tile_keys * v_stride, v_stride);
            __pipeline_commit();
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads();
        const int b = it & 1;
        const TilePlane K{k_tiles + b * tile_keys * k_stride, a.k.type, k_stride, d};
        const TilePlane V{v_tiles + b * tile_keys * v_stride, a.v.type, v_stride, d};

        // Scores: pair i is key i % tile_keys of head i / tile_keys; consecutive lanes read consecutive rows.
        for (int i = tid; i < G * tile_keys; i += kTileThreads) {
            const int g = i / tile_keys, r = i % tile_keys;
            float s = -INFINITY;
            if (r < n) {
                const float* qg = qs + g * d;
                float dot_a = 0.0f, dot_b = 0.0f;  // two chains of additions
                for (int c = 0; c < d; c += 8) {
                    float x[8];
                    K.eight(r, c, x);
                    const float4 qa = *reinterpret_cast<const float4*>(qg + c);
                    const float4 qb = *reinterpret_cast<const float4*>(qg + c + 4);
                    dot_a += qa.x * x[0] + qa.y * x[1] + qa.z * x[2] + qa.w * x[3];
                    dot_b += qb.x * x[4] + qb.y * x[5] + qb.z * x[6] + qb.w * x[7];
                }
                s = score(dot_a + dot_b, a.scale, a.softcap);
            }
            sc[i] = s;
        }
        __syncthreads();

        // The running softmax of each head: the tile's max, its probabilities in place of the scores, and the
        // factor that rescales what came before (0 before the first tile, when there is nothing to rescale).
        for (int g = warp; g < G; g += kTileThreads / 32) {
            float* sg = sc + g * tile_keys;
            float mx = -INFINITY;
            for (int r = lane; r < n; r += 32) mx = fmaxf(mx, sg[r]);
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float m_new = fmaxf(run_m[g], mx);
            float sum = 0.0f;
            for (int r = lane; r < tile_keys; r += 32) {
                const float p = r < n ? expf(sg[r] - m_new) : 0.0f;
                sg[r] = p;
                sum += p;
            }
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            __syncwarp();
            if (lane == 0) {
                const float f = expf(run_m[g] - m_new);
                corr[g] = f;
                run_l[g] = run_l[g] * f + sum;
                run_m[g] = m_new;
            }
        }
        __syncthreads();

        // Outputs: values [c, c + 8) of head g gather the tile's V rows with the head's probabilities.
        if (part < parts)
#pragma unroll
            for (int i = 0; i < kPieces; ++i) {
                const int piece = piece0 + i * kTileThreads;
                if (piece >= n_piece) break;
                const int g = piece * 8 / d, c = piece * 8 % d;
                const float* pg = sc + g * tile_keys;
                const float f = corr[g];
#pragma unroll
                for (int e = 0; e < 8; ++e) acc[i][e] *= f;
                for (int r = part; r < n; r += parts) {
                    float x[8];
                    V.eight(r, c, x);
                    const float pr = pg[r];
#pragma unroll
                    for (int e = 0; e < 8; ++e) acc[i][e] += pr * x[e];
                }
            }
        __syncthreads();  // the tile's buffers are refilled next
    }

    // The parts' sums through shared memory (the tile buffers, free now), then with one split the output, normalized
    // with the sink; with several the partials (an empty split: max -inf, denominator 0, output 0).
    float* sums = reinterpret_cast<float*>(k_tiles);  // [part][value]: parts * G * d floats
    if (parts > 1) {
        if (part < parts)
#pragma unroll
            for (int e = 0; e < 8; ++e) sums[part * G * d + piece0 * 8 + e] = acc[0][e];
        __syncthreads();
    }
    if (part == 0)
#pragma unroll
        for (int i = 0; i < kPieces; ++i) {
            const int piece = piece0 + i * kTileThreads;
            if (piece >= n_piece) break;
            const int g = piece * 8 / d, c = piece * 8 % d;
            float f = 1.0f, den = 1.0f;
            if (n_split == 1) {
                const float m = run_m[g], sink = a.sinks ? a.sinks[h0 + g] : -INFINITY, mx = fmaxf(m, sink);
                f = expf(m - mx);
                den = run_l[g] * f + (a.sinks ? expf(sink - mx) : 0.0f);
            }
            float* o = n_split == 1 ? a.out + t * q_cols + int64_t(h0 + g) * d + c
                                    : partial_acc(part_out, t * a.n_head + h0 + g, n_split, split, d) + c;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                float v = acc[i][e];
                for (int k = 1; k < parts; ++k) v += sums[k * G * d + piece * 8 + e];
                o[e] = v * f / den;
            }
        }
    if (n_split > 1 && tid < G) {
        float* ml = partial_ml(part_out, a, t * a.n_head + h0 + tid, n_split, split);
        ml[0] = run_m[tid];
        ml[1] = run_l[tid];
    }
}

// Merges the n_split partials of one (row, head) block with the sink: out = sum_s f_s acc_s / (sum_s f_s l_s +
// exp(sink - M)), f_s = exp(m_s - M), M the largest of the splits' maxima and the sink.
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(AttentionArgs a, int n_split, float* part) {
    begin_kernel();
    const int64_t bt = blockIdx.x;
    const int h = int(bt % a.n_head), d = a.head_dim, tid = int(threadIdx.x);
    const int64_t t = bt / a.n_head;
    __shared__ float sm_m[kMaxSplits], sm_l[kMaxSplits], sm_f[kMaxSplits], sm_den;
    if (tid < n_split) {
        const float* ml = partial_ml(part, a, bt, n_split, tid);
        sm_m[tid] = ml[0];
        sm_l[tid] = ml[1];
    }
    __syncthreads();
    // One warp finds M and the denominator; split 0 holds the row's first visible key, so M is finite.
    if (tid < 32) {
        float mx = a.sinks ? a.sinks[h] : -INFINITY;
        for (int s = tid; s < n_split; s += 32)
            if (sm_l[s] > 0.0f) mx = fmaxf(mx, sm_m[s]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        float den = 0.0f;
        for (int s = tid; s < n_split; s += 32) {
            const float f = sm_l[s] > 0.0f ? expf(sm_m[s] - mx) : 0.0f;
            sm_f[s] = f;
            den += sm_l[s] * f;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) den += __shfl_xor_sync(0xffffffffu, den, off);
        if (tid == 0) sm_den = den + (a.sinks ? expf(a.sinks[h] - mx) : 0.0f);
    }
    __syncthreads();
    const float* pa = partial_acc(part, bt, n_split, 0, d);
    float* o = a.out + out_row(a, t) * int64_t(a.n_head) * d + int64_t(h) * d;
    for (int c = tid; c < d; c += int(blockDim.x)) {
        float num = 0.0f;
#pragma unroll 8
        for (int s = 0; s < n_split; ++s) num += pa[int64_t(s) * d + c] * sm_f[s];
        o[c] = num / sm_den;
    }
}

// Block x: query rows [x / n_head * kTileRows, + kTileRows) of head x % n_head. Shared memory: tile_keys rows of K,
// then of V (head_dim values each).
template <int kPerLane, int kBatch>
__global__ void __launch_bounds__(kTileRows * 32) rows_kernel(AttentionArgs a, int tile_keys) {
    begin_kernel();
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
            const int64_t row = cache_row(a, j0 + e / d), c = int64_t(kvh) * d + e % d;
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
    launch(rows_kernel<kPerLane, kBatch>, unsigned(tiles * a.n_head), kTileRows * 32, smem, s, a, tile_keys);
    return cudaGetLastError();
}

// Batches of 4 keys (2 for the widest heads); whole-context blocks of up to 16 warps, whose merge fits in 32 KiB.
template <int P>
cudaError_t launch_keys(const AttentionArgs& a, const AttentionPlan& p, float* part, cudaStream_t s) {
    constexpr int kBatch = P <= 8 ? 4 : 2;
    constexpr int kWarpsWhole = 256 / P < 16 ? 256 / P : 16;
    const dim3 grid{unsigned(a.n_q * a.n_head), unsigned(p.n_split)};
    if (p.n_split == 1)
        launch(keys_kernel<P, kBatch, kWarpsWhole>, grid, kWarpsWhole * 32, 0, s, a, p.n_split, part);
    else
        launch(keys_kernel<P, kBatch, kWarpsSplit>, grid, kWarpsSplit * 32, 0, s, a, p.n_split, part);
    return cudaGetLastError();
}

// The tile kernel's shared memory for tiles of `keys` keys.
size_t tile_smem(const AttentionArgs& a, int heads, int keys) {
    const int d = a.head_dim;
    return size_t(4) * size_t(heads) * size_t(d) +
           size_t(2) * size_t(keys) * size_t(tile_stride(a.k.type, d) + tile_stride(a.v.type, d)) +
           size_t(4) * size_t(heads) * size_t(keys + 3);
}

// The tile kernel copies whole 16-byte pieces of aligned rows (and a q8_0 row's scales 4 bytes at a time).
bool tiles_fit(const AttentionArgs& a, int heads, int keys) {
    const int d = a.head_dim;
    for (const CachePlane* c : {&a.k, &a.v}) {
        const int elem = c->type == KvType::f32 ? 4 : (c->type == KvType::f16 ? 2 : 1);
        if ((d * elem) % 16 != 0 || (a.kv_width * elem) % 16 != 0) return false;
        if (c->type == KvType::q8_0 && d % 64 != 0) return false;
    }
    return d % 8 == 0 && heads * d <= 16 * kTileThreads && tile_smem(a, heads, keys) <= kTileSmem;
}

cudaError_t launch_tiles(const AttentionArgs& a, const AttentionPlan& p, int keys, float* part, cudaStream_t s) {
    const dim3 grid{unsigned(a.n_q * (a.n_head / p.heads)), unsigned(p.n_split)};
    const size_t smem = tile_smem(a, p.heads, keys);
    if (p.heads * a.head_dim <= 8 * kTileThreads)
        launch(tile_kernel<1>, grid, kTileThreads, smem, s, a, p.heads, keys, p.n_split, part);
    else
        launch(tile_kernel<2>, grid, kTileThreads, smem, s, a, p.heads, keys, p.n_split, part);
    return cudaGetLastError();
}

// kv_write: thread i converts value i % width of row i / width (for q8_0 the 32 threads of a warp hold one block:
// width is a multiple of 32, so blocks never straddle rows, and rows * width is, so whole warps return together).
__global__ void kv_write_kernel(CachePlane kc, CachePlane vc, int64_t width, int64_t capacity, const int32_t* pages,
                                int64_t page_rows, const float* k, const float* v, int64_t n, const int32_t* pos) {
    begin_kernel();
    const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const int64_t row = cache_row(int64_t(*pos) + i / width, capacity, pages, page_rows), col = i % width;
    store_value(kc, width, capacity, row, col, k[i]);
    store_value(vc, width, capacity, row, col, v[i]);
}

}  // namespace

cudaError_t kv_write(CachePlane k_cache, CachePlane v_cache, int64_t width, int64_t capacity, const int32_t* pages,
                     int64_t page_rows, const float* k, const float* v, int64_t rows, const int32_t* pos,
                     cudaStream_t s) {
    const int64_t n = rows * width;
    if (n > 0)
        launch(kv_write_kernel, unsigned((n + 255) / 256), 256, 0, s, k_cache, v_cache, width, capacity, pages,
               page_rows, k, v, n, pos);
    return cudaGetLastError();
}

cudaError_t attention(const AttentionArgs& a, const AttentionPlan& p, float* partials, cudaStream_t s) {
    if (a.n_q <= 0 || a.n_head <= 0) return cudaGetLastError();
    if (p.flash) return attention_flash(a, p, s);
    if (p.row_tiles) {
        const int per_lane = (a.head_dim + 31) / 32;
        if (per_lane <= 2) return launch_rows<2, 4>(a, s);
        if (per_lane <= 4) return launch_rows<4, 4>(a, s);
        if (per_lane <= 8) return launch_rows<8, 4>(a, s);
        return launch_rows<16, 2>(a, s);
    }
    cudaError_t e = cudaSuccess;
    // Tiles of about kTileBytes per plane, at most kTileMaxKeys keys.
    const int row_bytes = tile_stride(a.k.type, a.head_dim) > tile_stride(a.v.type, a.head_dim)
                              ? tile_stride(a.k.type, a.head_dim)
                              : tile_stride(a.v.type, a.head_dim);
    const int tile_keys = kTileBytes / row_bytes < kTileMaxKeys ? kTileBytes / row_bytes : kTileMaxKeys;
    if (p.mma) {
        e = attention_mma(a, p, partials, s);
    } else if (p.heads > 1 && tile_keys >= 4 && tiles_fit(a, p.heads, tile_keys)) {
        e = launch_tiles(a, p, tile_keys, partials, s);
    } else {
        switch (values_per_lane(a.head_dim)) {
        case 1: e = launch_keys<1>(a, p, partials, s); break;
        case 2: e = launch_keys<2>(a, p, partials, s); break;
        case 4: e = launch_keys<4>(a, p, partials, s); break;
        case 8: e = launch_keys<8>(a, p, partials, s); break;
        default: e = launch_keys<16>(a, p, partials, s); break;
        }
    }
    if (e != cudaSuccess || p.n_split == 1) return e;
    launch(combine_kernel, unsigned(a.n_q * a.n_head), kCombineThreads, 0, s, a, p.n_split, partials);
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
