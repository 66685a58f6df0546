// The interface every backend implements: memory for weights and activations, and the ops the
// forward passes in engine/ are written against. Activations are always f32 matrices of `rows`
// token rows by `cols` values; weights keep the GGUF type they were stored in.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "gguf/reader.h"

namespace zinc::backend {

// A weight tensor resident on a backend. `data` is backend memory (host memory for the CPU).
struct Weight {
    gguf::TensorType type = gguf::TensorType::F32;
    int64_t cols = 0;  // ne[0]: the reduction dimension of a matmul
    int64_t rows = 0;  // ne[1] * ne[2] * ne[3]
    const void* data = nullptr;
    std::string name;
};

// An f32 activation matrix in backend memory: `rows` rows of `cols` contiguous values.
struct Act {
    float* data = nullptr;
    int64_t rows = 0, cols = 0;
    int64_t size() const { return rows * cols; }
};

// One attention layer's cache: K and V rows of `width` (= n_head_kv * head_dim) values for
// up to `capacity` positions, in backend memory.
struct KvLayer {
    float* k = nullptr;
    float* v = nullptr;
    int64_t width = 0, capacity = 0;
};

struct RopeParams {
    int n_rot = 0;           // rotated dimensions of each head (the first n_rot)
    bool neox = true;        // pairs (i, i + n_rot/2); otherwise adjacent pairs (2i, 2i+1)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;  // linear position scaling (1/factor)
};

struct AttentionParams {
    int n_head = 0, n_head_kv = 0, head_dim = 0;
    float scale = 1.0f;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;

    // Makes a GGUF tensor usable by the ops. The CPU backend keeps a view into the mapping.
    virtual Weight load_weight(const gguf::TensorInfo& t) = 0;
    // Activation and cache memory; owned by the backend until it is destroyed.
    virtual Act alloc(int64_t rows, int64_t cols) = 0;
    virtual KvLayer alloc_kv(int64_t width, int64_t capacity) = 0;
    // Views of `rows` consecutive rows starting at `row` share the memory of `a`.
    static Act rows_of(const Act& a, int64_t row, int64_t rows) { return {a.data + row * a.cols, rows, a.cols}; }

    virtual void upload(Act& dst, std::span<const float> src) = 0;
    virtual void download(const Act& src, std::span<float> dst) = 0;

    // out[t] = dequantized row ids[t] of table.
    virtual void get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) = 0;
    // out = x / rms(x) * w over each group of `group` values (group = x.cols for a plain norm,
    // head_dim for per-head norms); w (length group) may be null.
    virtual void rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) = 0;
    // out[t][o] = sum_i W[o][i] * x[t][i]
    virtual void matmul(const Weight& w, const Act& x, Act& out) = 0;
    // Rotates each head of width head_dim in x in place; pos[t] is the position of row t.
    virtual void rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) = 0;
    virtual void add(const Act& a, const Act& b, Act& out) = 0;
    // out = SiLU(gate) * up
    virtual void swiglu(const Act& gate, const Act& up, Act& out) = 0;
    // Stores k and v rows (one per token) at cache positions pos0, pos0+1, ...
    virtual void kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) = 0;
    // Causal attention of q (rows at positions pos0, pos0+1, ...) over cache positions [0, pos0 + q.rows).
    virtual void attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) = 0;
    // Waits for queued work (no-op on the CPU).
    virtual void synchronize() {}
};

std::unique_ptr<Backend> make_cpu_backend(int n_threads);

}  // namespace zinc::backend
