// Prefill matmul: out[t][o] = W[o] . x[t] for many activation rows. Tiles of 64 weight rows x 64 activation rows;
// each step dequantizes a 64 x 32 weight tile to f32 in shared memory (dequant.cuh) next to the 64 x 32 activation
// tile, and each of the 256 threads accumulates a 4 x 4 block of outputs in f32. The float weights' path, f32 as the
// CPU's; quantized weights take the tensor cores (matmul_mma.cu).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_kernels.h"

namespace zinc::backend::cuda {
namespace {

constexpr int BM = 64, BN = 64, BK = 32;

__global__ void __launch_bounds__(256) matmul_tiled_kernel(int type, const uint8_t* w, size_t row_bytes,
                                                           int64_t n_out, int64_t cols, const float* x, int64_t n_act,
                                                           float* out, int64_t out_stride) {
    begin_kernel();
    __shared__ float ws[BK][BM + 4];
    __shared__ float xs[BK][BN + 4];
    const int tid = threadIdx.x;
    const int64_t o0 = int64_t(blockIdx.x) * BM, t0 = int64_t(blockIdx.y) * BN;
    const int lr = tid / 4, part = tid % 4;  // loader: tile row lr, values 8*part .. 8*part+7 of the 32
    const int wr = (tid % 16) * 4, tr = (tid / 16) * 4;  // compute: weight rows wr.., activation rows tr..
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < cols; k0 += BK) {
        float v[8];
        if (o0 + lr < n_out)
            dequant8(type, w + (o0 + lr) * row_bytes, cols, k0 + 8 * part, v);
        else
            for (int k = 0; k < 8; ++k) v[k] = 0.0f;
        for (int k = 0; k < 8; ++k) ws[8 * part + k][lr] = v[k];
        const float* xr = x + (t0 + lr) * cols;
        for (int k = 0; k < 8; ++k) {
            const int64_t i = k0 + 8 * part + k;
            xs[8 * part + k][lr] = (t0 + lr < n_act && i < cols) ? xr[i] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                a[i] = ws[k][wr + i];
                b[i] = xs[k][tr + i];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int j = 0; j < 4; ++j) {
        const int64_t t = t0 + tr + j;
        if (t >= n_act) continue;
        for (int i = 0; i < 4; ++i) {
            const int64_t o = o0 + wr + i;
            if (o < n_out) out[t * out_stride + o] = acc[i][j];
        }
    }
}

}  // namespace

cudaError_t matmul_tiled(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const float* x,
                         int64_t n_act, float* out, int64_t out_stride, cudaStream_t s) {
    if (n_out > 0 && n_act > 0) {
        const dim3 grid(unsigned((n_out + BM - 1) / BM), unsigned((n_act + BN - 1) / BN));
        launch(matmul_tiled_kernel, grid, 256, 0, s, type, static_cast<const uint8_t*>(w), row_bytes, n_out, cols, x,
               n_act, out, out_stride);
    }
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
