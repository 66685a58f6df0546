// The CPU backend: the numerical reference. Plain loops with f32 accumulation, split across
// threads by output rows. Matmuls compute as ggml's CPU backend does: activations are quantized to
// the weight type's vec-dot type and dotted with the weight rows by integer block dot products
// (quant/vec_dot.h), so logits agree with llama.cpp's CPU backend up to float summation order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops_ext.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/thread_pool.h"
#include "quant/dequantize.h"
#include "quant/vec_dot.h"

namespace zinc::backend {
namespace {

using gguf::TensorType;

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int n_threads) : pool_(n_threads) {}

    std::string name() const override { return "cpu"; }

protected:
    const void* do_load_weight(const gguf::TensorInfo& t) override {
        if (!quant::can_dequantize(t.type))
            throw std::runtime_error("tensor " + t.name + ": type " + std::string(gguf::type_name(t.type)) +
                                     " is not supported by the CPU backend");
        return t.data;
    }

    Act do_alloc(int64_t rows, int64_t cols) override {
        auto& buf = buffers_.emplace_back(static_cast<size_t>(rows * cols));
        return {buf.data(), rows, cols};
    }

    KvLayer do_alloc_kv(int64_t width, int64_t capacity) override {
        KvLayer kv;
        kv.k = buffers_.emplace_back(static_cast<size_t>(width * capacity)).data();
        kv.v = buffers_.emplace_back(static_cast<size_t>(width * capacity)).data();
        kv.width = width;
        kv.capacity = capacity;
        return kv;
    }

    void do_upload(Act& dst, std::span<const float> src) override {
        std::memcpy(dst.data, src.data(), src.size_bytes());
    }

    void do_download(const Act& src, std::span<float> dst) override {
        std::memcpy(dst.data(), src.data, dst.size_bytes());
    }

