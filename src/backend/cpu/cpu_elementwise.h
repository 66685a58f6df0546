// CPU element-wise ops: the residual add, SwiGLU and GeGLU, row-broadcast bias, scaling and soft-capping
// (cpu_elementwise.cpp). Semantics are those of the Backend methods of the same names (backend/backend.h), which
// check the arguments before CpuBackend calls these.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

void add(const Act& a, const Act& b, Act& out);
void swiglu(const Act& gate, const Act& up, Act& out);
void geglu(ThreadPool& pool, const Act& gate, const Act& up, Act& out);
void add_bias(ThreadPool& pool, Act& x, const Weight& b);
void scale(ThreadPool& pool, const Act& x, float s, Act& out);
void softcap(ThreadPool& pool, Act& x, float cap);

}  // namespace zinc::backend::cpu
