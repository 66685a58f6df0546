// A tiny kernel that proves a GPU can run code from this binary: it catches a device whose
// architecture has no matching cubin or PTX, or a driver too old for the runtime.
#include <cuda_runtime.h>

namespace zinc::backend::cuda {

__global__ void probe_kernel(unsigned* out, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i * 2654435761u + 12345u;
}

// Runs the probe on the current device; returns the first CUDA error, or cudaSuccess and
// sets *ok to whether every value came back right.
cudaError_t run_probe(bool* ok) {
    constexpr unsigned n = 4096;
    *ok = false;
    unsigned* d = nullptr;
    cudaError_t e = cudaMalloc(&d, n * sizeof(unsigned));
    if (e != cudaSuccess) return e;
    probe_kernel<<<(n + 255) / 256, 256>>>(d, n);
    e = cudaGetLastError();
    static unsigned h[n];
    if (e == cudaSuccess) e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess) return e;
    *ok = true;
    for (unsigned i = 0; i < n; ++i)
        if (h[i] != i * 2654435761u + 12345u) *ok = false;
    return cudaSuccess;
}

}  // namespace zinc::backend::cuda
