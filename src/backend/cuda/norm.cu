// RMSNorm: out = x * (1 / sqrt(mean(x^2) + eps)) * w over each group, the squares rounded in float and summed in
// double as the CPU reference does (within a thread in value order, then across threads in a fixed order, so every
// thread of a group computes the same scale). Each thread keeps its values in registers between the sum and the
// scaling, so x is read once, in 16-byte loads; the launch fits the group:
//  - up to 512 values (per-head q/k/v norms, head_dim 64-512): one warp per group, four groups per block of 128
//    threads; lane l holds float4s l, l+32, ... (NV = 1, 2 or 4 of them);
//  - up to 32768 values (a row of n_embd for the layer norms: 2048-8192): one block per group, thread t holding
//    float4s t, t+T, ... (NV = 1-8): a thread per float4 up to 4096 values, T = 1024 beyond; the same kernel stores
//    up to three outputs of the group, each with its weight and scale (rms_norms);
//  - a group that is no whole number of float4s, data not 16-byte aligned, or a longer group: one block of 256
//    threads per group looping over the values, which reads x twice.
// L2 norm and gated RMSNorm (delta-net layers): one warp per group, as their groups are head-sized (128); squares
// rounded in float and summed in double, as the CPU reference does.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/delta_net_kernels.h"
#include "backend/cuda/elementwise_kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/norm_kernels.h"
#include "backend/cuda/norm_math.cuh"
#include "backend/cuda/vec_dot_q8_1.cuh"

