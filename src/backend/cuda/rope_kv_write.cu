// The per-head steps between the Q/K/V projections and attention in one launch (Backend::rope_kv_write): per-head
// RMSNorm, RoPE, the write-back of q, k and v, and the store of k and v into the cache, where the separate ops take
// up to six launches per layer. A warp per head, four heads per block: the lanes hold the head's float4s (lane,
// lane + 32, ...) and normalize them as the norm kernel's warp path does (norm_math.cuh); the head then goes through
// shared memory, where lane i rotates pairs i, i + 32, ... as the rope kernel does (rope_math.cuh), and comes back
// to the lanes as consecutive values for the store (kv_store.cuh: 32 lanes, one q8_0 block). Every value equals the
// separate ops' bit for bit up to the compiler's choice of contractions in the rotation.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/kv_store.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/norm_math.cuh"
#include "backend/cuda/rope_math.cuh"

namespace zinc::backend::cuda {
namespace {

constexpr int kHeadsPerBlock = 4;  // warps per block, one head each

// Block (t, y): row t, heads y * kHeadsPerBlock + warp of the list q heads, k heads, v heads. NV: float4s per lane.
template <int NV>
__global__ void __launch_bounds__(kHeadsPerBlock * 32) rope_kv_write_kernel(HeadArgs a) {
    begin_kernel();
    __shared__ float4 sm[kHeadsPerBlock][32 * NV];
    const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
    const int64_t t = blockIdx.x;
    const int head = int(blockIdx.y) * kHeadsPerBlock + warp, d = a.head_dim, n4 = d / 4;
    if (head >= a.n_head + 2 * a.n_head_kv) return;  // whole warps
    // Which tensor this head belongs to, and its values.
    const int kind = head < a.n_head ? 0 : (head < a.n_head + a.n_head_kv ? 1 : 2);  // q, k, v
    const int h = kind == 0 ? head : head - a.n_head - (kind == 2 ? a.n_head_kv : 0);
    const int64_t width = int64_t(a.n_head_kv) * d, cols = kind == 0 ? int64_t(a.n_head) * d : width;
    float* x = (kind == 0 ? a.q : kind == 1 ? a.k : a.v) + t * cols + int64_t(h) * d;
    const bool norm = kind == 0 ? a.norm_q : kind == 1 ? a.norm_k : a.norm_v;
    const auto* w = reinterpret_cast<const float4*>(kind == 0 ? a.q_weight : kind == 1 ? a.k_weight : nullptr);

    float4 v[NV];
    double sum = 0;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
        const int i = lane + 32 * k;
        v[k] = i < n4 ? reinterpret_cast<const float4*>(x)[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        sum = add_squares(sum, v[k]);
    }
    if (norm) {
        const float scale = rms_scale(warp_sum(sum), d, a.eps);
#pragma unroll
        for (int k = 0; k < NV; ++k)
            if (lane + 32 * k < n4) v[k] = scaled(v[k], scale, w, lane + 32 * k);
    }
    float4* hs = sm[warp];
#pragma unroll
    for (int k = 0; k < NV; ++k)
        if (lane + 32 * k < n4) hs[lane + 32 * k] = v[k];
    __syncwarp();

    float* hv = reinterpret_cast<float*>(hs);
    if (kind != 2) {
        const int half = a.rope.n_rot / 2;
        float theta_i = float(a.pos[t]);
        int k = 0;
        for (int i = lane; i < half; i += 32) {
            for (; k < i; ++k) theta_i = mul_rn(theta_i, a.rope.theta_scale);
            pair_rotation(theta_i, i, half, a.rope).apply(hv);
        }
        __syncwarp();
    }
    if (kind != 2 || norm)
#pragma unroll
        for (int k = 0; k < NV; ++k)
            if (lane + 32 * k < n4) reinterpret_cast<float4*>(x)[lane + 32 * k] = hs[lane + 32 * k];
    if (kind == 0) return;
    CachePlane plane = kind == 1 ? a.k_cache : a.v_cache;
    int64_t capacity = a.capacity, page_rows = a.page_rows, p;
    const int32_t* pages = a.pages;
    if (a.row_caches) {
        const RowCache& r = a.row_caches[t];
        plane.data = kind == 1 ? r.k : r.v;
        capacity = r.capacity;
        pages = r.pages;
        page_rows = r.page_rows;
        p = a.pos[t];
    } else {
        p = int64_t(*a.kv_pos) + t;
    }
    const int64_t row = cache_row(p, capacity, pages, page_rows);
    for (int c0 = 0; c0 < d; c0 += 32)
        if (c0 + lane < d)  // all 32 lanes for q8_0 (d % 32 == 0): they store one block together
            store_value(plane, width, capacity, row, int64_t(h) * d + c0 + lane, hv[c0 + lane]);
}

}  // namespace

cudaError_t rope_kv_write(const HeadArgs& a, cudaStream_t s) {
    if (a.head_dim % 4 != 0 || a.head_dim > 512 || a.rows > INT32_MAX) return cudaErrorInvalidValue;
    const int heads = a.n_head + 2 * a.n_head_kv;
    if (a.rows == 0 || heads == 0) return cudaGetLastError();
    const dim3 grid{unsigned(a.rows), unsigned((heads + kHeadsPerBlock - 1) / kHeadsPerBlock)};
    const int n4 = a.head_dim / 4;
    if (n4 <= 32)
        launch(rope_kv_write_kernel<1>, grid, kHeadsPerBlock * 32, 0, s, a);
    else if (n4 <= 64)
        launch(rope_kv_write_kernel<2>, grid, kHeadsPerBlock * 32, 0, s, a);
    else
        launch(rope_kv_write_kernel<4>, grid, kHeadsPerBlock * 32, 0, s, a);
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
