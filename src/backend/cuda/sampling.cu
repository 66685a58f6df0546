// Greedy decoding on the GPU: the host needs only the chosen token id, not the whole logit row.
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "backend/cuda/launch.cuh"
#include "backend/cuda/sampling_kernels.h"

namespace zinc::backend::cuda {
namespace {

constexpr int kThreads = 1024;

// (value, index) with the larger value winning and, on equal values, the smaller index, so the result is the
// first maximum whatever order the threads combine in. A NaN or an infinity anywhere in the row wins over everything
// as index -1: the row has no argmax, and the host is told so.
struct Best {
    float v;
    int32_t i;
};

constexpr int32_t kNotFinite = -1;

__device__ __forceinline__ Best better(Best a, Best b) {
    if (a.i == kNotFinite || b.i == kNotFinite) return {a.v, kNotFinite};
    if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
    return a;
}

__device__ __forceinline__ void consider(Best& b, float v, int64_t j) {
    if (!isfinite(v)) b.i = kNotFinite;
    if (b.i != kNotFinite && (b.i == INT32_MAX || v > b.v)) b = {v, int32_t(j)};
}

// One block per row: each thread scans a strided slice in order, then warps and the block reduce. A 16-byte aligned
// row is read four values at a time with eight loads in flight per thread, so that a thread reading its ~150 values
// of a vocabulary's logits waits for memory a few times rather than for every value.
__global__ void argmax_rows_kernel(const float* x, int64_t cols, int32_t* out) {
    begin_kernel();
    const float* r = x + blockIdx.x * cols;
    Best b{-FLT_MAX, INT32_MAX};
    int64_t j = threadIdx.x;
    if (reinterpret_cast<uintptr_t>(r) % 16 == 0) {
        const float4* r4 = reinterpret_cast<const float4*>(r);
        const int64_t n4 = cols / 4;
#pragma unroll 8
        for (int64_t q = threadIdx.x; q < n4; q += blockDim.x) {
            const float4 v = r4[q];
            consider(b, v.x, 4 * q);
            consider(b, v.y, 4 * q + 1);
            consider(b, v.z, 4 * q + 2);
            consider(b, v.w, 4 * q + 3);
        }
        j = 4 * n4 + threadIdx.x;
    }
    for (; j < cols; j += blockDim.x) consider(b, r[j], j);
    for (int off = 16; off > 0; off >>= 1) {
        Best o{__shfl_xor_sync(0xffffffffu, b.v, off), __shfl_xor_sync(0xffffffffu, b.i, off)};
        b = better(b, o);
    }
    __shared__ Best warp_best[kThreads / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) warp_best[warp] = b;
    __syncthreads();
    if (warp == 0) {
        b = lane < int(blockDim.x / 32) ? warp_best[lane] : Best{-FLT_MAX, INT32_MAX};
        for (int off = 16; off > 0; off >>= 1) {
            Best o{__shfl_xor_sync(0xffffffffu, b.v, off), __shfl_xor_sync(0xffffffffu, b.i, off)};
            b = better(b, o);
        }
        if (lane == 0) out[blockIdx.x] = b.i == INT32_MAX ? 0 : b.i;
    }
}

// ---- top-k: chunks of kChunk candidates are sorted in shared memory and keep their k best; rounds repeat on the
// survivors until one chunk holds them all.
constexpr int kChunk = 4096;
constexpr int kSortThreads = 1024;

// a before b in the sampler's order: larger value first, then smaller index.
__device__ __forceinline__ bool before(float va, int32_t ia, float vb, int32_t ib) {
    return va > vb || (va == vb && ia < ib);
}

// Sorts chunk blockIdx.x of (values, ids) — ids null: the index in x — and writes its first k to out (k per chunk).
__global__ void chunk_top_k_kernel(const float* values, const int32_t* ids, int64_t n, int k, float* out_values,
                                   int32_t* out_ids) {
    __shared__ float v[kChunk];
    __shared__ int32_t id[kChunk];
    begin_kernel();
    const int64_t base = int64_t(blockIdx.x) * kChunk;
    for (int i = threadIdx.x; i < kChunk; i += blockDim.x) {
        const int64_t j = base + i;
        // Padding sorts after every real value: -inf with the largest index. A logit that is not finite sorts
        // first, as +inf, so that the host sees it in the first place (in the first round: later rounds read
        // candidates, padding included).
        const float x = j < n ? values[j] : -INFINITY;
        v[i] = j >= n || ids || isfinite(x) ? x : INFINITY;
        id[i] = j < n ? (ids ? ids[j] : int32_t(j)) : INT32_MAX;
    }
    __syncthreads();
    // Bitonic sort into the sampler's order.
    for (int size = 2; size <= kChunk; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < kChunk; i += blockDim.x) {
                const int partner = i ^ stride;
                if (partner <= i) continue;
                const bool ascending_block = (i & size) == 0;  // blocks alternate direction until the last merge
                const bool swap = ascending_block ? before(v[partner], id[partner], v[i], id[i])
                                                  : before(v[i], id[i], v[partner], id[partner]);
                if (swap) {
                    const float tv = v[i];
                    v[i] = v[partner];
                    v[partner] = tv;
                    const int32_t ti = id[i];
                    id[i] = id[partner];
                    id[partner] = ti;
                }
            }
            __syncthreads();
        }
    }
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        out_values[int64_t(blockIdx.x) * k + i] = v[i];
        out_ids[int64_t(blockIdx.x) * k + i] = id[i];
    }
}

int64_t chunks_of(int64_t n) { return (n + kChunk - 1) / kChunk; }

}  // namespace

size_t topk_scratch_bytes(int64_t n, int k) {
    // Two ping-pong candidate buffers, the larger for the first round.
    return size_t(chunks_of(n) * k + chunks_of(chunks_of(n) * k) * k) * (sizeof(float) + sizeof(int32_t));
}

cudaError_t top_k(const float* x, int64_t n, int k, void* scratch, int32_t* ids, float* values, cudaStream_t s) {
    if (n <= 0 || k <= 0 || k > 128 || k > n) return cudaErrorInvalidValue;
    const int64_t first = chunks_of(n) * k;
    float* bv[2] = {static_cast<float*>(scratch), nullptr};
    int32_t* bi[2] = {reinterpret_cast<int32_t*>(bv[0] + first), nullptr};
    bv[1] = reinterpret_cast<float*>(bi[0] + first);
    bi[1] = reinterpret_cast<int32_t*>(bv[1] + chunks_of(first) * k);
    const float* cur_v = x;
    const int32_t* cur_i = nullptr;
    int64_t m = n;
    for (int round = 0;; ++round) {
        const int64_t chunks = chunks_of(m);
        float* ov = chunks == 1 ? values : bv[round % 2];
        int32_t* oi = chunks == 1 ? ids : bi[round % 2];
        launch(chunk_top_k_kernel, unsigned(chunks), kSortThreads, 0, s, cur_v, cur_i, m, k, ov, oi);
        if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || chunks == 1) return e;
        cur_v = ov;
        cur_i = oi;
        m = chunks * k;
    }
}

cudaError_t argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out, cudaStream_t s) {
    if (rows <= 0) return cudaGetLastError();
    if (rows > 2147483647 || cols <= 0) return cudaErrorInvalidValue;
    launch(argmax_rows_kernel, unsigned(rows), kThreads, 0, s, x, cols, out);
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
