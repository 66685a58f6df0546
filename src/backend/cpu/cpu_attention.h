// CPU attention and RoPE (cpu_attention.cpp): the KV cache write, causal GQA attention with
// AttentionParams::window, sinks and softcap when set, and RoPE with RopeParams::freq_factors and YaRN when set.
// Semantics are those of the Backend methods of the same names (backend/backend.h), which check the arguments before
// CpuBackend calls these.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

void rope(ThreadPool& pool, Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p);
void kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0);
void attention(ThreadPool& pool, const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out);

}  // namespace zinc::backend::cpu
