// The packed GEMM kernels for AVX2 + FMA + F16C (gemm_kernels.h): int8 products by maddubs, summed in int16 lanes as
// far as the weights' range allows, then madd with the lanes' scales. This file is compiled for AVX2 (see
// src/CMakeLists.txt) and only called where the processor has it (cpu_features.h).
#include "backend/cpu/gemm_internal.h"

#ifdef ZINC_GEMM_X86

#include "backend/cpu/gemm_kernels.h"

namespace zinc::backend::cpu::detail {

namespace {

struct Avx2 {
    static constexpr bool kVnni = false;
    static constexpr int kMaxRows = 2;  // activation rows per packed kernel: what sixteen registers hold
    static constexpr int kQ8MaxRows = 1;  // Q8_0 keeps eight float sums per activation row
    static constexpr int kQ23MaxRows = 1;  // Q2_K and Q3_K keep four sums per activation row
    // How many maddubs results an int16 sum takes: each is at most 2·max_u·127 in magnitude.
    static constexpr int groups(int max_u) { return 32767 / (2 * max_u * 127); }
    static __m256i dot(__m256i acc, __m256i u, __m256i s) {
        return _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s));
    }
    // The lane's two int16 sums added and multiplied by its scale (lanes of [scale, scale] int16 pairs).
    static __m256i finish(__m256i acc, __m256i scale) { return _mm256_madd_epi16(acc, scale); }
    static __m256i finish1(__m256i acc) { return _mm256_madd_epi16(acc, _mm256_set1_epi16(1)); }
    // Byte k of each lane as the scale of finish: unsigned, signed, and from int32 lanes.
    static __m256i scale_u8(__m256i v, int k) { return _mm256_shuffle_epi8(v, lane_mask(k, -1, k, -1)); }
    static __m256i scale_s8(__m256i v, int k) {
        return _mm256_srai_epi16(_mm256_shuffle_epi8(v, lane_mask(-1, k, -1, k)), 8);
    }
    static __m256i scale_i32(__m256i v) { return _mm256_shuffle_epi8(v, lane_mask(0, 1, 0, 1)); }
};

}  // namespace

PackedKernel avx2_packed_kernel(gguf::TensorType w, int max_rows) { return Kernels<Avx2>::packed(w, max_rows); }

}  // namespace zinc::backend::cpu::detail

#endif  // ZINC_GEMM_X86
