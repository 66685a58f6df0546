// RoPE, NeoX (pairs i, i + n_rot/2) and normal (pairs 2i, 2i+1), on the first n_rot values of each head.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_kernels.h"

namespace zinc::backend::cuda {
namespace {

__global__ void rope_kernel(float* x, int64_t rows, int64_t cols, int head_dim, const int32_t* pos,
                            const float* inv_freq, float freq_scale, int half, bool neox) {
    const int64_t heads = cols / head_dim;
    const int64_t n = rows * heads * half;
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n;
         idx += int64_t(gridDim.x) * blockDim.x) {
        const int i = int(idx % half);
        const int64_t h = (idx / half) % heads, t = idx / (half * heads);
        // As the CPU: theta = (pos * freq_scale) * inv_freq, cos and sin in f32.
        const float theta = float(pos[t]) * freq_scale * inv_freq[i];
        float s, c;
        sincosf(theta, &s, &c);
        float* v = x + t * cols + h * head_dim;
        const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        const float a = v[i0], d = v[i1];
        v[i0] = a * c - d * s;
        v[i1] = a * s + d * c;
    }
}

}  // namespace

cudaError_t rope(float* x, int64_t rows, int64_t cols, int head_dim, const int32_t* pos, const float* inv_freq,
                 float freq_scale, int n_rot, bool neox, cudaStream_t s) {
    const int half = n_rot / 2;
    const int64_t n = rows * (cols / head_dim) * half;
    if (n > 0) {
        const int64_t blocks = (n + 255) / 256;
        rope_kernel<<<unsigned(blocks < 65535 ? blocks : 65535), 256, 0, s>>>(x, rows, cols, head_dim, pos, inv_freq,
                                                                               freq_scale, half, neox);
    }
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
