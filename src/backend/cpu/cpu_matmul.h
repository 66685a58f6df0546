// CPU products with weights (cpu_matmul.cpp): the embedding gather and the matmul. Semantics are those of the Backend
// methods of the same names (backend/backend.h), which check the arguments before CpuBackend calls these.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/gemm.h"

namespace zinc::backend::cpu {

// A weight as the CPU backend holds it: `packed` when its rows were repacked into tiles at load (backend/cpu/repack.h).
struct CpuWeight {
    const Weight& w;
    bool packed = false;
};

// Whether a tensor of type t with ne[1] = rows_per_matrix rows of `cols` values is repacked at load on this
// processor: a type with packed kernels, rows a multiple of the tile, and a processor with AVX2.
bool repacks(gguf::TensorType t, int64_t rows_per_matrix, int64_t cols);

// The activation rows of the current products in the forms their kernels read; grown as needed and reused.
struct MatmulScratch {
    std::vector<uint8_t> act_q;  // vec-dot rows (backend/cpu/vec_dot.h), for the types without gemm kernels
    cpu::PackedActs acts[2];   // rows for the gemm kernels (backend/cpu/gemm.h): Q8_0 and Q8_K
};

void get_rows(CpuWeight table, std::span<const int32_t> ids, Act& out);
// Throws std::invalid_argument when the weight's type has no dot product.
void matmul(ThreadPool& pool, CpuWeight w, const Act& x, Act& out, MatmulScratch& s);
// The fused products of backend.h with the rows of x quantized once for all weights of the same activation type, all
// the products in one parallel loop, and the element-wise steps done on each piece of output as it is made (the same
// operations as the ops one by one, so the same values):
// out[i] = w[i] x (+ bias[i]) for every i (bias empty or one entry per weight, null for none).
void matmuls(ThreadPool& pool, std::span<const CpuWeight> w, const Act& x, std::span<Act* const> out,
             std::span<const Weight* const> bias, MatmulScratch& s);
// out = act(gate x) * (up x), up x left in up_tmp.
void ffn_gated(ThreadPool& pool, CpuWeight gate, CpuWeight up, const Act& x, GatedActivation act, Act& up_tmp,
               Act& out, MatmulScratch& s);
// tmp = w x (+ bias), out += tmp.
void matmul_add(ThreadPool& pool, CpuWeight w, const Act& x, Act& tmp, Act& out, const Weight* bias,
                MatmulScratch& s);

}  // namespace zinc::backend::cpu
