// The CUDA backend's products with weights: the embedding gather and the matmul (a dp4a or float matvec for one
// row, the tiled matmul for more). Kernels: get_rows.cu, matvec_q.cu, matmul.cu (matmul_kernels.h).
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
        const size_t need = static_cast<size_t>(x.rows * (x.cols / 32)) * sizeof(cuda::BlockQ8_1f);
        auto* xq = static_cast<cuda::BlockQ8_1f*>(scratch("q8_1 activations", need, "matmul"));
        ZINC_CUDA_CHECK(cuda::quantize_q8_1(x.data, x.rows, x.cols, xq, stream_), "matmul: quantize_q8_1", w.name);
        ZINC_CUDA_CHECK(cuda::matvec_q(type, w.data, rb, w.rows, w.cols, xq, x.rows, out.data, out.cols, stream_),
                        "matmul: matvec_q", w.name);
    } else if (x.rows == 1) {
        ZINC_CUDA_CHECK(
            cuda::matvec_f(type, w.data, rb, w.rows, w.cols, x.data, x.rows, out.data, out.cols, stream_),
            "matmul: matvec_f", w.name);
    } else {
        if (x.rows > 65535 * 64) throw std::invalid_argument("matmul " + w.name + ": too many rows");
        ZINC_CUDA_CHECK(
            cuda::matmul_tiled(type, w.data, rb, w.rows, w.cols, x.data, x.rows, out.data, out.cols, stream_),
            "matmul: matmul_tiled", w.name);
    }
}

}  // namespace zinc::backend
