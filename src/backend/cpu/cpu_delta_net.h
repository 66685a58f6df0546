// CPU ops of the gated delta-net layers (cpu_delta_net.cpp): the gates and gathers around the recurrence, the causal
// conv over a rolling state, and the gated delta rule token by token and in chunked form. Semantics are those of the
// Backend methods of the same names (backend/backend.h), which check the arguments before CpuBackend calls these.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

void sigmoid_mul(ThreadPool& pool, const Act& x, const Act& gate, Act& out);
void fill(Act& a, float value);
void slice_groups(ThreadPool& pool, const Act& src, int64_t group, int64_t offset, Act& out);
void delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g, Act& beta_out);
void conv1d_causal(ThreadPool& pool, const Act& x, Act& state, const Weight& w, bool silu, Act& out);
void delta_net(ThreadPool& pool, const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
               const DeltaNetParams& p, Act& out);
void delta_net_chunked(ThreadPool& pool, const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta,
                       Act& state, const DeltaNetParams& p, int chunk, Act& out);

}  // namespace zinc::backend::cpu
