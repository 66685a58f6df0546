// CPU ops of mixture-of-experts layers (cpu_moe.cpp): routing and the expert FFN. Semantics are those of the Backend
// methods of the same names (backend/backend.h), which check the arguments (all but the expert ids, which moe_ffn
// checks) before CpuBackend calls these.
#pragma once

#include <functional>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

void moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights);
// `packed` tells which expert tensors the backend repacked at load (cpu_matmul.h).
void moe_ffn(ThreadPool& pool, const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& w,
             const std::function<bool(const Weight&)>& packed, Act& out);

}  // namespace zinc::backend::cpu
