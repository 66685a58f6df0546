// CPU ops of mixture-of-experts layers (cpu_moe.cpp): routing and the expert FFN. Semantics are those of the Backend
// methods of the same names (backend/backend.h), which check the arguments (all but the expert ids, which moe_ffn
// checks) before CpuBackend calls these.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/gemm.h"

namespace zinc::backend::cpu {

void moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights);
// What moe_ffn computes in between, kept from call to call.
struct MoeScratch {
    std::vector<int64_t> start, at, fill;
    std::vector<int32_t> token;
    std::vector<float> h1, h2, y;
    std::vector<uint8_t> vec[3];     // vec-dot rows of the gate (or gate_up), up and down inputs
    cpu::PackedActs packed[3];     // the same for packed experts
};

// `packed` tells which expert tensors the backend repacked at load (cpu_matmul.h).
void moe_ffn(ThreadPool& pool, const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& w,
             const std::function<bool(const Weight&)>& packed, MoeScratch& s, Act& out);

}  // namespace zinc::backend::cpu
