// A kernel that only reads memory: the measure, in zinc_backend_ops --perf on a GPU, of what an op moving a given
// number of bytes can reach (read_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace zinc::ops {

// Queues a kernel on s that reads `bytes` bytes at a (16-byte aligned, a multiple of 16). sink is a device word it may
// write.
cudaError_t read_bytes(const void* a, size_t bytes, unsigned* sink, cudaStream_t s);

// The time per call, in µs, of that kernel reading `bytes` bytes, call i those of copy i % copies of them, as
// time_case times an op: `reps` calls recorded in one CUDA graph, the median of five of its replays. Negative where
// CUDA fails.
double read_us(size_t bytes, int copies, int reps);

}  // namespace zinc::ops
