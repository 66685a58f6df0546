// The CPU backend: the numerical reference. Plain loops with f32 accumulation, split across
// threads by output rows; quantized weights are dequantized a row at a time (dequantize-and-dot),
// so a quantized matmul equals an f32 matmul on the dequantized weights up to summation order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"
#include "quant/dequantize.h"

namespace zinc::backend {
namespace {

using gguf::TensorType;

float dot(const float* a, const float* b, int64_t n) {
    // Eight independent partial sums let the compiler vectorise without reassociating.
    float s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; ++i) r += a[i] * b[i];
    return r;
}

void check_same_shape(const Act& a, const Act& b, const char* op) {
    if (a.rows != b.rows || a.cols != b.cols)
        throw std::invalid_argument(std::string(op) + ": shape mismatch");
}

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int n_threads) : pool_(n_threads) {}

    std::string name() const override { return "cpu"; }

    Weight load_weight(const gguf::TensorInfo& t) override {
        if (!quant::can_dequantize(t.type))
            throw std::runtime_error("tensor " + t.name + ": type " + std::string(gguf::type_name(t.type)) +
                                     " is not supported by the CPU backend");
        Weight w;
        w.type = t.type;
        w.cols = t.ne[0];
        w.rows = t.ne[1] * t.ne[2] * t.ne[3];
        w.data = t.data;
        w.name = t.name;
        return w;
    }

    Act alloc(int64_t rows, int64_t cols) override {
        auto& buf = buffers_.emplace_back(static_cast<size_t>(rows * cols));
        return {buf.data(), rows, cols};
    }

    KvLayer alloc_kv(int64_t width, int64_t capacity) override {
        KvLayer kv;
        kv.k = buffers_.emplace_back(static_cast<size_t>(width * capacity)).data();
        kv.v = buffers_.emplace_back(static_cast<size_t>(width * capacity)).data();
        kv.width = width;
        kv.capacity = capacity;
        return kv;
    }

    void upload(Act& dst, std::span<const float> src) override {
        if (static_cast<int64_t>(src.size()) != dst.size()) throw std::invalid_argument("upload: size mismatch");
        std::memcpy(dst.data, src.data(), src.size_bytes());
    }

    void download(const Act& src, std::span<float> dst) override {
        if (static_cast<int64_t>(dst.size()) != src.size()) throw std::invalid_argument("download: size mismatch");
        std::memcpy(dst.data(), src.data, dst.size_bytes());
    }

    void get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) override {
        if (out.cols != table.cols || out.rows != static_cast<int64_t>(ids.size()))
            throw std::invalid_argument("get_rows: shape mismatch");
        const size_t rb = gguf::row_bytes(table.type, table.cols);
        for (size_t t = 0; t < ids.size(); ++t) {
            if (ids[t] < 0 || ids[t] >= table.rows)
                throw std::out_of_range("token id " + std::to_string(ids[t]) + " is outside the vocabulary");
            quant::dequantize_row(table.type, static_cast<const uint8_t*>(table.data) + ids[t] * rb,
                                  out.data + t * out.cols, table.cols);
        }
    }

    void rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) override {
        check_same_shape(x, out, "rms_norm");
        if (group <= 0 || x.cols % group != 0) throw std::invalid_argument("rms_norm: bad group");
        if (w && (w->type != TensorType::F32 || w->cols != group))
            throw std::invalid_argument("rms_norm: weight must be f32 of the group's length");
        const float* wd = w ? static_cast<const float*>(w->data) : nullptr;
        const int64_t n_groups = x.size() / group;
        pool_.parallel_for(n_groups, [&](int64_t b, int64_t e) {
            for (int64_t g = b; g < e; ++g) {
                const float* xi = x.data + g * group;
                float* yo = out.data + g * group;
                double sum = 0;  // as ggml: the sum of squares in double
                for (int64_t i = 0; i < group; ++i) sum += double(xi[i]) * xi[i];
                const float scale = 1.0f / std::sqrt(float(sum / group) + eps);
                for (int64_t i = 0; i < group; ++i) yo[i] = xi[i] * scale * (wd ? wd[i] : 1.0f);
            }
        });
    }

    void matmul(const Weight& w, const Act& x, Act& out) override {
        if (x.cols != w.cols || out.rows != x.rows || out.cols != w.rows)
            throw std::invalid_argument("matmul " + w.name + ": shape mismatch");
        const size_t rb = gguf::row_bytes(w.type, w.cols);
        const bool f32 = w.type == TensorType::F32;
        pool_.parallel_for(w.rows, [&](int64_t b, int64_t e) {
            std::vector<float> row(f32 ? 0 : w.cols);
            for (int64_t o = b; o < e; ++o) {
                const uint8_t* src = static_cast<const uint8_t*>(w.data) + o * rb;
                const float* wr = reinterpret_cast<const float*>(src);
                if (!f32) {
                    quant::dequantize_row(w.type, src, row.data(), w.cols);
                    wr = row.data();
                }
                for (int64_t t = 0; t < x.rows; ++t) out.data[t * out.cols + o] = dot(wr, x.data + t * x.cols, w.cols);
            }
        });
    }

    void rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) override {
        if (x.cols % head_dim != 0 || static_cast<int64_t>(pos.size()) != x.rows || p.n_rot > head_dim ||
            p.n_rot % 2 != 0)
            throw std::invalid_argument("rope: bad shape");
        const int64_t heads = x.cols / head_dim;
        const int half = p.n_rot / 2;
        // Inverse frequencies in f32 as transformers computes them: base^(-2i/n_rot).
        std::vector<float> inv_freq(half);
        for (int i = 0; i < half; ++i)
            inv_freq[i] = 1.0f / std::pow(p.freq_base, float(2 * i) / float(p.n_rot));
        pool_.parallel_for(x.rows, [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) {
                for (int i = 0; i < half; ++i) {
                    const float theta = float(pos[t]) * p.freq_scale * inv_freq[i];
                    const float c = std::cos(theta), s = std::sin(theta);
                    for (int64_t h = 0; h < heads; ++h) {
                        float* v = x.data + t * x.cols + h * head_dim;
                        const int i0 = p.neox ? i : 2 * i, i1 = p.neox ? i + half : 2 * i + 1;
                        const float a = v[i0], d = v[i1];
                        v[i0] = a * c - d * s;
                        v[i1] = a * s + d * c;
                    }
                }
            }
        });
    }

    void add(const Act& a, const Act& b, Act& out) override {
        check_same_shape(a, b, "add");
        check_same_shape(a, out, "add");
        for (int64_t i = 0; i < a.size(); ++i) out.data[i] = a.data[i] + b.data[i];
    }

    void swiglu(const Act& gate, const Act& up, Act& out) override {
        check_same_shape(gate, up, "swiglu");
        check_same_shape(gate, out, "swiglu");
        for (int64_t i = 0; i < gate.size(); ++i) {
            const float g = gate.data[i];
            out.data[i] = g / (1.0f + std::exp(-g)) * up.data[i];
        }
    }

    void kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) override {
        if (k.cols != kv.width || v.cols != kv.width || k.rows != v.rows)
            throw std::invalid_argument("kv_write: shape mismatch");
        if (pos0 < 0 || pos0 + k.rows > kv.capacity) throw std::out_of_range("kv_write: past the cache");
        std::memcpy(kv.k + pos0 * kv.width, k.data, k.size() * sizeof(float));
        std::memcpy(kv.v + pos0 * kv.width, v.data, v.size() * sizeof(float));
    }

    void attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) override {
        const int d = p.head_dim;
        if (q.cols != int64_t(p.n_head) * d || out.cols != q.cols || out.rows != q.rows ||
            kv.width != int64_t(p.n_head_kv) * d || p.n_head % p.n_head_kv != 0)
            throw std::invalid_argument("attention: shape mismatch");
        if (pos0 + q.rows > kv.capacity) throw std::out_of_range("attention: past the cache");
        const int group = p.n_head / p.n_head_kv;
        pool_.parallel_for(q.rows * p.n_head, [&](int64_t b, int64_t e) {
            std::vector<float> scores;
            for (int64_t job = b; job < e; ++job) {
                const int64_t t = job / p.n_head;
                const int h = static_cast<int>(job % p.n_head);
                const int kvh = h / group;
                const int64_t n_kv = pos0 + t + 1;  // causal: positions 0..pos0+t
                const float* qv = q.data + t * q.cols + int64_t(h) * d;
                scores.resize(n_kv);
                float mx = -INFINITY;
                for (int64_t j = 0; j < n_kv; ++j) {
                    scores[j] = dot(qv, kv.k + j * kv.width + int64_t(kvh) * d, d) * p.scale;
                    mx = std::max(mx, scores[j]);
                }
                double sum = 0;
                for (int64_t j = 0; j < n_kv; ++j) {
                    scores[j] = std::exp(scores[j] - mx);
                    sum += scores[j];
                }
                const float inv = float(1.0 / sum);
                float* o = out.data + t * out.cols + int64_t(h) * d;
                std::fill(o, o + d, 0.0f);
                for (int64_t j = 0; j < n_kv; ++j) {
                    const float pj = scores[j] * inv;
                    const float* vv = kv.v + j * kv.width + int64_t(kvh) * d;
                    for (int i = 0; i < d; ++i) o[i] += pj * vv[i];
                }
            }
        });
    }

private:
    cpu::ThreadPool pool_;
    std::deque<std::vector<float>> buffers_;  // deque: growing it never moves earlier buffers
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

}  // namespace zinc::backend
