// CPU normalizations over groups of values: RMSNorm, L2 norm and the delta-net layers' gated RMSNorm
// (cpu_norm.cpp). Semantics are those of the Backend methods of the same names (backend/backend.h), which check the
// arguments before CpuBackend calls these.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

void rms_norm(ThreadPool& pool, const Act& x, const Weight* w, float eps, int64_t group, Act& out);
void l2_norm(ThreadPool& pool, const Act& x, float eps, int64_t group, Act& out);
void gated_rms_norm(ThreadPool& pool, const Act& x, const Weight& w, const Act& z, float eps, int64_t group,
                    Act& out);

}  // namespace zinc::backend::cpu
