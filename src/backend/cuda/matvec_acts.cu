// Decode matvecs of a step over several sequences: out[t][o] = W[o] . x[t] for a few activation rows (up to
// kMatvecMaxRows), each weight row read from memory once for all of them. A warp takes one or two weight rows and a
// group of up to kActs activation rows (blockIdx.x % groups), and dots every piece of the rows it loads with each of
// them; the groups of one block of weight rows are neighbours in the grid, so they run together and the weight rows
// come from memory once and from L2 for the other groups.
//
// A lane goes through its pieces of the row in the order the one-row matvec's lanes do (matvec_row.cuh): the 64-value
// groups l, l + 32, ... where that kernel reads them in place (Q4_K, Q5_K, MXFP4, IQ4_XS of groups_in_place), Q6_K's
// groups of super-blocks l / 4, l / 4 + 8, ... where it stages aligned rows, else the 32-value chunks l, l + 32, ....
// Each piece's product is the same function of the same bytes, so every row's value is that matvec's bit for bit:
// a sequence in a step of several gets the logits it gets alone.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_row.cuh"

namespace zinc::backend::cuda {
namespace {

constexpr int kWarps = kStageWarps;  // warps per block
// The fewest warps a launch keeps in flight (16 per multiprocessor of an H100) before a warp takes more weight rows.
constexpr int64_t kMinWarps = 2048;

// A warp takes R weight rows o0 .. o0 + R - 1 against the group's activation rows: each activation piece it loads
// serves R rows, as each weight piece serves every activation row. kGroups: the row is read by 64-value groups (for
// Q6_K: its staged order), as the one-row matvec reads it.
template <int T, int kActs, int R>
__global__ void __launch_bounds__(kWarps * 32) matvec_acts_kernel(const uint8_t* w, size_t row_bytes, int64_t n_out,
                                                                  int64_t cols, const BlockQ8_1f* xq, int64_t n_act,
                                                                  int groups_per_row, bool by_groups, float* out,
                                                                  int64_t out_stride) {
    const int64_t block = blockIdx.x / groups_per_row;
    const int64_t o0 = (block * kWarps + threadIdx.x / 32) * R;
    const int64_t t0 = int64_t(blockIdx.x % groups_per_row) * kActs;
    const int lane = int(threadIdx.x % 32);
    const int n = n_act - t0 < kActs ? int(n_act - t0) : kActs;
    begin_kernel();
    if (o0 >= n_out) return;  // whole warps
    const int nr = n_out - o0 < R ? int(n_out - o0) : R;
    const uint8_t* rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = w + (o0 + (r < nr ? r : 0)) * row_bytes;
    const int64_t nb = cols / 32;  // Q8_1 blocks of an activation row
    const BlockQ8_1f* x0 = xq + t0 * nb;
    float acc[R][kActs];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < kActs; ++j) acc[r][j] = 0.0f;
    bool done = false;
    if constexpr (kGroupsInPlace<T>) {
        if (by_groups) {
            const int g = lane & 3, n_groups = int(cols / 64);
            for (int gi = lane; gi < n_groups; gi += 32) {
                KGroup<T> wg[R];
#pragma unroll
                for (int r = 0; r < R; ++r)
                    if (r < nr) load_k_group<T>(rows[r], gi, wg[r]);
#pragma unroll
                for (int j = 0; j < kActs; ++j)
                    if (j < n) {
                        ActGroup a;
                        load_act_group(x0 + j * nb + 2 * gi, a);
#pragma unroll
                        for (int r = 0; r < R; ++r)
                            if (r < nr) acc[r][j] = __fadd_rn(acc[r][j], k_group_dot<T>(wg[r], g, a));
                    }
            }
            done = true;
        }
    }
    if constexpr (T == kQ6_K) {
        if (by_groups) {
            const int u = lane & 3;
            for (int64_t sb = lane >> 2; sb < nb / 8; sb += 8)
#pragma unroll
                for (int j = 0; j < kActs; ++j)
                    if (j < n) {
                        Q6Act x;
                        load_q6_k_act(x0 + j * nb + 8 * sb + 4 * (u >> 1), u & 1, x);
#pragma unroll
                        for (int r = 0; r < R; ++r)
                            if (r < nr) acc[r][j] = __fadd_rn(acc[r][j], q6_k_group_dot(rows[r], int(210 * sb), u, x));
                    }
            done = true;
        }
    }
    if (!done)
        for (int64_t c = lane; c < nb; c += 32)
#pragma unroll
            for (int j = 0; j < kActs; ++j)
                if (j < n) {
                    const BlockQ8_1f x = x0[j * nb + c];
#pragma unroll
                    for (int r = 0; r < R; ++r)
                        if (r < nr) acc[r][j] = __fadd_rn(acc[r][j], chunk_dot<T>(rows[r], c, x));
                }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < kActs; ++j) {
            const float s = warp_sum(acc[r][j]);
            if (lane == 0 && j < n && r < nr) out[(t0 + j) * out_stride + o0 + r] = s;
        }
}

