// Grid-stride loops over flat values, as the element-wise kernels run them: blocks of kGridStrideBlock threads, at
// most 65535 blocks (each thread then takes every grid_stride()-th value from first_index()).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace zinc::backend::cuda {

inline constexpr int kGridStrideBlock = 256;

// The blocks for n values: one value a thread up to the 65535-block cap.
inline unsigned grid_for(int64_t n) {
    const int64_t b = (n + kGridStrideBlock - 1) / kGridStrideBlock;
    return unsigned(b < 65535 ? b : 65535);
}

__device__ __forceinline__ int64_t first_index() { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }

}  // namespace zinc::backend::cuda
