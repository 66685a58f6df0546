// Single roundings on the GPU: __fmul_rn, __fadd_rn, __fsub_rn, __fdiv_rn and __fmaf_rn, which nvcc never fuses
// with the operations around them, so that a kernel's arithmetic is the one written (the CPU backend's, where it must
// match bit for bit: RoPE angles hundreds of radians large; the quant formats' scales). On the host (the tests)
// the plain operations. Plain C++17 for nvcc and the host compiler.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace zinc::backend::cuda {

__host__ __device__ inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
__host__ __device__ inline float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
__host__ __device__ inline float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
__host__ __device__ inline float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
__host__ __device__ inline float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}

}  // namespace zinc::backend::cuda
