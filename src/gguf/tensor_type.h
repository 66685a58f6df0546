// The ggml tensor type ids that GGUF tensor records store, with their block geometry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace zinc::gguf {

// Values are the on-disk ids; gaps are ids ggml removed and files must not use.
enum class TensorType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
};

inline constexpr uint32_t kTensorTypeIdEnd = 43;  // first id past the table

struct TypeTraits {
    std::string_view name;    // ggml's type_name, e.g. "q4_K"
    uint32_t block_elems;     // elements per block
    uint32_t block_bytes;     // bytes per block
    bool quantized;           // block-quantized (not a plain scalar type)
};

// Traits of a valid id; std::nullopt for removed or out-of-range ids.
std::optional<TypeTraits> type_traits(uint32_t id);
const TypeTraits& traits(TensorType t);
std::string_view type_name(TensorType t);

// Bytes of a row of `n` elements; n must be a multiple of the block size.
inline size_t row_bytes(TensorType t, size_t n) {
    const TypeTraits& tt = traits(t);
    return n / tt.block_elems * tt.block_bytes;
}

}  // namespace zinc::gguf
