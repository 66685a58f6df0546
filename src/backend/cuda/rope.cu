// RoPE, NeoX (pairs i, i + n_rot/2) and adjacent (pairs 2i, 2i+1), on the first n_rot values of each head, with
// optional frequency factors and YaRN. One block per (row, group of heads); a thread per pair computes the pair's
// angle as the CPU backend does (rope_angle), then rotates that pair in each head of the group.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/rope_math.cuh"

namespace zinc::backend::cuda {
namespace {

constexpr int kHeadsPerBlock = 4;
constexpr int kMaxThreads = 256;

__global__ void rope_kernel(float* x, int64_t cols, int head_dim, const int32_t* pos, RopeArgs a) {
    begin_kernel();
    const int64_t t = blockIdx.x;
    const int heads = int(cols / head_dim), half = a.n_rot / 2;
    const int h0 = blockIdx.y * kHeadsPerBlock, h1 = h0 + kHeadsPerBlock < heads ? h0 + kHeadsPerBlock : heads;
    // theta_i = pos * theta_scale^i with the power taken by repeated multiplication, as the CPU does; each thread
    // carries its product forward from one of its pairs to the next.
    float theta_i = float(pos[t]);
    int k = 0;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        for (; k < i; ++k) theta_i = mul_rn(theta_i, a.theta_scale);
        const PairRotation r = pair_rotation(theta_i, i, half, a);
        for (int h = h0; h < h1; ++h) r.apply(x + t * cols + int64_t(h) * head_dim);
    }
}

}  // namespace

cudaError_t rope(float* x, int64_t rows, int64_t cols, int head_dim, const int32_t* pos, const RopeArgs& a,
                 cudaStream_t s) {
    const int half = a.n_rot / 2;
    const int64_t heads = cols / head_dim;
    if (rows > 0 && heads > 0 && half > 0) {
        const int threads = half >= kMaxThreads ? kMaxThreads : (half + 31) / 32 * 32;
        const dim3 grid{unsigned(rows), unsigned((heads + kHeadsPerBlock - 1) / kHeadsPerBlock)};
        launch(rope_kernel, grid, threads, 0, s, x, cols, head_dim, pos, a);
    }
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