    void do_get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) override {
        const size_t rb = gguf::row_bytes(table.type, table.cols);
        for (size_t t = 0; t < ids.size(); ++t)
            quant::dequantize_row(table.type, static_cast<const uint8_t*>(table.data) + ids[t] * rb,
                                  out.data + t * out.cols, table.cols);
    }

    void do_rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) override {
        const float* wd = w ? static_cast<const float*>(w->data) : nullptr;
        const int64_t n_groups = x.size() / group;
        pool_.parallel_for(n_groups, [&](int64_t b, int64_t e) {
            for (int64_t g = b; g < e; ++g) {
                const float* xi = x.data + g * group;
                float* yo = out.data + g * group;
                double sum = 0;  // as ggml: squares in float, summed in double
                for (int64_t i = 0; i < group; ++i) sum += double(xi[i] * xi[i]);
                const float scale = 1.0f / std::sqrt(float(sum / group) + eps);
                for (int64_t i = 0; i < group; ++i) yo[i] = xi[i] * scale * (wd ? wd[i] : 1.0f);
            }
        });
    }

    // As ggml's CPU backend (FORMATS.md §2.8, §3): each activation row is converted once per call to the weight
    // type's vec-dot type (8-bit blocks for quantized weights, f16/bf16 for f16/bf16 weights; f32 rows are used as
    // they are), then every output is an integer block dot product (quant::vec_dot). Output rows are handed out in
    // chunks; inside a chunk, blocks of weight rows are dotted with blocks of activation rows so that a weight row
    // stays in cache while it meets every activation row of the block.
    void do_matmul(const Weight& w, const Act& x, Act& out) override {
        if (!quant::can_vec_dot(w.type))
            throw std::invalid_argument("matmul " + w.name + ": no dot product for type " +
                                        std::string(gguf::type_name(w.type)));
        const TensorType at = quant::vec_dot_type(w.type);
        const quant::VecDotFn dot_fn = quant::vec_dot_fn(w.type);
        const size_t wrb = gguf::row_bytes(w.type, w.cols);
        const uint8_t* act = reinterpret_cast<const uint8_t*>(x.data);
        size_t arb = static_cast<size_t>(x.cols) * sizeof(float);
        if (at != TensorType::F32) {
            arb = gguf::row_bytes(at, x.cols);
            if (act_q_.size() < arb * x.rows) act_q_.resize(arb * x.rows);
            uint8_t* q = act_q_.data();
            const auto convert = [&](int64_t b, int64_t e) {
                for (int64_t t = b; t < e; ++t) quant::quantize_activation(at, x.data + t * x.cols, q + t * arb, x.cols);
            };
            if (x.rows >= 8)
                pool_.parallel_for(x.rows, convert);
            else
                convert(0, x.rows);
            act = q;
        }
        matmul_rows(static_cast<const uint8_t*>(w.data), wrb, w.rows, act, arb, x.rows, w.cols, dot_fn,
                    quant::vec_dot_tile(w.type), out);
    }

    void do_rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) override {
        cpu::rope(pool_, x, head_dim, pos, p);
    }

    void do_add(const Act& a, const Act& b, Act& out) override {
        for (int64_t i = 0; i < a.size(); ++i) out.data[i] = a.data[i] + b.data[i];
    }

    void do_swiglu(const Act& gate, const Act& up, Act& out) override {
        for (int64_t i = 0; i < gate.size(); ++i) {
            const float g = gate.data[i];
            out.data[i] = g / (1.0f + std::exp(-g)) * up.data[i];
        }
    }

    void do_kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) override {
        std::memcpy(kv.k + pos0 * kv.width, k.data, k.size() * sizeof(float));
        std::memcpy(kv.v + pos0 * kv.width, v.data, v.size() * sizeof(float));
    }

    void do_attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) override {
        cpu::attention(pool_, q, kv, pos0, p, out);
    }

    // Activations for gemma4 / gpt-oss: cpu_activations.cpp
    void do_geglu(const Act& gate, const Act& up, Act& out) override { cpu::geglu(pool_, gate, up, out); }
    void do_add_bias(Act& x, const Weight& b) override { cpu::add_bias(pool_, x, b); }
    void do_scale(const Act& x, float s, Act& out) override { cpu::scale(pool_, x, s, out); }
    void do_softcap(Act& x, float cap) override { cpu::softcap(pool_, x, cap); }

    void do_top_k_last_row(const Act& x, int k, std::span<int32_t> ids, std::span<float> values) override {
        const float* r = x.data + (x.rows - 1) * x.cols;
        std::vector<int32_t> idx(static_cast<size_t>(x.cols));
        for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                          [&](int32_t a, int32_t b) { return r[a] > r[b] || (r[a] == r[b] && a < b); });
        for (int i = 0; i < k; ++i) {
            ids[i] = idx[i];
            values[i] = r[idx[i]];
        }
    }

    void do_argmax_rows(const Act& x, std::span<int32_t> out) override {
        for (int64_t t = 0; t < x.rows; ++t) {
            const float* r = x.data + t * x.cols;
            int64_t best = 0;
            for (int64_t i = 1; i < x.cols; ++i)
                if (r[i] > r[best]) best = i;
            out[t] = static_cast<int32_t>(best);
        }
    }

    // Recurrent (gated delta-net) ops: cpu_delta_net.cpp
    void do_sigmoid_mul(const Act& x, const Act& gate, Act& out) override { cpu::sigmoid_mul(pool_, x, gate, out); }
    void do_fill(Act& a, float value) override { cpu::fill(a, value); }
    void do_slice_groups(const Act& src, int64_t group, int64_t offset, Act& out) override {
        cpu::slice_groups(pool_, src, group, offset, out);
    }
    void do_l2_norm(const Act& x, float eps, int64_t group, Act& out) override { cpu::l2_norm(pool_, x, eps, group, out); }
    void do_gated_rms_norm(const Act& x, const Weight& w, const Act& z, float eps, int64_t group, Act& out) override {
        cpu::gated_rms_norm(pool_, x, w, z, eps, group, out);
    }
    void do_delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g,
                         Act& beta) override {
        cpu::delta_net_gates(a, b, dt_bias, ssm_a, g, beta);
    }
    void do_conv1d_causal(const Act& x, Act& state, const Weight& w, bool silu, Act& out) override {
        cpu::conv1d_causal(pool_, x, state, w, silu, out);
    }
    void do_delta_net(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                   const DeltaNetParams& p, Act& out) override {
        cpu::delta_net(pool_, q, k, v, g, beta, state, p, out);
    }
    void do_delta_net_chunked(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                           const DeltaNetParams& p, int chunk, Act& out) override {
        cpu::delta_net_chunked(pool_, q, k, v, g, beta, state, p, chunk, out);
    }

    // Mixture-of-experts ops: cpu_moe.cpp
    IdAct do_alloc_ids(int64_t rows, int64_t cols) override {
        auto& buf = id_buffers_.emplace_back(static_cast<size_t>(rows * cols));
        return {buf.data(), rows, cols};
    }
    void do_moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights) override {
        cpu::moe_route(logits, k, renormalize, ids, weights);
    }
    void do_moe_ffn(const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& w, Act& out) override {
        cpu::moe_ffn(pool_, x, ids, weights, w, out);
    }

