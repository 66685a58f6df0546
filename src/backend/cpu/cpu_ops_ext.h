// CPU implementations of backend ops added after the first families, as free functions; CpuBackend
// (cpu_backend.cpp) forwards to them. Each section belongs to the ops it names in backend.h.
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

// --- Attention and RoPE (cpu_attention.cpp) ---

// Causal GQA attention, with AttentionParams::window, sinks and softcap when set (Backend::attention).
void attention(ThreadPool& pool, const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out);
// RoPE, with RopeParams::freq_factors and YaRN when set (Backend::rope).
void rope(ThreadPool& pool, Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p);

// --- Activations for gemma4 / gpt-oss (cpu_activations.cpp) ---

void geglu(ThreadPool& pool, const Act& gate, const Act& up, Act& out);
void add_bias(ThreadPool& pool, Act& x, const Weight& b);
void scale(ThreadPool& pool, const Act& x, float s, Act& out);
void softcap(ThreadPool& pool, Act& x, float cap);

}  // namespace zinc::backend::cpu
