// The CPU's products with weights: the embedding gather (dequantized rows) and the matmul. Matmuls compute as ggml's
// CPU backend does: activations are quantized to the weight type's vec-dot type and dotted with the weight rows by
// integer block dot products, so logits agree with llama.cpp's CPU backend up to float summation order.
//
// On processors with AVX2 the weights of the packed types are repacked into tiles at load and multiplied by the
// register-blocked kernels of backend/cpu/gemm.h, in prefill and decode alike, so that a batch and its tokens one at a time
// give the same values bit for bit. Other types, and processors without AVX2, go pair by pair through
// backend/cpu/vec_dot.h.
#include "backend/cpu/cpu_matmul.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include "backend/cpu/cpu_elementwise.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/cpu_features.h"
#include "quant/dequantize.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot.h"

namespace zinc::backend::cpu {
namespace {

using gguf::TensorType;

// out[t][o] = dot(weight row o, activation row t) for all o < n_out, t < n_act.
void matmul_rows(ThreadPool& pool, const uint8_t* wdata, size_t wrb, int64_t n_out, const uint8_t* act, size_t arb,
                 int64_t n_act, int64_t cols, cpu::VecDotFn dot_fn, cpu::VecDotTile tile, Act& out) {
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
// are), then every output is an integer block dot product (cpu::vec_dot). Output rows are handed out in chunks;
// inside a chunk, blocks of weight rows are dotted with blocks of activation rows so that a weight row stays in cache
// while it meets every activation row of the block.
void matmul_vec_dot(ThreadPool& pool, const Weight& w, const Act& x, Act& out, std::vector<uint8_t>& act_q) {
    if (!cpu::can_vec_dot(w.type))
        throw std::invalid_argument("matmul " + w.name + ": no dot product for type " +
                                    std::string(gguf::type_name(w.type)));
    const TensorType at = cpu::vec_dot_type(w.type);
    const cpu::VecDotFn dot_fn = cpu::vec_dot_fn(w.type);
    const size_t wrb = gguf::row_bytes(w.type, w.cols);
    const uint8_t* act = reinterpret_cast<const uint8_t*>(x.data);
    size_t arb = static_cast<size_t>(x.cols) * sizeof(float);
    if (at != TensorType::F32) {
        arb = gguf::row_bytes(at, x.cols);
        if (act_q.size() < arb * x.rows) act_q.resize(arb * x.rows);
        uint8_t* q = act_q.data();
        const auto convert = [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) cpu::quantize_activation(at, x.data + t * x.cols, q + t * arb, x.cols);
        };
        if (x.rows >= 8)
            pool.parallel_for(x.rows, convert);
        else
            convert(0, x.rows);
        act = q;
    }
    matmul_rows(pool, static_cast<const uint8_t*>(w.data), wrb, w.rows, act, arb, x.rows, w.cols, dot_fn,
                cpu::vec_dot_tile(w.type), out);
}

// The rows of x quantized for the gemm kernels of weight type t, in the scratch slot of t's activation type.
const cpu::PackedActs& quantize_for(ThreadPool& pool, TensorType t, const Act& x, MatmulScratch& s) {
    cpu::PackedActs& a = s.acts[cpu::vec_dot_type(t) == TensorType::Q8_K ? 1 : 0];
    a.reset(t, x.rows, x.cols);
    if (x.rows >= 4)
        pool.parallel_for(x.rows, [&](int64_t b, int64_t e) { a.quantize(x.data, b, e); });
    else
        a.quantize(x.data, 0, x.rows);
    return a;
}

// Products that share their output columns: each packed weight's rows [o0, o1) for every activation row, then
// `finish` on those columns of every row (a bias, the residual add, the gated activation), while they are in cache.
struct Job {
    CpuWeight w[2];
    Act* out[2];
    int n = 1;
    std::function<void(int64_t, int64_t)> finish;
};

// Runs the jobs on the threads, in pieces of whole tiles: about eight per thread over all of them, each small enough
// that its weight rows stay in the L2 cache while every activation row meets them.
void run_jobs(ThreadPool& pool, const Act& x, std::span<Job> jobs, MatmulScratch& s) {
    constexpr size_t kPieceBytes = size_t{256} << 10;
    const cpu::PackedActs* quantized[2] = {nullptr, nullptr};
    int64_t rows_total = 0;
    for (Job& j : jobs)
        for (int k = 0; k < j.n; ++k) {
            const int slot = cpu::vec_dot_type(j.w[k].w.type) == TensorType::Q8_K ? 1 : 0;
            if (!quantized[slot]) quantized[slot] = &quantize_for(pool, j.w[k].w.type, x, s);
            rows_total += j.w[k].w.rows;
        }
    struct Piece {
        const Job* job;
        int64_t o0, o1;
    };
    std::vector<Piece> pieces;
    constexpr int64_t kUnit = cpu::kPackRows;
    for (const Job& j : jobs) {
        size_t row_bytes = 0;
        for (int k = 0; k < j.n; ++k) row_bytes += gguf::row_bytes(j.w[k].w.type, j.w[k].w.cols);
        const int64_t by_bytes = std::max<int64_t>(1, static_cast<int64_t>(kPieceBytes / (row_bytes * kUnit)));
        const int64_t by_count = std::max<int64_t>(1, rows_total / (8 * pool.size() * kUnit));
        const int64_t step = kUnit * std::min(by_bytes, by_count), rows = j.w[0].w.rows;
        for (int64_t o = 0; o < rows; o += step) pieces.push_back({&j, o, std::min(rows, o + step)});
    }
    pool.parallel_chunks(static_cast<int64_t>(pieces.size()), 1, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
            const Piece& pc = pieces[static_cast<size_t>(p)];
            for (int k = 0; k < pc.job->n; ++k) {
                const Weight& w = pc.job->w[k].w;
                const cpu::PackedActs& a = *quantized[cpu::vec_dot_type(w.type) == TensorType::Q8_K ? 1 : 0];
                Act& out = *pc.job->out[k];
                cpu::gemm_packed(cpu::cpu_isa(), w.type, w.data, w.cols, pc.o0 / kUnit, pc.o1 / kUnit, a,
                                   {nullptr, 0, a.rows()}, out.data, out.cols);
            }
            if (pc.job->finish) pc.job->finish(pc.o0, pc.o1);
        }
    });
}