namespace zinc::backend::cuda {
namespace {

constexpr int kThreads = 256;

// One warp per group of n4 float4s (n4 <= 32 * NV).
template <int NV>
__global__ void __launch_bounds__(128) rms_norm_warp_kernel(const float4* x, const float4* w, float eps, int64_t group,
                                                            int64_t n_groups, float4* out) {
    begin_kernel();
    const int64_t g = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
    if (g >= n_groups) return;  // whole warps
    const int lane = int(threadIdx.x % 32), n4 = int(group / 4);
    const float4* xi = x + g * n4;
    float4 v[NV];
    double sum = 0;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
        const int i = lane + 32 * k;
        v[k] = i < n4 ? xi[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        sum = add_squares(sum, v[k]);  // the zeros past the group add nothing
    }
    const float scale = rms_scale(warp_sum(sum), group, eps);
    float4* yo = out + g * n4;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
        const int i = lane + 32 * k;
        if (i < n4) yo[i] = scaled(v[k], scale, w, i);
    }
}

// out + v, then times s when s != 1, each rounded as add's and scale's kernels round them.
__device__ __forceinline__ float4 add_scaled(float4 out, float4 v, float s) {
    float4 r = make_float4(__fadd_rn(out.x, v.x), __fadd_rn(out.y, v.y), __fadd_rn(out.z, v.z), __fadd_rn(out.w, v.w));
    if (s != 1.0f) r = make_float4(__fmul_rn(r.x, s), __fmul_rn(r.y, s), __fmul_rn(r.z, s), __fmul_rn(r.w, s));
    return r;
}

// shared_expert_sum value by value.
__device__ __forceinline__ float4 shared_expert_sum4(float4 out, float4 a, float4 b, float sg) {
    return make_float4(shared_expert_sum(out.x, a.x, b.x, sg), shared_expert_sum(out.y, a.y, b.y, sg),
                       shared_expert_sum(out.z, a.z, b.z, sg), shared_expert_sum(out.w, a.w, b.w, sg));
}

// One block per group of n4 float4s (n4 <= blockDim.x * NV, blockDim.x a multiple of 32 up to 1024), for NO outputs
// of the same normalized group: output j is the group times o.w[j], then (with `accumulate`, NO = 1 and no q8) added
// to what o.out[j] holds, and times o.s[j] when that is not 1 (rms_norm, rms_norms, norm_add). With q8 (the group a
// whole number of 32-value blocks, so that the 8 lanes of a block are all inside the group or all past it), also the
// Q8_1 blocks of output 0. With pre.a, the group normalized is x + pre.a + pre.b * sigmoid(gate), stored to pre.sum
// (shared_expert_add_norm).
template <int NV, int NO>
__global__ void __launch_bounds__(1024) rms_norm_block_kernel(const float4* x, float eps, int64_t group, NormOuts o,
                                                              BlockQ8_1f* q8, bool accumulate, NormPreAdd pre) {
    const int64_t g = blockIdx.x;
    const int n4 = int(group / 4), t = int(threadIdx.x), T = int(blockDim.x);
    const float4 ones = make_float4(1.0f, 1.0f, 1.0f, 1.0f), zeros = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    // Output 0's weights are read before the kernel before this one has ended (no kernel writes them).
    float4 wv[NV];
#pragma unroll
    for (int k = 0; k < NV; ++k) {
        const int i = t + T * k;
        wv[k] = o.w[0] && i < n4 ? o.w[0][i] : ones;
    }
    begin_kernel();
    const float4* xi = x + g * n4;
    float4 v[NV];
    double sum = 0;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
        const int i = t + T * k;
        v[k] = i < n4 ? xi[i] : zeros;
        if (pre.a && i < n4) {
            v[k] = shared_expert_sum4(v[k], pre.a[g * n4 + i], pre.b[g * n4 + i], dn_sigmoid(pre.gate[g]));
            pre.sum[g * n4 + i] = v[k];
        }
        sum = add_squares(sum, v[k]);
    }
    __shared__ double part[32];
    sum = warp_sum(sum);
    if (t % 32 == 0) part[t / 32] = sum;
    __syncthreads();
    double total = 0;
    for (int i = 0; i < T / 32; ++i) total += part[i];  // the same order in every thread
    const float scale = rms_scale(total, group, eps);
#pragma unroll
    for (int j = 0; j < NO; ++j) {
        float4* yo = o.out[j] + g * n4;
        const float4* w = o.w[j];
        const float s = o.s[j];
#pragma unroll
        for (int k = 0; k < NV; ++k) {
            const int i = t + T * k;
            if (j > 0) wv[k] = w && i < n4 ? w[i] : ones;
            float4 r = i < n4 ? scaled(v[k], scale, w ? &wv[k] : nullptr, 0) : zeros;
            if (accumulate) {
                if (i < n4) r = add_scaled(yo[i], r, s);
            } else if (s != 1.0f) {
                r = make_float4(__fmul_rn(r.x, s), __fmul_rn(r.y, s), __fmul_rn(r.z, s), __fmul_rn(r.w, s));
            }
            if (i < n4) yo[i] = r;
            if (j == 0 && q8) {
                const Q8Lanes q = quantize_8_lanes(r);
                BlockQ8_1f* b = q8 + g * (group / 32) + i / 8;
                if (i < n4)
                    store_8_lanes(q, reinterpret_cast<uint8_t*>(b->qs), reinterpret_cast<uint8_t*>(&b->d), i % 8);
            }
        }
    }
}

// Any group, any alignment: one block per group, two passes over x.
__global__ void rms_norm_loop_kernel(const float* x, const float* w, float eps, int64_t group, float* out) {
    begin_kernel();
    const int64_t g = blockIdx.x;
    const float* xi = x + g * group;
    float* yo = out + g * group;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) sum += double(xi[i] * xi[i]);
    __shared__ double part[kThreads / 32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    sum = warp_sum(sum);
    if (lane == 0) part[warp] = sum;
    __syncthreads();
    double total = 0;
    for (int i = 0; i < int(blockDim.x / 32); ++i) total += part[i];  // the same order in every thread
    const float scale = rms_scale(total, group, eps);
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) yo[i] = xi[i] * scale * (w ? w[i] : 1.0f);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

constexpr int kGroupsPerBlock = kThreads / 32;

__global__ void l2_norm_kernel(const float* x, float eps, int64_t group, int64_t n_groups, float* out) {
    begin_kernel();
    const int64_t g = blockIdx.x * int64_t(kGroupsPerBlock) + threadIdx.x / 32;
    if (g >= n_groups) return;  // whole warps
    warp_l2_normalize(x + g * group, eps, group, int(threadIdx.x % 32), out + g * group);
}

