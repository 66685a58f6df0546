// CPU element-wise ops: the residual add, SwiGLU and GeGLU, row-broadcast bias, scaling and soft-capping
// (cpu_elementwise.cpp). Semantics are those of the Backend methods of the same names (backend/backend.h), which
// check the arguments before CpuBackend calls these.
#pragma once

#include <cmath>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

// SiLU of one value (the delta-net's conv output and gated norm; SwiGLU, of the dense FFN and the MoE experts alike,
// takes simd.h's silu_mul), and GeGLU of one element, as geglu computes it (and the fused products of cpu_matmul, the
// MoE experts of cpu_moe).
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
// transformers' gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in f32. (llama.cpp's CPU backend
// uses an FP16 table instead, docs/models.md §0.3; this follows the f32 formula.)
inline float gelu_mul(float g, float u) {
    constexpr float k = 0.7978845608028654f;  // sqrt(2/pi)
    return 0.5f * g * (1.0f + std::tanh(k * (g + 0.044715f * g * g * g))) * u;
}

void add(ThreadPool& pool, const Act& a, const Act& b, Act& out);
void swiglu(ThreadPool& pool, const Act& gate, const Act& up, Act& out);
void geglu(ThreadPool& pool, const Act& gate, const Act& up, Act& out);
void add_bias(ThreadPool& pool, Act& x, const Weight& b);
void scale(ThreadPool& pool, const Act& x, float s, Act& out);
void softcap(ThreadPool& pool, Act& x, float cap);

}  // namespace zinc::backend::cpu
