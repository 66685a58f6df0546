// Greedy decoding on the GPU: the host needs only the chosen token id, not the whole logit row.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "backend/cuda/sampling_kernels.h"

namespace zinc::backend::cuda {
namespace {

constexpr int kThreads = 1024;

// (value, index) with the larger value winning and, on equal values, the smaller index, so the result is the
// first maximum whatever order the threads combine in.
struct Best {
    float v;
    int32_t i;
};

__device__ __forceinline__ Best better(Best a, Best b) {
    if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
    return a;
}

// One block per row: each thread scans a strided slice in order, then warps and the block reduce.
__global__ void argmax_rows_kernel(const float* x, int64_t cols, int32_t* out) {
    const float* r = x + blockIdx.x * cols;
    Best b{-FLT_MAX, INT32_MAX};
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float v = r[j];
        if (b.i == INT32_MAX || v > b.v) b = {v, int32_t(j)};
    }
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

}  // namespace

cudaError_t argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out, cudaStream_t s) {
    if (rows <= 0) return cudaGetLastError();
    if (rows > 2147483647 || cols <= 0) return cudaErrorInvalidValue;
    argmax_rows_kernel<<<unsigned(rows), kThreads, 0, s>>>(x, cols, out);
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
