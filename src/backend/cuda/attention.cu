// Causal GQA attention, one kernel for prefill and decode: one block per (query head, query row); each warp walks
// a strided share of the visible keys with an online softmax (running max, denominator and output in registers,
// head_dim/32 values per lane), then the warps' partial results are merged through shared memory.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/attention_kernels.h"

namespace zinc::backend::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

__global__ void attention_kernel(const float* q, const float* k, const float* v, int64_t kv_width, int64_t pos0,
                                 int n_head, int group, int head_dim, float scale, float* out) {
    const int h = blockIdx.x;
    const int64_t t = blockIdx.y;
    const int kvh = h / group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int per_lane = head_dim / 32;
    const int64_t q_cols = int64_t(n_head) * head_dim;
    const float* qv = q + t * q_cols + int64_t(h) * head_dim;

    float qr[kMaxPerLane], acc[kMaxPerLane];
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
        qr[i] = i < per_lane ? qv[lane + 32 * i] : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int64_t n_kv = pos0 + t + 1;  // causal: positions 0 .. pos0 + t
    for (int64_t j = warp; j < n_kv; j += kWarps) {
        const float* kr = k + j * kv_width + int64_t(kvh) * head_dim;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kMaxPerLane; ++i)
            if (i < per_lane) s += qr[i] * kr[lane + 32 * i];
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        s *= scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new), p = expf(s - m_new);
        l = l * corr + p;
        const float* vr = v + j * kv_width + int64_t(kvh) * head_dim;
#pragma unroll
        for (int i = 0; i < kMaxPerLane; ++i)
            if (i < per_lane) acc[i] = acc[i] * corr + p * vr[lane + 32 * i];
        m = m_new;
    }

    __shared__ float sm_m[kWarps], sm_l[kWarps];
    __shared__ float sm_acc[kWarps][kMaxPerLane * 32];
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i)
        if (i < per_lane) sm_acc[warp][lane + 32 * i] = acc[i];
    __syncthreads();
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_m[w]);
    float den = 0.0f, f[kWarps];
    for (int w = 0; w < kWarps; ++w) {
        f[w] = sm_l[w] > 0.0f ? expf(sm_m[w] - mx) : 0.0f;  // a warp that saw no key has m = -inf, l = 0
        den += sm_l[w] * f[w];
    }
    float* o = out + t * q_cols + int64_t(h) * head_dim;
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
        float num = 0.0f;
        for (int w = 0; w < kWarps; ++w) num += sm_acc[w][i] * f[w];
        o[i] = num / den;
    }
}

}  // namespace

cudaError_t attention(const float* q, int64_t n_q, const float* k, const float* v, int64_t kv_width, int64_t pos0,
                      int n_head, int n_head_kv, int head_dim, float scale, float* out, cudaStream_t s) {
    if (n_q > 0) {
        const dim3 grid{unsigned(n_head), unsigned(n_q)};
        attention_kernel<<<grid, kWarps * 32, 0, s>>>(q, k, v, kv_width, pos0, n_head, n_head / n_head_kv, head_dim,
                                                      scale, out);
    }
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
