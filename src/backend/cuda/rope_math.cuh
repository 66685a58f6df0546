// The rotation of one RoPE pair, shared by the rope kernel (rope.cu) and the fused per-head steps before attention
// (rope_kv_write.cu), so that both rotate a head bit for bit alike.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/attention_kernels.h"

namespace zinc::backend::cuda {

// Pair i of a head: its two values' indices and the angle's cosine and sine (times YaRN's mscale).
struct PairRotation {
    int i0, i1;
    float c, s;

    // Rotates the pair in the head values v.
    __device__ __forceinline__ void apply(float* v) const {
        const float p = v[i0], q = v[i1];
        v[i0] = p * c - q * s;
        v[i1] = p * s + q * c;
    }
};

// theta_i = pos * theta_scale^i, the power taken by repeated multiplication as the CPU does (rope_angle).
__device__ __forceinline__ PairRotation pair_rotation(float theta_i, int i, int half, const RopeArgs& a) {
    const float theta = rope_angle(theta_i, a.freq_factors ? a.freq_factors[i] : 1.0f, i, a);
    PairRotation r;
    sincosf(theta, &r.s, &r.c);
    r.c *= a.mscale;
    r.s *= a.mscale;
    rope_pair(i, half, a.neox, &r.i0, &r.i1);
    return r;
}

}  // namespace zinc::backend::cuda
