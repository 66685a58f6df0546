// cuBLAS, opened at run time: the binary links only the CUDA runtime (statically) and needs only the driver, and a
// machine with the toolkit's libcublas gets its GEMMs for large prefill batches. Without the library the prefill
// matmul stays on zinc's own tensor-core kernel (matmul_mma.cu). Plain C++17 with no backend.h.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace zinc::backend::cuda {

// One cuBLAS handle on the device current when it is made, its work enqueued on the stream of each call.
class Cublas {
public:
    // Opens the library (once per process) and makes a handle; false, with the reason in why(), when either fails.
    // Only the first call tries.
    bool open();
    ~Cublas();
    // Why open or the last GEMM failed.
    const std::string& why() const { return why_; }

    // Enqueues out[t * out_stride + o] = sum_k w16[o * cols + k] * x16[t * cols + k] for o < n_out, t < n_act:
    // f16 operands (row-major), f32 accumulation and output. False, with the reason in why(), when cuBLAS refuses.
    bool gemm_f16(const void* w16, int64_t n_out, int64_t cols, const void* x16, int64_t n_act, float* out,
                  int64_t out_stride, cudaStream_t s);
    // The same with f32 operands and f32 arithmetic throughout (no TF32), for F32 weights.
    bool gemm_f32(const float* w, int64_t n_out, int64_t cols, const float* x, int64_t n_act, float* out,
                  int64_t out_stride, cudaStream_t s);

private:
    bool gemm(const void* w, const void* x, int type, int64_t n_out, int64_t cols, int64_t n_act, float* out,
              int64_t out_stride, cudaStream_t s);

    static constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // what NVIDIA advises for Hopper
    void* handle_ = nullptr;
    void* workspace_ = nullptr;
    bool tried_ = false;
    std::string why_;
};

}  // namespace zinc::backend::cuda
