// The CPU's products with weights: the embedding gather (dequantized rows) and the matmul. Matmuls compute as ggml's
// CPU backend does: activations are quantized to the weight type's vec-dot type and dotted with the weight rows by
// integer block dot products (quant/vec_dot.h), so logits agree with llama.cpp's CPU backend up to float summation
// order.
#include "backend/cpu/cpu_matmul.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "quant/dequantize.h"
#include "quant/vec_dot.h"

namespace zinc::backend::cpu {
namespace {

using gguf::TensorType;

// out[t][o] = dot(weight row o, activation row t) for all o < n_out, t < n_act.
void matmul_rows(ThreadPool& pool, const uint8_t* wdata, size_t wrb, int64_t n_out, const uint8_t* act, size_t arb,
                 int64_t n_act, int64_t cols, quant::VecDotFn dot_fn, quant::VecDotTile tile, Act& out) {
    constexpr int64_t kOutBlock = 16;  // weight rows reused across an activation block
    constexpr int64_t kActBlock = 64;  // activation rows reused across a weight block
    // Enough chunks for the threads to balance (cores here are shared), few enough to keep the hand-out cheap.
    const int64_t grain = std::clamp<int64_t>(n_out / (8 * pool.size()) / kOutBlock * kOutBlock, kOutBlock, 512);
    const int64_t n = cols;
    float* o_data = out.data;
    const int64_t o_cols = out.cols;
    pool.parallel_chunks(n_out, grain, [&](int64_t b, int64_t e) {
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

}  // namespace

void get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) {
    const size_t rb = gguf::row_bytes(table.type, table.cols);
    for (size_t t = 0; t < ids.size(); ++t)
        quant::dequantize_row(table.type, static_cast<const uint8_t*>(table.data) + ids[t] * rb,
                              out.data + t * out.cols, table.cols);
}

// As ggml's CPU backend (docs/formats.md §2.8, §3): each activation row is converted once per call to the weight type's
// vec-dot type (8-bit blocks for quantized weights, f16/bf16 for f16/bf16 weights; f32 rows are used as they are),
// then every output is an integer block dot product (quant::vec_dot). Output rows are handed out in chunks; inside a
// chunk, blocks of weight rows are dotted with blocks of activation rows so that a weight row stays in cache while it
// meets every activation row of the block.
void matmul(ThreadPool& pool, const Weight& w, const Act& x, Act& out, std::vector<uint8_t>& act_q) {
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
        if (act_q.size() < arb * x.rows) act_q.resize(arb * x.rows);
        uint8_t* q = act_q.data();
        const auto convert = [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) quant::quantize_activation(at, x.data + t * x.cols, q + t * arb, x.cols);
        };
        if (x.rows >= 8)
            pool.parallel_for(x.rows, convert);
        else
            convert(0, x.rows);
        act = q;
    }
    matmul_rows(pool, static_cast<const uint8_t*>(w.data), wrb, w.rows, act, arb, x.rows, w.cols, dot_fn,
                quant::vec_dot_tile(w.type), out);
}

}  // namespace zinc::backend::cpu
