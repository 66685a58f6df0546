// The element-wise kernels around the prefill matmul's products (matmul_kernels.h): activation rows to f16 with a
// scale per row, quantized weight rows dequantized to f16 for cuBLAS, and the rows' scales multiplied back in.
//
// A row x_t goes to f16 divided by its own s_t = max |x_t| / 256, so no row can overflow f16's range and each keeps
// f16's relative precision (2^-11). The weights are the values dequant8 gives (those of get_rows and the CPU) rounded
// to f16. The product of the two, accumulated in f32, times s_t is within about 2^-10 sum_i |w_i x_i| of the exact one.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_row.cuh"

namespace zinc::backend::cuda {
namespace {

constexpr float kF16RowMax = 256.0f;

// One block per row: s = max |x| / 256 (1 for a row of zeros), x16 = x / s rounded to f16.
__global__ void __launch_bounds__(256) to_f16_rows_kernel(const float* x, int64_t cols, __half* x16, float* scale) {
    begin_kernel();
    const float* xr = x + blockIdx.x * cols;
    float amax = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) amax = fmaxf(amax, fabsf(xr[i]));
    for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    __shared__ float warp_max[8];
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
    __syncthreads();
    amax = 0.0f;
    for (int i = 0; i < int(blockDim.x / 32); ++i) amax = fmaxf(amax, warp_max[i]);
    const float s = amax > 0.0f ? amax / kF16RowMax : 1.0f;
    const float inv = 1.0f / s;
    __half* yr = x16 + blockIdx.x * cols;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = __float2half_rn(xr[i] * inv);
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
}

// Each thread 8 consecutive values of one row: thread i of the grid, values 8 i .. of the rows laid end to end.
template <int T>
__global__ void __launch_bounds__(256) dequant_f16_kernel(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                                           int64_t cols, __half* w16) {
    begin_kernel();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t per_row = cols / 8;
    if (i >= n_rows * per_row) return;
    const int64_t r = i / per_row, k = 8 * (i % per_row);
    float v[8];
    dequant8(T, w + r * row_bytes, cols, k, v);
    uint4 q;
    uint32_t* h = &q.x;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const __half2 p = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
        h[j] = *reinterpret_cast<const uint32_t*>(&p);
    }
    *reinterpret_cast<uint4*>(w16 + r * cols + k) = q;
}

// out[t][o] *= scale[t]: blockIdx.y strides over the rows, the threads of blockIdx.x over o.
__global__ void __launch_bounds__(256) scale_rows_kernel(float* out, int64_t out_stride, int64_t n_act, int64_t n_out,
                                                          const float* scale) {
    begin_kernel();
    const int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (o >= n_out) return;
    for (int64_t t = blockIdx.y; t < n_act; t += gridDim.y) out[t * out_stride + o] *= scale[t];
}

}  // namespace

size_t f16_rows_bytes(int64_t n_act, int64_t cols) {
    return f16_rows_scale_offset(n_act, cols) + size_t(n_act) * sizeof(float);
}

cudaError_t to_f16_rows(const float* x, int64_t n_act, int64_t cols, void* rows, cudaStream_t s) {
    if (n_act <= 0) return cudaGetLastError();
    if (n_act > INT32_MAX) return cudaErrorInvalidValue;
    auto* scale = reinterpret_cast<float*>(static_cast<uint8_t*>(rows) + f16_rows_scale_offset(n_act, cols));
    return launch(to_f16_rows_kernel, unsigned(n_act), 256, 0, s, x, cols, static_cast<__half*>(rows), scale);
}

cudaError_t dequant_f16_rows(int type, const void* w, size_t row_bytes, int64_t n_rows, int64_t cols, void* w16,
                             cudaStream_t s) {
    if (cols % 32 != 0) return cudaErrorInvalidValue;
    const int64_t threads = n_rows * (cols / 8);
    if (threads <= 0) return cudaGetLastError();
    if ((threads + 255) / 256 > INT32_MAX) return cudaErrorInvalidValue;
    const auto* wb = static_cast<const uint8_t*>(w);
    return for_weight_type<kQuantTypes>(type, [&](auto tag) {
        return launch(dequant_f16_kernel<decltype(tag)::value>, unsigned((threads + 255) / 256), 256, 0, s, wb,
                      row_bytes, n_rows, cols, static_cast<__half*>(w16));
    });
}

cudaError_t scale_rows(float* out, int64_t out_stride, int64_t n_act, int64_t n_out, const void* rows, int64_t cols,
                       cudaStream_t s) {
    if (n_act <= 0 || n_out <= 0) return cudaGetLastError();
    const auto* scale =
        reinterpret_cast<const float*>(static_cast<const uint8_t*>(rows) + f16_rows_scale_offset(n_act, cols));
    const dim3 grid(unsigned((n_out + 255) / 256), unsigned(n_act < 1024 ? n_act : 1024));
    return launch(scale_rows_kernel, grid, 256, 0, s, out, out_stride, n_act, n_out, scale);
}

}  // namespace zinc::backend::cuda
