// CPU implementations of backend ops that live outside cpu_backend.cpp; CpuBackend forwards to them.
// Semantics and shapes are those of the Backend methods of the same names (backend/backend.h).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

// Recurrent (gated delta-net) ops: cpu_delta_net.cpp
void sigmoid_mul(ThreadPool& pool, const Act& x, const Act& gate, Act& out);
void fill(Act& a, float value);
void slice_groups(ThreadPool& pool, const Act& src, int64_t group, int64_t offset, Act& out);
void l2_norm(ThreadPool& pool, const Act& x, float eps, int64_t group, Act& out);
void gated_rms_norm(ThreadPool& pool, const Act& x, const Weight& w, const Act& z, float eps, int64_t group,
                    Act& out);
void delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g, Act& beta_out);
void conv1d_causal(ThreadPool& pool, const Act& x, Act& state, const Weight& w, bool silu, Act& out);
void delta_net(ThreadPool& pool, const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
               const DeltaNetParams& p, Act& out);
void delta_net_chunked(ThreadPool& pool, const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta,
                       Act& state, const DeltaNetParams& p, int chunk, Act& out);

// Mixture-of-experts ops: cpu_moe.cpp
void moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights);
void moe_ffn(ThreadPool& pool, const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& w, Act& out);

}  // namespace zinc::backend::cpu
