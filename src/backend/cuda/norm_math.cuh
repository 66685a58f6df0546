// RMSNorm arithmetic shared by the norm kernels (norm.cu) and the fused steps that normalize heads (rope_kv_write.cu
// before attention, delta_net.cu's delta-net step), so that each computes a head's norm in the same order, bit for
// bit: each value's square rounded in float and summed in double, then the scale 1 / sqrt(mean + eps) in float.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace zinc::backend::cuda {

// The sum over the warp, the same in every lane (a butterfly of commutative adds).
__device__ __forceinline__ double warp_sum(double v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// The float square of each value of v, added to sum in double in value order.
__device__ __forceinline__ double add_squares(double sum, float4 v) {
    sum += double(v.x * v.x);
    sum += double(v.y * v.y);
    sum += double(v.z * v.z);
    return sum + double(v.w * v.w);
}

__device__ __forceinline__ float rms_scale(double sum, int64_t group, float eps) {
    return 1.0f / sqrtf(float(sum / double(group)) + eps);
}

// The sum of squares of the group at x, by one warp: lane l adds the values l, l + 32, ... in that order, then the
// lanes' sums are added by warp_sum, so every lane has the same result.
__device__ __forceinline__ double warp_sum_squares(const float* x, int64_t group, int lane) {
    double sum = 0;
    for (int64_t i = lane; i < group; i += 32) {
        const float v = x[i];
        sum += double(v * v);
    }
    return warp_sum(sum);
}

// y = x / sqrt(sum(x^2) + eps) over the group at x (transformers' l2norm), by one warp; y may be x. Lane l reads and
// writes only the values l, l + 32, ...
__device__ __forceinline__ void warp_l2_normalize(const float* x, float eps, int64_t group, int lane, float* y) {
    const float scale = 1.0f / sqrtf(float(warp_sum_squares(x, group, lane)) + eps);
    for (int64_t i = lane; i < group; i += 32) y[i] = x[i] * scale;
}

// A value of the gated RMSNorm: x * scale * w * SiLU(z), rounded step by step in that order.
__device__ __forceinline__ float gated_norm_value(float x, float scale, float w, float z) {
    return x * scale * w * (z / (1.0f + expf(-z)));
}

// v * scale * w value by value (as the CPU: (x * scale) * w); w null means 1.
__device__ __forceinline__ float4 scaled(float4 v, float scale, const float4* w, int i) {
    if (w) {
        const float4 wv = w[i];
        return make_float4(v.x * scale * wv.x, v.y * scale * wv.y, v.z * scale * wv.z, v.w * scale * wv.w);
    }
    return make_float4(v.x * scale, v.y * scale, v.z * scale, v.w * scale);
}

}  // namespace zinc::backend::cuda
