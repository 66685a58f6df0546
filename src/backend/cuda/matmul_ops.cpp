// The CUDA backend's products with weights: the embedding gather and the matmul (a dp4a or float matvec for one
// row; for the rows of a decode step, a dp4a matvec that reads each weight row once for a few and int8 tensor cores
// for more; for prefill, tensor cores for quantized weights, through cuBLAS or zinc's kernel, and the tiled f32
// matmul for float ones). Kernels: get_rows.cu, matvec_q.cu, matvec_acts.cu, matmul_step_mma.cu, matmul_gemm.cu,
// matmul_mma.cu, matmul.cu (matmul_kernels.h).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matmul_kernels.h"

namespace zinc::backend {

void CudaBackend::do_get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) {
    // Inside a step, ids other than the step's (the rows whose logits are wanted) are among its step values.
    const bool step_ids = ids.size() == last_ids_.size() && std::equal(ids.begin(), ids.end(), last_ids_.begin());
    const int32_t* d_ids = step_ints_calls_ >= 0 && !step_ids ? device_step_ints(ids, "get_rows") : device_ids(ids);
    ZINC_CUDA_CHECK(cuda::get_rows(int(table.type), table.data, gguf::row_bytes(table.type, table.cols), table.cols,
                                   d_ids, out.rows, out.data, stream_),
                    "get_rows", table.name);
}

cuda::Cublas* CudaBackend::gemm() {
    if (!cublas_on_) return nullptr;
    if (!cublas_) {
        not_while_recording("opening cuBLAS");
        cublas_ = std::make_unique<cuda::Cublas>();
        if (!cublas_->open())
            std::fprintf(stderr, "zinc: cuBLAS is not available (%s); prefill uses zinc's own tensor-core kernel\n",
                         cublas_->why().c_str());
    }
    return cublas_->open() ? cublas_.get() : nullptr;
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
    } else if (cuda::Cublas* blas = x.rows > 1 && type == int(gguf::TensorType::F32) ? gemm() : nullptr) {
        // F32 weights (the MoE routers, the shared experts' gates): cuBLAS in f32, as exact as the CPU's.
        if (!blas->gemm_f32(static_cast<const float*>(w.data), w.rows, w.cols, x.data, x.rows, out.data, out.cols,
                            stream_))
            throw std::runtime_error("matmul " + w.name + ": " + blas->why());
    } else if (x.rows == 1 || (!cuda::has_dp4a_matvec(type) && w.rows <= cuda::kFloatMatvecMaxOut && x.rows <= 65535)) {
        // Float weights: one row, or a weight of few rows (kFloatMatvecMaxOut), f32 as the CPU's.
        ZINC_CUDA_CHECK(
            cuda::matvec_f(type, w.data, rb, w.rows, w.cols, x.data, x.rows, out.data, out.cols, stream_),
            "matmul: matvec_f", w.name);
    } else if (cuda::has_dp4a_matvec(type) && x.rows <= cuda::kStepMaxRows && x.cols % 32 == 0) {
        // The rows of a decode step of several sequences, Q8_1 as one row's: each weight row read once for all of
        // them, by the matvec of several rows or, beyond matvec_max_rows_, on tensor cores.
        const size_t n_blocks = size_t(x.rows * (x.cols / 32));
        auto* xq = static_cast<cuda::BlockQ8_1f*>(scratch("q8_1 rows", n_blocks * sizeof(cuda::BlockQ8_1f), "matmul"));
        if (x.rows > matvec_max_rows_ && cuda::has_step_mma(type, w.data, rb, w.cols)) {
            auto* xs = static_cast<float2*>(scratch("q8_1 scales", n_blocks * sizeof(float2), "matmul"));
            ZINC_CUDA_CHECK(cuda::quantize_q8_1(x.data, x.rows, x.cols, xq, stream_, xs), "matmul: quantize_q8_1",
                            w.name);
            const int splits = cuda::step_mma_splits(w.rows, w.cols, x.rows, step_blocks_);
            float* part = splits > 1 ? static_cast<float*>(scratch(
                                           "step partial sums", size_t(splits * x.rows * w.rows) * 4, "matmul"))
                                     : nullptr;
            ZINC_CUDA_CHECK(cuda::matmul_step_mma(type, w.data, rb, w.rows, w.cols, xq, xs, x.rows, out.data,
                                                  out.cols, splits, part, stream_),
                            "matmul: matmul_step_mma", w.name);
        } else {
            ZINC_CUDA_CHECK(cuda::quantize_q8_1(x.data, x.rows, x.cols, xq, stream_), "matmul: quantize_q8_1", w.name);
            ZINC_CUDA_CHECK(
                cuda::matvec_q_acts(type, w.data, rb, w.rows, w.cols, xq, x.rows, out.data, out.cols, stream_),
                "matmul: matvec_q_acts", w.name);
        }
    } else if (cuda::has_mma_matmul(type) && x.cols % 32 == 0) {
        // Prefill of quantized weights: tensor cores, f16 operands.
        if (x.rows > 65535 * 64) throw std::invalid_argument("matmul " + w.name + ": too many rows");
        void* rows = scratch("f16 activations", cuda::f16_rows_bytes(x.rows, x.cols), "matmul");
        ZINC_CUDA_CHECK(cuda::to_f16_rows(x.data, x.rows, x.cols, rows, stream_), "matmul: to_f16_rows", w.name);
        if (cuda::Cublas* blas = gemm()) {
            // A few thousand weight rows at a time to f16, then one cuBLAS GEMM for them against every token.
            const int64_t chunk = int64_t(cuda::kGemmChunkBytes / size_t(w.cols * 2)) / 128 * 128;
            const int64_t step_rows = std::min(std::max<int64_t>(128, chunk), w.rows);
            void* w16 = scratch("f16 weights", size_t(step_rows * w.cols) * 2, "matmul");
            for (int64_t o0 = 0; o0 < w.rows; o0 += step_rows) {
                const int64_t n = std::min(step_rows, w.rows - o0);
                ZINC_CUDA_CHECK(cuda::dequant_f16_rows(type, static_cast<const uint8_t*>(w.data) + size_t(o0) * rb, rb,
                                                       n, w.cols, w16, stream_),
                                "matmul: dequant_f16_rows", w.name);
                if (!blas->gemm_f16(w16, n, w.cols, rows, x.rows, out.data + o0, out.cols, stream_))
                    throw std::runtime_error("matmul " + w.name + ": " + blas->why());
            }
            ZINC_CUDA_CHECK(cuda::scale_rows(out.data, out.cols, x.rows, w.rows, rows, x.cols, stream_),
                            "matmul: scale_rows", w.name);
        } else {
            ZINC_CUDA_CHECK(
                cuda::matmul_mma(type, w.data, rb, w.rows, w.cols, rows, x.rows, out.data, out.cols, stream_),
                "matmul: matmul_mma", w.name);
        }
    } else {
        // Float weights: f32 throughout, as exact as the CPU's.
        if (x.rows > 65535 * 64) throw std::invalid_argument("matmul " + w.name + ": too many rows");
        ZINC_CUDA_CHECK(
            cuda::matmul_tiled(type, w.data, rb, w.rows, w.cols, x.data, x.rows, out.data, out.cols, stream_),
            "matmul: matmul_tiled", w.name);
    }
}

}  // namespace zinc::backend