private:
    // out[t][o] = dot(weight row o, activation row t) for all o < n_out, t < n_act.
    void matmul_rows(const uint8_t* wdata, size_t wrb, int64_t n_out, const uint8_t* act, size_t arb, int64_t n_act,
                     int64_t cols, quant::VecDotFn dot_fn, quant::VecDotTile tile, Act& out) {
        constexpr int64_t kOutBlock = 16;  // weight rows reused across an activation block
        constexpr int64_t kActBlock = 64;  // activation rows reused across a weight block
        // Enough chunks for the threads to balance (cores here are shared), few enough to keep the hand-out cheap.
        const int64_t grain = std::clamp<int64_t>(n_out / (8 * pool_.size()) / kOutBlock * kOutBlock, kOutBlock, 512);
        const int64_t n = cols;
        float* o_data = out.data;
        const int64_t o_cols = out.cols;
        pool_.parallel_chunks(n_out, grain, [&](int64_t b, int64_t e) {
            if (n_act == 1) {
                for (int64_t o = b; o < e; ++o) o_data[o] = dot_fn(wdata + o * wrb, act, n);
                return;
            }
            for (int64_t o0 = b; o0 < e; o0 += kOutBlock) {
                const int64_t o1 = std::min(e, o0 + kOutBlock);
                for (int64_t t0 = 0; t0 < n_act; t0 += kActBlock) {
                    const int64_t t1 = std::min(n_act, t0 + kActBlock);
                    int64_t o = o0;
                    if (tile.fn) {
                        // Whole tiles first; the rows and columns they leave over go pair by pair below.
                        const int64_t tw = tile.rows_w, ta = tile.rows_a;
                        const int64_t t_end = t0 + (t1 - t0) / ta * ta;
                        for (; o + tw <= o1 && t_end > t0; o += tw) {
                            const uint8_t* wr = wdata + o * wrb;
                            for (int64_t t = t0; t < t_end; t += ta)
                                tile.fn(wr, wrb, act + t * arb, arb, n, o_data + t * o_cols + o, o_cols);
                            for (int64_t i = o; i < o + tw; ++i)
                                for (int64_t t = t_end; t < t1; ++t)
                                    o_data[t * o_cols + i] = dot_fn(wdata + i * wrb, act + t * arb, n);
                        }
                    }
                    for (; o < o1; ++o) {
                        const uint8_t* wr = wdata + o * wrb;
                        for (int64_t t = t0; t < t1; ++t) o_data[t * o_cols + o] = dot_fn(wr, act + t * arb, n);
                    }
                }
            }
        });
    }

    cpu::ThreadPool pool_;
    std::vector<uint8_t> act_q_;  // the activation rows of the current matmul, in the vec-dot type
    std::deque<std::vector<float>> buffers_;  // deque: growing it never moves earlier buffers
    std::deque<std::vector<int32_t>> id_buffers_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

}  // namespace zinc::backend
