// The gated delta-net kernels: the gates and gathers around the recurrence, the causal conv over a rolling state, and
// the gated delta rule token by token (decode) and in chunks (prefill). The bodies shared with the host tests are in
// delta_net_kernels.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/delta_net_kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma.cuh"

namespace zinc::backend::cuda {
namespace {

unsigned grid_for(int64_t n) {
    const int64_t b = (n + 255) / 256;
    return unsigned(b < 65535 ? b : 65535);
}

__device__ __forceinline__ int64_t first_index() { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }

__global__ void sigmoid_mul_kernel(const float* x, const float* gate, int64_t cols, bool per_row, float* out,
                                   int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride())
        out[i] = x[i] * dn_sigmoid(per_row ? gate[i / cols] : gate[i]);
}

__global__ void shared_expert_add_kernel(const float* a, const float* b, const float* gate, int64_t cols,
                                         bool per_row, float* out, int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float y = __fmul_rn(b[i], dn_sigmoid(per_row ? gate[i / cols] : gate[i]));
        out[i] = __fadd_rn(out[i], __fadd_rn(a[i], y));
    }
}

__global__ void fill_kernel(float* a, float value, int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride()) a[i] = value;
}

__global__ void slice_groups_kernel(const float* src, int64_t src_cols, int64_t group, int64_t offset, int64_t width,
                                    float* out, int64_t out_cols, int64_t n) {
    begin_kernel();
    for (int64_t e = first_index(); e < n; e += grid_stride())
        out[e] = src[dn_slice_src(e, out_cols, width, src_cols, group, offset)];
}

__global__ void gates_kernel(const float* a, const float* b, const float* dt_bias, const float* ssm_a, int64_t heads,
                             float* g, float* beta, int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const int64_t h = i % heads;
        const float gv = dn_softplus(a[i] + dt_bias[h]) * ssm_a[h];
        beta[i] = dn_sigmoid(b[i]);
        g[i] = gv;
    }
}

// One thread per (channel, tile of tokens); grid (channel blocks, tiles).
template <int KM1>
__global__ void conv1d_kernel(const float* x, float* state, const float* w, int64_t T, int64_t C, int64_t tile,
                              bool silu, float* out) {
    begin_kernel();
    const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (c >= C) return;
    const int64_t t_begin = int64_t(blockIdx.y) * tile;
    dn_conv_channel<KM1>(x, state, w, T, C, c, t_begin, dn_min(T, t_begin + tile), silu, out);
}

template <int KM1>
void launch_conv(const float* x, float* state, const float* w, int64_t T, int64_t C, int64_t tile, bool silu,
                 float* out, cudaStream_t s) {
    const dim3 grid(unsigned((C + 255) / 256), unsigned((T + tile - 1) / tile));
    launch(conv1d_kernel<KM1>, grid, 256, 0, s, x, state, w, T, C, tile, silu, out);
}

// Adds x over the kSeqSplit lanes of a column group; a butterfly, so every lane ends with the same bits.
__device__ __forceinline__ float quad_sum(float x) {
    static_assert(kSeqSplit == 4, "two butterfly steps");
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    return x;
}

// Grid (column blocks of kSeqThreads / kSeqSplit, value heads); every lane runs every token (the shuffles need the
// whole warp), lanes past d_v on zeros.
template <int kRows>
__global__ void __launch_bounds__(kSeqThreads) delta_net_seq_kernel(DeltaNetArgs a) {
    begin_kernel();
    const int h = int(blockIdx.y);
    const int r = int(threadIdx.x) % kSeqSplit;
    const int j = int(blockIdx.x) * (kSeqThreads / kSeqSplit) + int(threadIdx.x) / kSeqSplit;
    const bool valid = j < a.d_v;
    const int kh = dn_key_head(a.tiled, a.n_k, a.n_v, h);
    const int64_t kw = int64_t(a.n_k) * a.d_k, vw = int64_t(a.n_v) * a.d_v;
    float* S = a.state + int64_t(h) * a.d_k * a.d_v;
    float s[kRows];
    dn_seq_load<kRows>(s, S, r, j, valid, a.d_k, a.d_v);
    for (int64_t t = 0; t < a.T; ++t) {
        const float* kt = a.k + t * kw + int64_t(kh) * a.d_k;
        const float* qt = a.q + t * kw + int64_t(kh) * a.d_k;
        const float decay = expf(a.g[t * a.n_v + h]);
        const float b = a.beta[t * a.n_v + h];
        const float vj = valid ? a.v[t * vw + int64_t(h) * a.d_v + j] : 0.0f;
        const float m = quad_sum(dn_seq_decay_read<kRows>(s, r, a.d_k, kt, decay));
        const float o = quad_sum(dn_seq_write_out<kRows>(s, r, a.d_k, kt, qt, b * (vj - m)));
        if (valid && r == 0) a.out[t * vw + int64_t(h) * a.d_v + j] = o * a.scale;
    }
    dn_seq_store<kRows>(s, S, r, j, valid, a.d_k, a.d_v);
}

