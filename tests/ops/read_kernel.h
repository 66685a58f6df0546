// A kernel that only reads memory: the kernel bench's measure of what a kernel moving a given number of bytes can
// reach (read_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace zinc::cuda_bench {

// Queues a kernel on s that reads bytes_a bytes at a and bytes_b at b (16-byte aligned, multiples of 16; b may be
// null with bytes_b 0). sink is a device word it may write.
cudaError_t read_bytes(const void* a, size_t bytes_a, const void* b, size_t bytes_b, unsigned* sink, cudaStream_t s);

}  // namespace zinc::cuda_bench