// x[t][i] += b[i] for the columns [o0, o1) of every row, as add_bias.
void add_bias_cols(Act& x, const Weight& b, int64_t o0, int64_t o1) {
    const float* bd = static_cast<const float*>(b.data);
    for (int64_t t = 0; t < x.rows; ++t)
        for (int64_t i = o0; i < o1; ++i) x.data[t * x.cols + i] += bd[i];
}

}  // namespace

bool repacks(TensorType t, int64_t rows_per_matrix, int64_t cols) {
    return cpu::cpu_isa() >= cpu::Isa::avx2 && cpu::can_repack(t, rows_per_matrix, cols);
}

void get_rows(CpuWeight table, std::span<const int32_t> ids, Act& out) {
    const Weight& w = table.w;
    const size_t rb = gguf::row_bytes(w.type, w.cols);
    std::vector<uint8_t> row(table.packed ? rb : 0);
    for (size_t t = 0; t < ids.size(); ++t) {
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + ids[t] * rb;
        if (table.packed) {
            cpu::unpack_row(w.type, w.data, w.cols, ids[t], row.data());
            src = row.data();
        }
        quant::dequantize_row(w.type, src, out.data + t * out.cols, w.cols);
    }
}

void matmul(ThreadPool& pool, CpuWeight w, const Act& x, Act& out, MatmulScratch& s) {
    Act* o = &out;
    matmuls(pool, std::span<const CpuWeight>(&w, 1), x, std::span<Act* const>(&o, 1), {}, s);
}

void matmuls(ThreadPool& pool, std::span<const CpuWeight> w, const Act& x, std::span<Act* const> out,
             std::span<const Weight* const> bias, MatmulScratch& s) {
    std::vector<Job> jobs;
    jobs.reserve(w.size());  // run_jobs keeps pointers to them
    for (size_t i = 0; i < w.size(); ++i) {
        const Weight* b = i < bias.size() ? bias[i] : nullptr;
        if (!w[i].packed) {
            matmul_vec_dot(pool, w[i].w, x, *out[i], s.act_q);
            if (b) add_bias(pool, *out[i], *b);
            continue;
        }
        Job j{{w[i], w[i]}, {out[i], out[i]}, 1, {}};
        if (b) j.finish = [o = out[i], b](int64_t o0, int64_t o1) { add_bias_cols(*o, *b, o0, o1); };
        jobs.push_back(std::move(j));
    }
    if (!jobs.empty()) run_jobs(pool, x, jobs, s);
}

void ffn_gated(ThreadPool& pool, CpuWeight gate, CpuWeight up, const Act& x, GatedActivation act, Act& up_tmp,
               Act& out, MatmulScratch& s) {
    if (!gate.packed || !up.packed) {
        const CpuWeight w[2] = {gate, up};
        Act* o[2] = {&out, &up_tmp};
        matmuls(pool, w, x, o, {}, s);
        if (act == GatedActivation::swiglu)
            swiglu(pool, out, up_tmp, out);
        else
            geglu(pool, out, up_tmp, out);
        return;
    }
    Job j{{gate, up}, {&out, &up_tmp}, 2, [&](int64_t o0, int64_t o1) {
              for (int64_t t = 0; t < out.rows; ++t) {
                  float* g = out.data + t * out.cols;
                  const float* u = up_tmp.data + t * up_tmp.cols;
                  if (act == GatedActivation::swiglu)
                      simd::kernels().silu_mul(g + o0, u + o0, g + o0, o1 - o0);
                  else
                      for (int64_t i = o0; i < o1; ++i) g[i] = gelu_mul(g[i], u[i]);
              }
          }};
    run_jobs(pool, x, std::span<Job>(&j, 1), s);
}

void matmul_add(ThreadPool& pool, CpuWeight w, const Act& x, Act& tmp, Act& out, const Weight* bias,
                MatmulScratch& s) {
    if (!w.packed) {
        matmul_vec_dot(pool, w.w, x, tmp, s.act_q);
        if (bias) add_bias(pool, tmp, *bias);
        add(pool, out, tmp, out);
        return;
    }
    Job j{{w, w}, {&tmp, &tmp}, 1, [&](int64_t o0, int64_t o1) {
              if (bias) add_bias_cols(tmp, *bias, o0, o1);
              for (int64_t t = 0; t < out.rows; ++t)
                  for (int64_t i = o0; i < o1; ++i) out.data[t * out.cols + i] += tmp.data[t * tmp.cols + i];
          }};
    run_jobs(pool, x, std::span<Job>(&j, 1), s);
}

}  // namespace zinc::backend::cpu