// The block of the chunked form's bodies on the GPU (delta_net_kernels.h): a phase is every thread's call then a
// barrier; a product is split over the warps, 16 x 16 output tiles each, on tensor cores. Each operand is split into
// two tf32 parts and three products are summed (hi hi, and hi lo + lo hi in a second accumulator, so the small terms
// are not truncated against the large ones), which keeps about 22 bits of every product.
// (Host-device members, as the bodies that call them are; they only ever run on the device.)
struct DeviceBlock {
    template <class F>
    __host__ __device__ void run(F&& f) const {
#ifdef __CUDA_ARCH__
        f(int(threadIdx.x));
        __syncthreads();
#else
        (void)f;
#endif
    }
    template <class Epi>
    __host__ __device__ void gemm(int M, int N, int K, SmemMat A, SmemMat B, Epi&& epi) const {
#ifdef __CUDA_ARCH__
        // Each warp takes 16 x 16 output tiles: one A fragment per step for two B fragments.
        const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
        const int tiles_n = N / 16, tiles = M / 16 * tiles_n;
        for (int tile = warp; tile < tiles; tile += kChunkThreads / 32) {
            const int m0 = tile / tiles_n * 16, n0 = tile % tiles_n * 16;
            float big[2][4] = {}, small[2][4] = {};
            for (int k0 = 0; k0 < K; k0 += 8) {
                uint32_t ah[4], al[4];
                split_tf32(A.at(m0 + g, k0 + t), ah[0], al[0]);
                split_tf32(A.at(m0 + g + 8, k0 + t), ah[1], al[1]);
                split_tf32(A.at(m0 + g, k0 + t + 4), ah[2], al[2]);
                split_tf32(A.at(m0 + g + 8, k0 + t + 4), ah[3], al[3]);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    uint32_t bh[2], bl[2];
                    split_tf32(B.at(k0 + t, n0 + 8 * h + g), bh[0], bl[0]);
                    split_tf32(B.at(k0 + t + 4, n0 + 8 * h + g), bh[1], bl[1]);
                    mma_1688_tf32(big[h], ah, bh[0], bh[1]);
                    mma_1688_tf32(small[h], ah, bl[0], bl[1]);
                    mma_1688_tf32(small[h], al, bh[0], bh[1]);
                }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int n = n0 + 8 * h + 2 * t;
                epi(m0 + g, n, big[h][0] + small[h][0]);
                epi(m0 + g, n + 1, big[h][1] + small[h][1]);
                epi(m0 + g + 8, n, big[h][2] + small[h][2]);
                epi(m0 + g + 8, n + 1, big[h][3] + small[h][3]);
            }
        }
        __syncthreads();
#else
        (void)M, (void)N, (void)K, (void)A, (void)B, (void)epi;
#endif
    }
};

// Grid (chunks, key heads); dynamic shared memory of one PrepareShared.
__global__ void __launch_bounds__(kChunkThreads) delta_net_prepare_kernel(ChunkArgs a) {
    begin_kernel();
    extern __shared__ float4 prepare_smem[];
    dn_prepare_block(DeviceBlock{}, *reinterpret_cast<PrepareShared*>(prepare_smem), a, int64_t(blockIdx.x),
                     int(blockIdx.y));
}

// Grid (column blocks of kChunkCols, value heads); dynamic shared memory of one ChunkShared. Two blocks fit a
// multiprocessor's shared memory; the register bound lets them both be resident (the grid is about two per
// multiprocessor, so a block that did not fit would run in a second wave).
__global__ void __launch_bounds__(kChunkThreads, 2) delta_net_chunk_kernel(ChunkArgs a) {
    begin_kernel();
    extern __shared__ float4 chunk_smem[];
    dn_chunk_block(DeviceBlock{}, *reinterpret_cast<ChunkShared*>(chunk_smem), a, int(blockIdx.x), int(blockIdx.y));
}

}  // namespace

cudaError_t sigmoid_mul(const float* x, const float* gate, int64_t rows, int64_t cols, bool per_row, float* out,
                        cudaStream_t s) {
    const int64_t n = rows * cols;
    if (n > 0) launch(sigmoid_mul_kernel, grid_for(n), 256, 0, s, x, gate, cols, per_row, out, n);
    return cudaGetLastError();
}

cudaError_t shared_expert_add(const float* a, const float* b, const float* gate, int64_t rows, int64_t cols,
                              bool per_row, float* out, cudaStream_t s) {
    const int64_t n = rows * cols;
    if (n > 0) launch(shared_expert_add_kernel, grid_for(n), 256, 0, s, a, b, gate, cols, per_row, out, n);
    return cudaGetLastError();
}

