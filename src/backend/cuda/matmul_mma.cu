// Prefill matmul on tensor cores: out[t][o] = W[o] . x[t] for quantized weights and several activation rows, with
// mma.sync m16n8k16 (f16 operands, f32 accumulation).
//
// The activations come in f16, each row divided by its own scale s_t (to_f16_rows, matmul_gemm.cu); the product is
// multiplied by s_t again in the epilogue. The weights are dequantized tile by tile inside the kernel (dequant.cuh's
// dequant8, the values get_rows and the CPU produce) and rounded to f16 on their way into shared memory, so a
// weight's quantized bytes are read once per tile of 64 tokens and no dequantized copy of the matrix is ever written. Each value of the
// product is therefore within about 2^-10 of sum_i |w_i x_i| of the exact one.
//
// Tiles: 128 weight rows x 64 tokens per block of 256 threads (8 warps, 4 along the weight rows x 2 along the
// tokens, each warp 32 x 32: 2 x 4 mma tiles), 32 values of the reduction per step. Each step's weight tile (128 x 32)
// and activation tile (64 x 32) are loaded into registers while the tensor cores work on the step before, then
// stored to the other of two shared-memory buffers.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_row.cuh"
#include "backend/cuda/mma.cuh"

namespace zinc::backend::cuda {
namespace {

constexpr int BM = 128, BN = 64, BK = 32;
constexpr int kThreads = 256;
constexpr int kPad = 8;  // halves of padding per shared row: rows 80 bytes apart, so ldmatrix's 8 rows hit 32 banks

// One step's tile data in a thread's registers: 16 weight values (row tid / 2, values 16 (tid % 2) ..) as f16 pairs,
// and 8 activation values (token tid / 4, values 8 (tid % 4) ..).
struct StepRegs {
    uint32_t w[8];
    uint4 x;
};

template <int T>
__device__ __forceinline__ void load_step(const uint8_t* w, size_t row_bytes, int64_t n_out, int64_t cols,
                                          const __half* x16, int64_t n_act, int64_t o0, int64_t t0, int64_t k0,
                                          StepRegs& r) {
    const int tid = int(threadIdx.x);
    const int64_t o = o0 + tid / 2;
    if (o < n_out) {
        const uint8_t* row = w + o * row_bytes;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float v[8];
            dequant8(T, row, cols, k0 + 16 * (tid % 2) + 8 * h, v);
#pragma unroll
            for (int k = 0; k < 4; ++k) r.w[4 * h + k] = pack_half2(v[2 * k], v[2 * k + 1]);
        }
    } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) r.w[k] = 0;
    }
    const int64_t t = t0 + tid / 4;
    r.x = t < n_act ? *reinterpret_cast<const uint4*>(x16 + t * cols + k0 + 8 * (tid % 4)) : make_uint4(0, 0, 0, 0);
}

template <int T>
__global__ void __launch_bounds__(kThreads) matmul_mma_kernel(const uint8_t* w, size_t row_bytes, int64_t n_out,
                                                              int64_t cols, const __half* x16, const float* scale,
                                                              int64_t n_act, float* out, int64_t out_stride) {
    __shared__ __align__(16) __half ws[2][BM][BK + kPad];
    __shared__ __align__(16) __half xs[2][BN][BK + kPad];
    begin_kernel();
    const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int wm = (warp % 4) * 32, wn = (warp / 4) * 32;  // the warp's 32 x 32 tile in the block's
    const int64_t o0 = int64_t(blockIdx.x) * BM, t0 = int64_t(blockIdx.y) * BN;
    float acc[2][4][4] = {};

    auto store_step = [&](int buf, const StepRegs& r) {
        uint4* wd = reinterpret_cast<uint4*>(&ws[buf][tid / 2][16 * (tid % 2)]);
        wd[0] = make_uint4(r.w[0], r.w[1], r.w[2], r.w[3]);
        wd[1] = make_uint4(r.w[4], r.w[5], r.w[6], r.w[7]);
        *reinterpret_cast<uint4*>(&xs[buf][tid / 4][8 * (tid % 4)]) = r.x;
    };

    StepRegs r;
    load_step<T>(w, row_bytes, n_out, cols, x16, n_act, o0, t0, 0, r);
    store_step(0, r);
    __syncthreads();
    const int64_t n_steps = cols / BK;
    for (int64_t step = 0; step < n_steps; ++step) {
        const int buf = int(step % 2);
        const bool more = step + 1 < n_steps;
        if (more) load_step<T>(w, row_bytes, n_out, cols, x16, n_act, o0, t0, (step + 1) * BK, r);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t a[2][4], b[2][4];
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)  // rows lane % 16, values kk + 8 (lane / 16)
                ldmatrix_x4(a[mi], &ws[buf][wm + 16 * mi + lane % 16][kk + 8 * (lane / 16)]);
            // Two n8 tiles at a time: tokens lane % 8 + 8 (lane / 16), values kk + 8 (lane / 8 % 2).
#pragma unroll
            for (int nj = 0; nj < 2; ++nj)
                ldmatrix_x4(b[nj], &xs[buf][wn + 16 * nj + lane % 8 + 8 * (lane / 16)][kk + 8 * ((lane / 8) % 2)]);
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int ni = 0; ni < 4; ++ni)
                    mma_16816(acc[mi][ni], a[mi], b[ni / 2][2 * (ni % 2)], b[ni / 2][2 * (ni % 2) + 1]);
        }
        if (more) store_step(buf ^ 1, r);
        __syncthreads();
    }

    // acc[mi][ni][h * 2 + c]: weight row wm + 16 mi + lane / 4 + 8 h, token wn + 8 ni + 2 (lane % 4) + c.
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int64_t t = t0 + wn + 8 * ni + 2 * (lane % 4) + c;
            if (t >= n_act) continue;
            const float s = scale[t];
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int64_t o = o0 + wm + 16 * mi + lane / 4 + 8 * h;
                    if (o < n_out) out[t * out_stride + o] = acc[mi][ni][2 * h + c] * s;
                }
        }
}

}  // namespace

bool has_mma_matmul(int type) { return has_dp4a_matvec(type); }

cudaError_t matmul_mma(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const void* rows,
                       int64_t n_act, float* out, int64_t out_stride, cudaStream_t s) {
    if (cols % BK != 0 || n_act > 65535LL * BN) return cudaErrorInvalidValue;
    if (n_out <= 0 || n_act <= 0) return cudaGetLastError();
    const auto* x16 = static_cast<const __half*>(rows);
    const auto* scale =
        reinterpret_cast<const float*>(static_cast<const uint8_t*>(rows) + f16_rows_scale_offset(n_act, cols));
    const dim3 grid(unsigned((n_out + BM - 1) / BM), unsigned((n_act + BN - 1) / BN));
    const auto* wb = static_cast<const uint8_t*>(w);
    return for_weight_type<kQuantTypes>(type, [&](auto tag) {
        return launch(matmul_mma_kernel<decltype(tag)::value>, grid, kThreads, 0, s, wb, row_bytes, n_out, cols, x16,
                      scale, n_act, out, out_stride);
    });
}

}  // namespace zinc::backend::cuda
