// Cache rows as the CUDA kernels address and write them (kv_type.h gives the layout), shared by kv_write and the
// attention kernels (attention.cu) and the fused per-head steps before attention (rope_kv_write.cu).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_kernels.h"

namespace zinc::backend::cuda {

// The cache row of position pos: pos itself in a full-length cache, pos % capacity in a ring.
__device__ inline int64_t ring_row(int64_t pos, int64_t capacity) { return pos < capacity ? pos : pos % capacity; }

// The cache row of position pos of a paged cache (`pages`: the sequence's page table, in device memory, of pages of
// page_rows rows), or without pages ring_row's.
__device__ inline int64_t cache_row(int64_t pos, int64_t capacity, const int32_t* pages, int64_t page_rows) {
    if (pages) return int64_t(pages[pos / page_rows]) * page_rows + pos % page_rows;
    return ring_row(pos, capacity);
}
__device__ inline int64_t cache_row(const AttentionArgs& a, int64_t pos) {
    return cache_row(pos, a.capacity, a.pages, a.page_rows);
}

// The q8_0 scales follow all the rows' int8 values (kv_type.h).
__device__ inline const __half* q8_scales(const void* plane, int64_t width, int64_t capacity) {
    return reinterpret_cast<const __half*>(static_cast<const int8_t*>(plane) + capacity * width);
}

// Stores value `col` of cache row `row`, converted to the plane's type. For q8_0 the 32 lanes of the calling warp
// hold the 32 values of one block (col % 32 == lane), whose largest magnitude sets the block's scale.
__device__ inline void store_value(const CachePlane& c, int64_t width, int64_t capacity, int64_t row, int64_t col,
                                   float x) {
    const int64_t at = row * width + col;
    switch (c.type) {
    case KvType::f16: static_cast<__half*>(c.data)[at] = __float2half_rn(x); return;
    case KvType::q8_0: {
        // d = amax / 127 and q = round(x / d), as the CPU backend and ggml's reference quantize_row_q8_0.
        float amax = fabsf(x);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        static_cast<int8_t*>(c.data)[at] = int8_t(roundf(x * id));
        if (col % kKvBlock == 0)
            const_cast<__half*>(q8_scales(c.data, width, capacity))[at / kKvBlock] = __float2half_rn(d);
        return;
    }
    default: static_cast<float*>(c.data)[at] = x; return;
    }
}

}  // namespace zinc::backend::cuda
