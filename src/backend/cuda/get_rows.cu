// Embedding gather with dequantization: one block per gathered row, 8 values per thread per step.
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/launch.cuh"

namespace zinc::backend::cuda {

bool can_dequantize(int type) {
    switch (type) {
    case kF32: case kF16: case kBF16:
    case kQ4_0: case kQ4_1: case kQ5_0: case kQ5_1: case kQ8_0:
    case kQ2_K: case kQ3_K: case kQ4_K: case kQ5_K: case kQ6_K:
    case kIQ4_NL: case kIQ4_XS: case kMXFP4:
        return true;
    default: return false;
    }
}

namespace {
__global__ void get_rows_kernel(int type, const uint8_t* table, size_t row_bytes, int64_t cols, const int32_t* ids,
                                float* out) {
    begin_kernel();
    const int64_t t = blockIdx.x;
    const uint8_t* row = table + size_t(ids[t]) * row_bytes;
    float* o = out + t * cols;
    for (int64_t i0 = int64_t(threadIdx.x) * 8; i0 < cols; i0 += int64_t(blockDim.x) * 8) {
        float v[8];
        dequant8(type, row, cols, i0, v);
        for (int k = 0; k < 8; ++k)
            if (i0 + k < cols) o[i0 + k] = v[k];
    }
}
}  // namespace

cudaError_t get_rows(int type, const void* table, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n,
                     float* out, cudaStream_t s) {
    if (n > 0)
        launch(get_rows_kernel, unsigned(n), 256, 0, s, type, static_cast<const uint8_t*>(table), row_bytes, cols, ids,
               out);
    return cudaGetLastError();
}

}  // namespace zinc::backend::cuda
