// The packed GEMM kernels for AVX-512 with VNNI (gemm_kernels.h): int8 products by vpdpbusd on 256-bit vectors
// (AVX512VL), which sums four products into an int32 lane without an int16 step, and the 32 vector registers of
// AVX-512 for more activation rows per call. This file is compiled for AVX-512 (see src/CMakeLists.txt) and only
// called where the processor has it (cpu_features.h).
#include "backend/cpu/gemm_internal.h"

#ifdef ZINC_GEMM_X86

#include "backend/cpu/gemm_kernels.h"

namespace zinc::backend::cpu::detail {

namespace {

struct Avx512 {
    static constexpr bool kVnni = true;
    static constexpr int kMaxRows = 4;
    static constexpr int kQ8MaxRows = 3;  // Q8_0 keeps eight float sums per activation row
    static constexpr int kQ23MaxRows = 3;  // Q2_K and Q3_K keep four sums per activation row
    static constexpr int groups(int) { return 1 << 30; }  // int32 sums: never split
    static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
    static __m256i finish(__m256i acc, __m256i scale) { return _mm256_mullo_epi32(acc, scale); }
    static __m256i finish1(__m256i acc) { return acc; }
    static __m256i scale_u8(__m256i v, int k) { return _mm256_shuffle_epi8(v, lane_mask(k, -1, -1, -1)); }
    static __m256i scale_s8(__m256i v, int k) {
        return _mm256_srai_epi32(_mm256_shuffle_epi8(v, lane_mask(-1, -1, -1, k)), 24);
    }
    static __m256i scale_i32(__m256i v) { return v; }
};

}  // namespace

PackedKernel avx512_packed_kernel(gguf::TensorType w, int max_rows) { return Kernels<Avx512>::packed(w, max_rows); }

}  // namespace zinc::backend::cpu::detail

#endif  // ZINC_GEMM_X86
