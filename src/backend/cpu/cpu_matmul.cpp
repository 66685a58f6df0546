// The CPU's products with weights: the embedding gather (dequantized rows) and the matmul. Matmuls compute as ggml's
// CPU backend does: activations are quantized to the weight type's vec-dot type and dotted with the weight rows by
// integer block dot products, so logits agree with llama.cpp's CPU backend up to float summation order.
//
// On processors with AVX2 the weights of the packed types are repacked into tiles at load and multiplied by the
// register-blocked kernels of quant/gemm.h, in prefill and decode alike, so that a batch and its tokens one at a time
// give the same values bit for bit. Other types, and processors without AVX2, go pair by pair through
// quant/vec_dot.h.
#include "backend/cpu/cpu_matmul.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "quant/cpu_features.h"
#include "quant/dequantize.h"
#include "quant/repack.h"
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

// As ggml's CPU backend (docs/formats.md §2.8, §3): each activation row is converted once per call to the weight
// type's vec-dot type (8-bit blocks for quantized weights, f16/bf16 for f16/bf16 weights; f32 rows are used as they
// are), then every output is an integer block dot product (quant::vec_dot). Output rows are handed out in chunks;
// inside a chunk, blocks of weight rows are dotted with blocks of activation rows so that a weight row stays in cache
// while it meets every activation row of the block.
void matmul_vec_dot(ThreadPool& pool, const Weight& w, const Act& x, Act& out, std::vector<uint8_t>& act_q) {
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

// The rows of x quantized for the gemm kernels of weight type t, in the scratch slot of t's activation type.
const quant::PackedActs& quantize_for(ThreadPool& pool, TensorType t, const Act& x, MatmulScratch& s) {
    quant::PackedActs& a = s.acts[quant::vec_dot_type(t) == TensorType::Q8_K ? 1 : 0];
    a.reset(t, x.rows, x.cols);
    if (x.rows >= 4)
        pool.parallel_for(x.rows, [&](int64_t b, int64_t e) { a.quantize(x.data, b, e); });
    else
        a.quantize(x.data, 0, x.rows);
    return a;
}

// One piece of work of a product: output rows [o0, o1) (whole tiles) of one packed weight for all activation rows.
struct Piece {
    CpuWeight w;
    const quant::PackedActs* a;
    Act* out;
    int64_t o0, o1;
};

void run_piece(const Piece& p) {
    const Weight& w = p.w.w;
    quant::gemm_packed(quant::cpu_isa(), w.type, w.data, w.cols, p.o0 / quant::kPackRows, p.o1 / quant::kPackRows,
                       *p.a, {nullptr, 0, p.a->rows()}, p.out->data, p.out->cols);
}

// Splits the products into pieces for the threads: about eight per thread over all of them, each small enough that
// its weight rows stay in the L2 cache while every activation row meets them, in whole tiles.
void add_pieces(std::vector<Piece>& pieces, CpuWeight w, const quant::PackedActs* a, Act* out, int64_t rows_total,
                int threads) {
    constexpr size_t kPieceBytes = size_t{1024} << 10;
    const size_t row_bytes = gguf::row_bytes(w.w.type, w.w.cols);
    const int64_t unit = quant::kPackRows;
    const int64_t by_bytes = std::max<int64_t>(1, static_cast<int64_t>(kPieceBytes / (row_bytes * unit)));
    const int64_t by_count = std::max<int64_t>(1, rows_total / (8 * threads * unit));
    const int64_t step = unit * std::min(by_bytes, by_count);
    for (int64_t o = 0; o < w.w.rows; o += step) pieces.push_back({w, a, out, o, std::min(w.w.rows, o + step)});
}

}  // namespace

bool repacks(TensorType t, int64_t rows_per_matrix, int64_t cols) {
    return quant::cpu_isa() >= quant::Isa::avx2 && quant::can_repack(t, rows_per_matrix, cols);
}

void get_rows(CpuWeight table, std::span<const int32_t> ids, Act& out) {
    const Weight& w = table.w;
    const size_t rb = gguf::row_bytes(w.type, w.cols);
    std::vector<uint8_t> row(table.packed ? rb : 0);
    for (size_t t = 0; t < ids.size(); ++t) {
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + ids[t] * rb;
        if (table.packed) {
            quant::unpack_row(w.type, w.data, w.cols, ids[t], row.data());
            src = row.data();
        }
        quant::dequantize_row(w.type, src, out.data + t * out.cols, w.cols);
    }
}

void matmul(ThreadPool& pool, CpuWeight w, const Act& x, Act& out, MatmulScratch& s) {
    Act* o = &out;
    matmuls(pool, std::span<const CpuWeight>(&w, 1), x, std::span<Act* const>(&o, 1), s);
}

void matmuls(ThreadPool& pool, std::span<const CpuWeight> w, const Act& x, std::span<Act* const> out,
             MatmulScratch& s) {
    std::vector<Piece> pieces;
    int64_t rows_total = 0;
    for (const CpuWeight& cw : w)
        if (cw.packed) rows_total += cw.w.rows;
    const quant::PackedActs* quantized[2] = {nullptr, nullptr};
    for (size_t i = 0; i < w.size(); ++i) {
        if (!w[i].packed) {
            matmul_vec_dot(pool, w[i].w, x, *out[i], s.act_q);
            continue;
        }
        const int slot = quant::vec_dot_type(w[i].w.type) == TensorType::Q8_K ? 1 : 0;
        if (!quantized[slot]) quantized[slot] = &quantize_for(pool, w[i].w.type, x, s);
        add_pieces(pieces, w[i], quantized[slot], out[i], rows_total, pool.size());
    }
    pool.parallel_chunks(static_cast<int64_t>(pieces.size()), 1, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) run_piece(pieces[static_cast<size_t>(p)]);
    });
}

}  // namespace zinc::backend::cpu
