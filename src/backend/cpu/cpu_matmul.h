// CPU products with weights (cpu_matmul.cpp): the embedding gather and the matmul. Semantics are those of the Backend
// methods of the same names (backend/backend.h), which check the arguments before CpuBackend calls these.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

void get_rows(const Weight& table, std::span<const int32_t> ids, Act& out);
// act_q holds the activation rows converted to the weight type's vec-dot type; it is grown as needed and reused
// from call to call. Throws std::invalid_argument when the weight's type has no dot product.
void matmul(ThreadPool& pool, const Weight& w, const Act& x, Act& out, std::vector<uint8_t>& act_q);

}  // namespace zinc::backend::cpu