__global__ void gated_rms_norm_kernel(const float* x, const float* w, const float* z, float eps, int64_t group,
                                      int64_t n_groups, float* out) {
    begin_kernel();
    const int64_t g = blockIdx.x * int64_t(kGroupsPerBlock) + threadIdx.x / 32;
    if (g >= n_groups) return;  // whole warps
    const int lane = int(threadIdx.x % 32);
    const float* xi = x + g * group;
    const float* zi = z + g * group;
    float* yo = out + g * group;
    const float scale = rms_scale(warp_sum_squares(xi, group, lane), group, eps);
    for (int64_t i = lane; i < group; i += 32) yo[i] = gated_norm_value(xi[i], scale, w[i], zi[i]);
}

unsigned warp_groups_grid(int64_t n_groups) { return unsigned((n_groups + kGroupsPerBlock - 1) / kGroupsPerBlock); }

constexpr int64_t kMaxBlockFloat4s = 8192;  // the longest group of rms_norm_block_kernel, in float4s

// rms_norm_block_kernel for n_groups groups of `group` values (group % 4 == 0, group / 4 <= kMaxBlockFloat4s) and
// n_out outputs: a thread per float4 up to 4096 values, 1024 threads holding 2-8 float4s each beyond. A decode step's
// norms are one block each, on the step's critical path, so the fewer values a thread goes through one after the
// other the better: Qwen3-8B's 4096-value norm with its Q8_1 blocks, alone on the H100, took 3.23 µs with 256 threads
// of 4 float4s, 2.97 with 1024 of one (in the step about 3 µs each: the step's time grows by that much when every norm
// is launched twice). The threads and their values depend on the group alone, so each output is the value a launch
// for it alone stores.
void launch_block_norm(const float4* x4, float eps, int64_t group, int64_t n_groups, const NormOuts& o, int n_out,
                       BlockQ8_1f* q8, bool accumulate, cudaStream_t s, const NormPreAdd& pre = {}) {
    const int64_t n4 = group / 4;
    const int threads = n4 < 1024 ? int((n4 + 31) / 32 * 32) : 1024;
    const unsigned blocks = unsigned(n_groups);
    auto run = [&](auto nv) {
        constexpr int NV = decltype(nv)::value;
        auto go = [&](auto kernel) { launch(kernel, blocks, threads, 0, s, x4, eps, group, o, q8, accumulate, pre); };
        if (n_out == 1)
            go(rms_norm_block_kernel<NV, 1>);
        else if (n_out == 2)
            go(rms_norm_block_kernel<NV, 2>);
        else
            go(rms_norm_block_kernel<NV, 3>);
    };
    if (n4 <= int64_t(threads))
        run(std::integral_constant<int, 1>{});
    else if (n4 <= 2 * int64_t(threads))
        run(std::integral_constant<int, 2>{});
    else if (n4 <= 4 * int64_t(threads))
        run(std::integral_constant<int, 4>{});
    else
        run(std::integral_constant<int, 8>{});
}

NormOuts one_output(const float* w, float* out, float s) {
    NormOuts o{};
    o.w[0] = reinterpret_cast<const float4*>(w);
    o.out[0] = reinterpret_cast<float4*>(out);
    o.s[0] = s;
    return o;
}

}  // namespace

bool rms_norm_add_fits(const float* x, const float* w, int64_t group, const float* out) {
    return group % 4 == 0 && group / 4 <= kMaxBlockFloat4s && aligned16(x) && aligned16(out) && (!w || aligned16(w));
}

cudaError_t rms_norm_add(const float* x, const float* w, float eps, int64_t group, int64_t n_groups, float* out,
                         float scale, cudaStream_t s) {
    if (!rms_norm_add_fits(x, w, group, out) || n_groups > INT32_MAX) return cudaErrorInvalidValue;
    if (n_groups <= 0) return cudaGetLastError();
    launch_block_norm(reinterpret_cast<const float4*>(x), eps, group, n_groups, one_output(w, out, scale), 1, nullptr,
                      true, s);
    return cudaGetLastError();
}

