// CPU selection of tokens from logits (cpu_sampling.cpp): the arg-max of each row and the top k of the last row.
// Semantics are those of the Backend methods of the same names (backend/backend.h), which check the arguments before
// CpuBackend calls these.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"

namespace zinc::backend::cpu {

void argmax_rows(const Act& x, std::span<int32_t> out);
void top_k_last_row(const Act& x, int k, std::span<int32_t> ids, std::span<float> values);

}  // namespace zinc::backend::cpu
