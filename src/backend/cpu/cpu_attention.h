// CPU attention and RoPE (cpu_attention.cpp): the KV cache write, causal GQA attention with
// AttentionParams::window, sinks and softcap when set, and RoPE with RopeParams::freq_factors and YaRN when set.
// Semantics are those of the Backend methods of the same names (backend/backend.h), which check the arguments before
// CpuBackend calls these.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::backend::cpu {

// The cos and sin of RoPE's angles for the last positions and parameters seen (two sets: Gemma 4's sliding and full
// layers differ), so that the layers of a forward pass compute them once.
class RopeCache {
public:
    const std::vector<float>& angles(ThreadPool& pool, std::span<const int32_t> pos, const RopeParams& p);

private:
    struct Table {
        RopeParams p;
        const void* factors = nullptr;  // p.freq_factors->data when set
        std::vector<int32_t> pos;
        std::vector<float> cs;
        bool matches(std::span<const int32_t> positions, const RopeParams& q) const;
    };
    static constexpr size_t kTables = 2;
    Table tables_[kTables];
};

void rope(ThreadPool& pool, Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p,
          RopeCache& cache);
void kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0);
void kv_copy_rows(const KvLayer& src, int64_t src_row, KvLayer& dst, int64_t dst_row, int64_t rows);
void attention(ThreadPool& pool, const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out);
void attention(ThreadPool& pool, const Act& q, std::span<const AttentionRange> ranges, const AttentionParams& p,
               Act& out);

}  // namespace zinc::backend::cpu
