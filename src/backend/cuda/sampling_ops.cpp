// The CUDA backend's selection of tokens from logits: the arg-max of each row and the top k of the last row. Each
// copies only its result back and waits for it, the one wait of a decoding step. Kernels: sampling.cu
// (sampling_kernels.h).
#include <algorithm>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/sampling_kernels.h"

namespace zinc::backend {

void CudaBackend::do_argmax_rows(const Act& x, std::span<int32_t> out) {
    auto* d_out = static_cast<int32_t*>(scratch("argmax ids", std::max<size_t>(out.size_bytes(), 4), "argmax_rows"));
    ZINC_CUDA_CHECK(cuda::argmax_rows(x.data, x.rows, x.cols, d_out, stream_), "argmax_rows", "");
    ZINC_CUDA_CHECK(cudaMemcpyAsync(out.data(), d_out, out.size_bytes(), cudaMemcpyDeviceToHost, stream_),
                    "argmax_rows", "");
    // The one wait of a greedy decoding step; it also reports a failure of any kernel queued before it.
    ZINC_CUDA_CHECK(cuda_stream_synchronize(), "argmax_rows (or a kernel queued before it)", "");
}

void CudaBackend::do_top_k_last_row(const Act& x, int k, std::span<int32_t> ids, std::span<float> values) {
    const float* row = x.data + (x.rows - 1) * x.cols;
    void* work = scratch("top-k candidates", cuda::topk_scratch_bytes(x.cols, k), "top_k_last_row");
    auto* out = static_cast<uint8_t*>(scratch("top-k result", size_t(k) * 8, "top_k_last_row"));
    auto* d_ids = reinterpret_cast<int32_t*>(out);
    auto* d_values = reinterpret_cast<float*>(out + size_t(k) * 4);
    ZINC_CUDA_CHECK(cuda::top_k(row, x.cols, k, work, d_ids, d_values, stream_), "top_k_last_row", "");
    ZINC_CUDA_CHECK(cudaMemcpyAsync(ids.data(), d_ids, ids.size_bytes(), cudaMemcpyDeviceToHost, stream_),
                    "top_k_last_row", "");
    ZINC_CUDA_CHECK(cudaMemcpyAsync(values.data(), d_values, values.size_bytes(), cudaMemcpyDeviceToHost, stream_),
                    "top_k_last_row", "");
    // The one wait of a sampled decoding step.
    ZINC_CUDA_CHECK(cuda_stream_synchronize(), "top_k_last_row (or a kernel queued before it)", "");
}

}  // namespace zinc::backend