template <int kActs, int R>
cudaError_t launch_acts(int type, const uint8_t* w, size_t row_bytes, int64_t n_out, int64_t cols,
                        const BlockQ8_1f* xq, int64_t n_act, float* out, int64_t out_stride, cudaStream_t s) {
    const int64_t groups = (n_act + kActs - 1) / kActs, blocks = (n_out + kWarps * R - 1) / (kWarps * R);
    if (blocks * groups > INT32_MAX) return cudaErrorInvalidValue;
    // The one-row matvec's choice of order (lane_rows_dot): groups in place, Q6_K staged where its rows are aligned.
    const bool by_groups = type == kQ6_K ? aligned_rows(w, row_bytes) : groups_in_place(type, w, row_bytes, cols);
    return for_weight_type<kQuantTypes>(type, [&](auto t) {
        return launch(matvec_acts_kernel<decltype(t)::value, kActs, R>, unsigned(blocks * groups), kWarps * 32, 0, s,
                      w, row_bytes, n_out, cols, xq, n_act, int(groups), by_groups, out, out_stride);
    });
}

// Two weight rows a warp where the launch keeps kMinWarps warps that way, for up to 4 activation rows: each activation
// piece then serves two rows, and the loads of the activations, not of the weights, were what a warp waited on (H100,
// Qwen3-8B Q4_K_M: two sequences 378 -> 449 t/s, three 461 -> 564; four rows a warp gained nothing more).
template <int kActs>
cudaError_t launch_rows(int type, const uint8_t* w, size_t row_bytes, int64_t n_out, int64_t cols,
                        const BlockQ8_1f* xq, int64_t n_act, float* out, int64_t out_stride, cudaStream_t s) {
    const int64_t warps = n_out * ((n_act + kActs - 1) / kActs);
    if (kActs <= 4 && warps >= 2 * kMinWarps)
        return launch_acts<kActs, 2>(type, w, row_bytes, n_out, cols, xq, n_act, out, out_stride, s);
    return launch_acts<kActs, 1>(type, w, row_bytes, n_out, cols, xq, n_act, out, out_stride, s);
}

}  // namespace

cudaError_t matvec_q_acts(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols,
                          const BlockQ8_1f* xq, int64_t n_act, float* out, int64_t out_stride, cudaStream_t s) {
    if (n_out <= 0 || n_act <= 0) return cudaGetLastError();
    if (cols % 32 != 0) return cudaErrorInvalidValue;
    const auto* wb = static_cast<const uint8_t*>(w);
    if (n_act <= 2) return launch_rows<2>(type, wb, row_bytes, n_out, cols, xq, n_act, out, out_stride, s);
    if (n_act <= 4) return launch_rows<4>(type, wb, row_bytes, n_out, cols, xq, n_act, out, out_stride, s);
    return launch_rows<8>(type, wb, row_bytes, n_out, cols, xq, n_act, out, out_stride, s);
}

}  // namespace zinc::backend::cuda
