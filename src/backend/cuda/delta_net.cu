// The gated delta-net kernels: the gates and gathers around the recurrence, the causal conv over a rolling state, and
// the gated delta rule token by token (decode) and in chunks (prefill). The bodies shared with the host tests are in
// delta_net_kernels.h.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/delta_net_kernels.h"
#include "backend/cuda/elementwise_kernels.h"
#include "backend/cuda/grid_stride.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/norm_kernels.h"
#include "backend/cuda/norm_math.cuh"
#include "backend/cuda/vec_dot_q8_1.cuh"

namespace zinc::backend::cuda {
namespace {

__global__ void sigmoid_mul_kernel(const float* x, const float* gate, int64_t cols, bool per_row, float* out,
                                   int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride())
        out[i] = x[i] * dn_sigmoid(per_row ? gate[i / cols] : gate[i]);
}

__global__ void shared_expert_add_kernel(const float* a, const float* b, const float* gate, int64_t cols,
                                         bool per_row, float* out, int64_t n) {
    begin_kernel();
    for (int64_t i = first_index(); i < n; i += grid_stride())
        out[i] = shared_expert_sum(out[i], a[i], b[i], dn_sigmoid(per_row ? gate[i / cols] : gate[i]));
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
        beta[i] = dn_sigmoid(b[i]);
        g[i] = dn_decay_gate(a[i], dt_bias[h], ssm_a[h]);
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

// f(std::integral_constant<int, K - 1>{}) for a conv of 1 <= K <= kMaxConvK taps (the kernels' template argument);
// false for other K.
template <typename F>
bool with_taps(int K, F&& f) {
    switch (K) {
    case 1: f(std::integral_constant<int, 0>{}); return true;
    case 2: f(std::integral_constant<int, 1>{}); return true;
    case 3: f(std::integral_constant<int, 2>{}); return true;
    case 4: f(std::integral_constant<int, 3>{}); return true;
    case 5: f(std::integral_constant<int, 4>{}); return true;
    case 6: f(std::integral_constant<int, 5>{}); return true;
    case 7: f(std::integral_constant<int, 6>{}); return true;
    case 8: f(std::integral_constant<int, 7>{}); return true;
    default: return false;
    }
}
static_assert(kMaxConvK == 8, "with_taps covers 1 to kMaxConvK taps");

// Adds x over the kSeqSplit lanes of a column group; a butterfly, so every lane ends with the same bits.
__device__ __forceinline__ float quad_sum(float x) {
    static_assert(kSeqSplit == 4, "two butterfly steps");
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    return x;
}

// f(std::integral_constant<int, R>{}) with R the smallest of 8, 16, 32, 64 that holds a thread's d_k / kSeqSplit key
// rows (the recurrence kernels' template argument); false where d_k is wider.
template <typename F>
bool with_key_rows(int d_k, F&& f) {
    static_assert(kMaxKeyDim <= 64 * kSeqSplit, "the largest instantiation covers kMaxKeyDim");
    const int rows = (d_k + kSeqSplit - 1) / kSeqSplit;
    if (rows <= 8)
        f(std::integral_constant<int, 8>{});
    else if (rows <= 16)
        f(std::integral_constant<int, 16>{});
    else if (rows <= 32)
        f(std::integral_constant<int, 32>{});
    else if (rows <= 64)
        f(std::integral_constant<int, 64>{});
    else
        return false;
    return true;
}

// Grid (column blocks of kSeqThreads / kSeqSplit, value heads); every lane runs every token (the shuffles need the
// whole warp), lanes past d_v on zeros.
template <int kRows>
__global__ void __launch_bounds__(kSeqThreads) delta_net_seq_kernel(DeltaNetArgs a) {
    begin_kernel();
    if (a.states) {  // row blockIdx.z of its own sequence
        const int64_t row = blockIdx.z;
        a.state = a.states[row];
        a.q += row * a.in_stride;
        a.k += row * a.in_stride;
        a.v += row * a.in_stride;
        a.g += row * a.n_v;
        a.beta += row * a.n_v;
        a.out += row * int64_t(a.n_v) * a.d_v;
    }
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

// ---- delta_net_step: one token ----

constexpr int kInputsThreads = 256;

// delta_net_step's first kernel: the warps of the first qk_blocks blocks take one query or key head each (lane l its
// channels l, l + 32, ...: their conv, then the head's L2 norm, for which each lane reads back only the values it
// wrote), the threads of the next v_blocks blocks one value channel each (its conv), and the last block the gates. The
// arithmetic is conv1d_kernel's, l2_norm_kernel's and gates_kernel's.
template <int KM1>
__global__ void __launch_bounds__(kInputsThreads)
    delta_net_inputs_kernel(DeltaNetArgs a, DeltaNetStepArgs st, unsigned qk_blocks, unsigned v_blocks) {
    begin_kernel();
    const int64_t key_dim = int64_t(a.n_k) * a.d_k, C = 2 * key_dim + int64_t(a.n_v) * a.d_v;
    if (a.states) {  // row blockIdx.z of its own sequence
        const int64_t row = blockIdx.z;
        st.conv_state = st.conv_states[row];
        st.qkv += row * C;
        st.conv += row * C;
        st.a += row * a.n_v;
        st.b += row * a.n_v;
        st.g += row * a.n_v;
        st.beta += row * a.n_v;
    }
    const unsigned block = blockIdx.x;
    if (block < qk_blocks) {
        const int64_t head = int64_t(block) * (kInputsThreads / 32) + threadIdx.x / 32;
        const int lane = int(threadIdx.x % 32);
        if (head >= 2 * a.n_k) return;  // whole warps
        float* x = st.conv + head * a.d_k;
        for (int64_t i = lane; i < a.d_k; i += 32)
            dn_conv_channel<KM1>(st.qkv, st.conv_state, st.conv_w, 1, C, head * a.d_k + i, 0, 1, true, st.conv);
        warp_l2_normalize(x, st.eps, a.d_k, lane, x);
    } else if (block < qk_blocks + v_blocks) {
        const int64_t c = 2 * key_dim + int64_t(block - qk_blocks) * kInputsThreads + threadIdx.x;
        if (c < C) dn_conv_channel<KM1>(st.qkv, st.conv_state, st.conv_w, 1, C, c, 0, 1, true, st.conv);
    } else {
        for (int h = int(threadIdx.x); h < a.n_v; h += kInputsThreads) {
            st.beta[h] = dn_sigmoid(st.b[h]);
            st.g[h] = dn_decay_gate(st.a[h], st.dt_bias[h], st.ssm_a[h]);
        }
    }
}

// delta_net_step's third kernel: gated_rms_norm_kernel's arithmetic for groups (value heads) of 32 M values, a warp a
// group, and each group's M Q8_1 blocks, as quantize_q8_1's kernel writes them: lane l's value l + 32 m of the group
// is value l of block m.
template <int M>
__global__ void __launch_bounds__(256) gated_norm_q8_kernel(const float* x, const float* w, const float* z, float eps,
                                                            int64_t n_groups, float* out, BlockQ8_1f* q8) {
    begin_kernel();
    const int64_t g = blockIdx.x * 8 + threadIdx.x / 32;
    if (g >= n_groups) return;
    const int lane = int(threadIdx.x % 32);
    const float* xi = x + g * 32 * M;
    const float scale = rms_scale(warp_sum_squares(xi, 32 * M, lane), 32 * M, eps);
#pragma unroll
    for (int m = 0; m < M; ++m) {
        const int i = lane + 32 * m;
        const float y = gated_norm_value(xi[i], scale, w[i], z[g * 32 * M + i]);
        out[g * 32 * M + i] = y;
        quantize_q8_1_warp(y, q8[g * M + m], lane);
    }
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
    if (n > 0) launch(sigmoid_mul_kernel, grid_for(n), kGridStrideBlock, 0, s, x, gate, cols, per_row, out, n);
    return cudaGetLastError();
}

cudaError_t shared_expert_add(const float* a, const float* b, const float* gate, int64_t rows, int64_t cols,
                              bool per_row, float* out, cudaStream_t s) {
    const int64_t n = rows * cols;
    if (n > 0) launch(shared_expert_add_kernel, grid_for(n), kGridStrideBlock, 0, s, a, b, gate, cols, per_row, out, n);
    return cudaGetLastError();
}

cudaError_t fill(float* a, float value, int64_t n, cudaStream_t s) {
    if (n > 0) launch(fill_kernel, grid_for(n), kGridStrideBlock, 0, s, a, value, n);
    return cudaGetLastError();
}

cudaError_t slice_groups(const float* src, int64_t rows, int64_t src_cols, int64_t group, int64_t offset, float* out,
                         int64_t out_cols, cudaStream_t s) {
    const int64_t n = rows * out_cols;
    const int64_t width = out_cols / (src_cols / group);
    if (n > 0)
        launch(slice_groups_kernel, grid_for(n), kGridStrideBlock, 0, s, src, src_cols, group, offset, width, out,
               out_cols, n);
    return cudaGetLastError();
}

cudaError_t delta_net_gates(const float* a, const float* b, const float* dt_bias, const float* ssm_a, int64_t rows,
                            int64_t n, float* g, float* beta, cudaStream_t s) {
    const int64_t total = rows * n;
    if (total > 0)
        launch(gates_kernel, grid_for(total), kGridStrideBlock, 0, s, a, b, dt_bias, ssm_a, n, g, beta, total);
    return cudaGetLastError();
}

cudaError_t conv1d_causal(const float* x, float* state, const float* w, int64_t T, int64_t C, int K, bool silu,
                          bool aliased, float* out, cudaStream_t s) {
    if (T <= 0 || C <= 0) return cudaGetLastError();
    const int64_t tile = dn_conv_tile(T, K, aliased);
    const dim3 grid(unsigned((C + 255) / 256), unsigned((T + tile - 1) / tile));
    if (!with_taps(K, [&](auto km1) {
            launch(conv1d_kernel<decltype(km1)::value>, grid, 256, 0, s, x, state, w, T, C, tile, silu, out);
        }))
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

cudaError_t delta_net(const DeltaNetArgs& a, cudaStream_t s) {
    if (a.T <= 0) return cudaGetLastError();
    if (a.states && (a.T != 1 || a.rows < 1 || a.rows > 65535)) return cudaErrorInvalidValue;
    const dim3 grid(unsigned((a.d_v + kSeqThreads / kSeqSplit - 1) / (kSeqThreads / kSeqSplit)), unsigned(a.n_v),
                    a.states ? unsigned(a.rows) : 1u);
    if (!with_key_rows(a.d_k, [&](auto rows) {
            launch(delta_net_seq_kernel<decltype(rows)::value>, grid, kSeqThreads, 0, s, a);
        }))
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

bool delta_net_step_fits(int d_k, int K) { return d_k >= 1 && d_k <= kMaxKeyDim && K >= 1 && K <= kMaxConvK; }

cudaError_t delta_net_step(const DeltaNetArgs& a, const DeltaNetStepArgs& st, BlockQ8_1f* q8, cudaStream_t s) {
    const int64_t rows = a.states ? a.rows : 1;
    if (a.T != 1 || !delta_net_step_fits(a.d_k, st.K) || rows < 1 || rows > 65535 || (a.states && !st.conv_states) ||
        (q8 && (rows != 1 || a.d_v % 32 != 0 || a.d_v > 32 * kMaxStepNormBlocks)))
        return cudaErrorInvalidValue;
    const unsigned qk_blocks = unsigned((2 * a.n_k + kInputsThreads / 32 - 1) / (kInputsThreads / 32));
    const unsigned v_blocks = unsigned((int64_t(a.n_v) * a.d_v + kInputsThreads - 1) / kInputsThreads);
    with_taps(st.K, [&](auto km1) {
        launch(delta_net_inputs_kernel<decltype(km1)::value>, dim3(qk_blocks + v_blocks + 1, 1, unsigned(rows)),
               kInputsThreads, 0, s, a, st, qk_blocks, v_blocks);
    });
    if (const cudaError_t e = delta_net(a, s); e != cudaSuccess) return e;
    // The rows' value heads one after the other: one norm over all of them.
    if (!q8) return gated_rms_norm(a.out, st.norm_w, st.z, st.eps, a.d_v, rows * a.n_v, a.out, s);
    const auto go = [&](auto kernel) {
        launch(kernel, unsigned((a.n_v + 7) / 8), 256, 0, s, a.out, st.norm_w, st.z, st.eps, int64_t(a.n_v), a.out, q8);
    };
    static_assert(kMaxStepNormBlocks == 8, "one instantiation for each count of blocks");
    switch (a.d_v / 32) {
    case 1: go(gated_norm_q8_kernel<1>); break;
    case 2: go(gated_norm_q8_kernel<2>); break;
    case 3: go(gated_norm_q8_kernel<3>); break;
    case 4: go(gated_norm_q8_kernel<4>); break;
    case 5: go(gated_norm_q8_kernel<5>); break;
    case 6: go(gated_norm_q8_kernel<6>); break;
    case 7: go(gated_norm_q8_kernel<7>); break;
    default: go(gated_norm_q8_kernel<8>); break;
    }
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
