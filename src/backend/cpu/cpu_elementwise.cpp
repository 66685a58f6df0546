// Element-wise ops: the residual add and SwiGLU (simd.h's silu_mul) of every family, and for gemma4 / gpt-oss GeGLU
// (tanh GELU in f32), row-broadcast bias, scale, soft-cap.
#include "backend/cpu/cpu_elementwise.h"

#include <cmath>

#include "backend/cpu/simd.h"

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

void add(ThreadPool& pool, const Act& a, const Act& b, Act& out) {
    for_rows(pool, a, [&](int64_t r0, int64_t r1) {
        for (int64_t i = r0 * a.cols; i < r1 * a.cols; ++i) out.data[i] = a.data[i] + b.data[i];
    });
}

void swiglu(ThreadPool& pool, const Act& gate, const Act& up, Act& out) {
    for_rows(pool, gate, [&](int64_t b, int64_t e) {
        const int64_t i = b * gate.cols;
        simd::kernels().silu_mul(gate.data + i, up.data + i, out.data + i, (e - b) * gate.cols);
    });
}

void geglu(ThreadPool& pool, const Act& gate, const Act& up, Act& out) {
    for_rows(pool, gate, [&](int64_t b, int64_t e) {
        for (int64_t i = b * gate.cols; i < e * gate.cols; ++i) out.data[i] = gelu_mul(gate.data[i], up.data[i]);
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
