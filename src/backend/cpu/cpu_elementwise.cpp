// Element-wise ops: the residual add and SwiGLU of every family, and for gemma4 / gpt-oss GeGLU (tanh GELU in f32),
// row-broadcast bias, scale, soft-cap.
#include "backend/cpu/cpu_elementwise.h"

#include <cmath>

namespace zinc::backend::cpu {
namespace {

// Rows per parallel chunk: small tensors stay on the calling thread.
template <class Fn>
void for_rows(ThreadPool& pool, const Act& a, Fn&& fn) {
    if (a.size() < 16384)
        fn(int64_t(0), a.rows);
    else
        pool.parallel_for(a.rows, fn);
}

}  // namespace

void add(const Act& a, const Act& b, Act& out) {
    for (int64_t i = 0; i < a.size(); ++i) out.data[i] = a.data[i] + b.data[i];
}

void swiglu(const Act& gate, const Act& up, Act& out) {
    for (int64_t i = 0; i < gate.size(); ++i) {
        const float g = gate.data[i];
        out.data[i] = g / (1.0f + std::exp(-g)) * up.data[i];
    }
}

void geglu(ThreadPool& pool, const Act& gate, const Act& up, Act& out) {
    // transformers' gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in f32. (llama.cpp's CPU
    // backend uses an FP16 table instead, docs/models.md §0.3; this follows the f32 formula.)
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    for_rows(pool, gate, [&](int64_t b, int64_t e) {
        for (int64_t i = b * gate.cols; i < e * gate.cols; ++i) {
            const float x = gate.data[i];
            out.data[i] = 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x))) * up.data[i];
        }
    });
}

void add_bias(ThreadPool& pool, Act& x, const Weight& b) {
    const float* bd = static_cast<const float*>(b.data);
    for_rows(pool, x, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
            for (int64_t i = 0; i < x.cols; ++i) x.data[r * x.cols + i] += bd[i];
    });
}

void scale(ThreadPool& pool, const Act& x, float s, Act& out) {
    for_rows(pool, x, [&](int64_t b, int64_t e) {
        for (int64_t i = b * x.cols; i < e * x.cols; ++i) out.data[i] = x.data[i] * s;
    });
}

void softcap(ThreadPool& pool, Act& x, float cap) {
    for_rows(pool, x, [&](int64_t b, int64_t e) {
        for (int64_t i = b * x.cols; i < e * x.cols; ++i) x.data[i] = cap * std::tanh(x.data[i] / cap);
    });
}

}  // namespace zinc::backend::cpu
