// The CUDA backend's products with weights: the embedding gather and the matmul (a dp4a or float matvec for one
// row; for more, tensor cores for quantized weights and the tiled f32 matmul for float ones). Kernels: get_rows.cu,
// matvec_q.cu, matmul_mma.cu, matmul.cu (matmul_kernels.h).
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matmul_kernels.h"

namespace zinc::backend {

void CudaBackend::do_get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) {
    const int32_t* d_ids = device_ids(ids);
    ZINC_CUDA_CHECK(cuda::get_rows(int(table.type), table.data, gguf::row_bytes(table.type, table.cols), table.cols,
                                   d_ids, out.rows, out.data, stream_),
                    "get_rows", table.name);
}

void CudaBackend::do_matmul(const Weight& w, const Act& x, Act& out) {
    const int type = int(w.type);
    if (!cuda::can_dequantize(type))
        throw std::invalid_argument("matmul " + w.name + ": type " + std::string(gguf::type_name(w.type)) +
                                    " is not implemented on the CUDA backend yet");
    const size_t rb = gguf::row_bytes(w.type, w.cols);
    if (x.rows == 1 && cuda::has_dp4a_matvec(type)) {
        // Decode: Q8_1 activations and integer dot products.
        const cuda::BlockQ8_1f* xq = quantized_row(x, "matmul", w.name);
        ZINC_CUDA_CHECK(cuda::matvec_q(type, w.data, rb, w.rows, w.cols, xq, x.rows, out.data, out.cols, stream_),
                        "matmul: matvec_q", w.name);
    } else if (x.rows == 1) {
        ZINC_CUDA_CHECK(
            cuda::matvec_f(type, w.data, rb, w.rows, w.cols, x.data, x.rows, out.data, out.cols, stream_),
            "matmul: matvec_f", w.name);
    } else if (cuda::has_mma_matmul(type) && x.cols % 32 == 0) {
        // Prefill of quantized weights: tensor cores, f16 operands.
        if (x.rows > 65535 * 64) throw std::invalid_argument("matmul " + w.name + ": too many rows");
        void* tmp = scratch("f16 activations", cuda::mma_matmul_scratch_bytes(x.rows, x.cols), "matmul");
        ZINC_CUDA_CHECK(cuda::matmul_mma(type, w.data, rb, w.rows, w.cols, x.data, x.rows, tmp, out.data, out.cols,
                                         stream_),
                        "matmul: matmul_mma", w.name);
    } else {
        // Float weights: f32 throughout, as exact as the CPU's.
        if (x.rows > 65535 * 64) throw std::invalid_argument("matmul " + w.name + ": too many rows");
        ZINC_CUDA_CHECK(
            cuda::matmul_tiled(type, w.data, rb, w.rows, w.cols, x.data, x.rows, out.data, out.cols, stream_),
            "matmul: matmul_tiled", w.name);
    }
}

}  // namespace zinc::backend