cudaError_t fill(float* a, float value, int64_t n, cudaStream_t s) {
    if (n > 0) launch(fill_kernel, grid_for(n), 256, 0, s, a, value, n);
    return cudaGetLastError();
}

cudaError_t slice_groups(const float* src, int64_t rows, int64_t src_cols, int64_t group, int64_t offset, float* out,
                         int64_t out_cols, cudaStream_t s) {
    const int64_t n = rows * out_cols;
    const int64_t width = out_cols / (src_cols / group);
    if (n > 0)
        launch(slice_groups_kernel, grid_for(n), 256, 0, s, src, src_cols, group, offset, width, out, out_cols, n);
    return cudaGetLastError();
}

cudaError_t delta_net_gates(const float* a, const float* b, const float* dt_bias, const float* ssm_a, int64_t rows,
                            int64_t n, float* g, float* beta, cudaStream_t s) {
    const int64_t total = rows * n;
    if (total > 0) launch(gates_kernel, grid_for(total), 256, 0, s, a, b, dt_bias, ssm_a, n, g, beta, total);
    return cudaGetLastError();
}

cudaError_t conv1d_causal(const float* x, float* state, const float* w, int64_t T, int64_t C, int K, bool silu,
                          bool aliased, float* out, cudaStream_t s) {
    if (T <= 0 || C <= 0) return cudaGetLastError();
    const int64_t tile = dn_conv_tile(T, K, aliased);
    switch (K) {
    case 1: launch_conv<0>(x, state, w, T, C, tile, silu, out, s); break;
    case 2: launch_conv<1>(x, state, w, T, C, tile, silu, out, s); break;
    case 3: launch_conv<2>(x, state, w, T, C, tile, silu, out, s); break;
    case 4: launch_conv<3>(x, state, w, T, C, tile, silu, out, s); break;
    case 5: launch_conv<4>(x, state, w, T, C, tile, silu, out, s); break;
    case 6: launch_conv<5>(x, state, w, T, C, tile, silu, out, s); break;
    case 7: launch_conv<6>(x, state, w, T, C, tile, silu, out, s); break;
    case 8: launch_conv<7>(x, state, w, T, C, tile, silu, out, s); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

cudaError_t delta_net(const DeltaNetArgs& a, cudaStream_t s) {
    if (a.T <= 0) return cudaGetLastError();
    const dim3 grid(unsigned((a.d_v + kSeqThreads / kSeqSplit - 1) / (kSeqThreads / kSeqSplit)), unsigned(a.n_v));
    const int rows = (a.d_k + kSeqSplit - 1) / kSeqSplit;
    static_assert(kMaxKeyDim <= 64 * kSeqSplit, "the largest instantiation covers kMaxKeyDim");
    if (rows <= 8)
        launch(delta_net_seq_kernel<8>, grid, kSeqThreads, 0, s, a);
    else if (rows <= 16)
        launch(delta_net_seq_kernel<16>, grid, kSeqThreads, 0, s, a);
    else if (rows <= 32)
        launch(delta_net_seq_kernel<32>, grid, kSeqThreads, 0, s, a);
    else if (rows <= 64)
        launch(delta_net_seq_kernel<64>, grid, kSeqThreads, 0, s, a);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

size_t delta_net_chunked_scratch(int n_v, int64_t T, int chunk) {
    const int64_t C = dn_chunk_len(chunk);
    const int64_t n_chunks = dn_min((T + C - 1) / C, kSegmentChunks);
    return size_t(n_v) * size_t(n_chunks) * size_t(2 * C * C + C);
}

cudaError_t delta_net_chunked(const DeltaNetArgs& a, int chunk, float* scratch, cudaStream_t s) {
    if (cudaError_t e = allow_shared_memory<delta_net_prepare_kernel>(sizeof(PrepareShared)); e != cudaSuccess)
        return e;
    if (cudaError_t e = allow_shared_memory<delta_net_chunk_kernel>(sizeof(ChunkShared)); e != cudaSuccess) return e;
    const int C = dn_chunk_len(chunk);
    const int64_t seg = kSegmentChunks * C;
    const dim3 chunk_grid(unsigned((a.d_v + kChunkCols - 1) / kChunkCols), unsigned(a.n_v));
    // Segments run one after the other on the stream, so each reuses the scratch and starts from the state the
    // previous one left.
    for (int64_t t0 = 0; t0 < a.T; t0 += seg) {
        const ChunkArgs c = dn_segment(a, C, t0, dn_min(seg, a.T - t0), scratch);
        launch(delta_net_prepare_kernel, dim3(unsigned(c.n_chunks), unsigned(a.n_k)), kChunkThreads,
               sizeof(PrepareShared), s, c);
        launch(delta_net_chunk_kernel, chunk_grid, kChunkThreads, sizeof(ChunkShared), s, c);
        if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