cudaError_t rms_norms(const float* x, const float* const* w, float* const* out, const float* scale, int n_out,
                      float eps, int64_t group, int64_t n_groups, BlockQ8_1f* q8, cudaStream_t s) {
    if (n_out < 1 || n_out > kMaxNormOuts || n_groups > INT32_MAX) return cudaErrorInvalidValue;
    if (q8 && !rms_norm_can_quantize(x, w[0], group, out[0])) return cudaErrorInvalidValue;
    NormOuts o{};
    for (int j = 0; j < n_out; ++j) {
        if (!rms_norm_add_fits(x, w[j], group, out[j])) return cudaErrorInvalidValue;
        o.w[j] = reinterpret_cast<const float4*>(w[j]);
        o.out[j] = reinterpret_cast<float4*>(out[j]);
        o.s[j] = scale[j];
    }
    if (n_groups > 0)
        launch_block_norm(reinterpret_cast<const float4*>(x), eps, group, n_groups, o, n_out, q8, false, s);
    return cudaGetLastError();
}

cudaError_t shared_expert_add_norm(float* x, const float* a, const float* b, const float* gate, const float* w,
                                   float eps, int64_t group, int64_t n_groups, float* out, BlockQ8_1f* q8,
                                   cudaStream_t s) {
    if (!rms_norm_add_fits(x, w, group, out) || !aligned16(a) || !aligned16(b) || n_groups > INT32_MAX ||
        (q8 && !rms_norm_can_quantize(x, w, group, out)))
        return cudaErrorInvalidValue;
    if (n_groups <= 0) return cudaGetLastError();
    const NormPreAdd pre{reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b), gate,
                         reinterpret_cast<float4*>(x)};
    launch_block_norm(reinterpret_cast<const float4*>(x), eps, group, n_groups, one_output(w, out, 1.0f), 1, q8, false,
                      s, pre);
    return cudaGetLastError();
}

bool rms_norm_can_quantize(const float* x, const float* w, int64_t group, const float* out) {
    return group % 32 == 0 && group <= 32768 && aligned16(x) && aligned16(out) && (!w || aligned16(w));
}

cudaError_t rms_norm(const float* x, const float* w, float eps, int64_t group, int64_t n_groups, float* out,
                     BlockQ8_1f* q8, cudaStream_t s) {
    if (q8 && !rms_norm_can_quantize(x, w, group, out)) return cudaErrorInvalidValue;
    if (n_groups <= 0) return cudaGetLastError();
    const auto* x4 = reinterpret_cast<const float4*>(x);
    const auto* w4 = reinterpret_cast<const float4*>(w);
    auto* o4 = reinterpret_cast<float4*>(out);
    const bool vec = group % 4 == 0 && aligned16(x) && aligned16(out) && (!w || aligned16(w));
    const int64_t n4 = group / 4;
    if (vec && n4 <= 128 && !q8) {
        const unsigned blocks = unsigned((n_groups + 3) / 4);
        if (n4 <= 32)
            launch(rms_norm_warp_kernel<1>, blocks, 128, 0, s, x4, w4, eps, group, n_groups, o4);
        else if (n4 <= 64)
            launch(rms_norm_warp_kernel<2>, blocks, 128, 0, s, x4, w4, eps, group, n_groups, o4);
        else
            launch(rms_norm_warp_kernel<4>, blocks, 128, 0, s, x4, w4, eps, group, n_groups, o4);
    } else if (vec && n4 <= kMaxBlockFloat4s) {
        launch_block_norm(x4, eps, group, n_groups, one_output(w, out, 1.0f), 1, q8, false, s);
    } else {
        const int threads = group >= kThreads ? kThreads : int((group + 31) / 32 * 32);
        launch(rms_norm_loop_kernel, unsigned(n_groups), threads, 0, s, x, w, eps, group, out);
    }
    return cudaGetLastError();
}

cudaError_t l2_norm(const float* x, float eps, int64_t group, int64_t n_groups, float* out, cudaStream_t s) {
    if (n_groups > 0) launch(l2_norm_kernel, warp_groups_grid(n_groups), kThreads, 0, s, x, eps, group, n_groups, out);
    return cudaGetLastError();
}

cudaError_t gated_rms_norm(const float* x, const float* w, const float* z, float eps, int64_t group, int64_t n_groups,
                           float* out, cudaStream_t s) {
    if (n_groups > 0)
        launch(gated_rms_norm_kernel, warp_groups_grid(n_groups), kThreads, 0, s, x, w, z, eps, group, n_groups, out);
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
