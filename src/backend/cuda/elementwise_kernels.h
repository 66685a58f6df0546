// Host-side launchers of the CUDA backend's element-wise kernels (elementwise.cu), and the activation functions
// that elementwise.cu and moe.cu share. Plain C++17 for nvcc; each launcher enqueues on `s` and returns
// cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace zinc::backend::cuda {

// elementwise.cu
cudaError_t add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);
cudaError_t swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t s);
// out = GELU_tanh(gate) * up in f32.
cudaError_t geglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t s);
// x[r][i] += b[i] for `rows` rows of `cols` values.
cudaError_t add_bias(float* x, const float* b, int64_t rows, int64_t cols, cudaStream_t s);
// out = x * v; out may alias x.
cudaError_t scale(const float* x, float v, float* out, int64_t n, cudaStream_t s);
// x = cap * tanh(x / cap)
cudaError_t softcap(float* x, float cap, int64_t n, cudaStream_t s);

#ifdef __CUDACC__
// The CPU backend's activation expressions (cpu_elementwise.cpp, cpu_moe.cpp) operation by operation. Where an
// expression has a product feeding a sum, the steps are rounded one by one (__fmul_rn, __fadd_rn) so that nvcc
// forms no fused multiply-add the CPU does not; what remains is expf/tanhf against the host libm (1-2 ulp).
__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.0f + expf(-g)) * u; }

__device__ __forceinline__ float gelu_tanh_times(float g, float u) {
    const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, g), g), g);
    const float t = tanhf(__fmul_rn(0.7978845608028654f, __fadd_rn(g, cube)));  // sqrt(2/pi)
    return __fmul_rn(__fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, t)), u);
}

// gpt-oss: gate clamped from above, up clamped to [-limit, limit], SiLU with slope alpha, times (up + 1).
__device__ __forceinline__ float swiglu_oai_times(float g, float u, float alpha, float limit) {
    const float x = fminf(g, limit), y = fminf(fmaxf(u, -limit), limit);
    return x / (1.0f + expf(-alpha * x)) * (y + 1.0f);
}

// One value of shared_expert_add: out + (a + b * sg), sg the gate's sigmoid, each product and sum rounded on its own
// (the order of sigmoid_mul, add, add). shared_expert_add's kernel and the norm kernel that adds before it normalizes
// (shared_expert_add_norm) both compute it here.
__device__ __forceinline__ float shared_expert_sum(float out, float a, float b, float sg) {
    return __fadd_rn(out, __fadd_rn(a, __fmul_rn(b, sg)));
}
#endif

}  // namespace zinc::backend::cuda
