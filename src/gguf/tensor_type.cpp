#include "gguf/tensor_type.h"

#include <array>
#include <stdexcept>

namespace zinc::gguf {
namespace {

constexpr std::array<TypeTraits, kTensorTypeIdEnd> make_table() {
    std::array<TypeTraits, kTensorTypeIdEnd> t{};  // zero block size marks a removed id
    auto set = [&](TensorType id, std::string_view name, uint32_t elems, uint32_t bytes, bool q) {
        t[static_cast<uint32_t>(id)] = TypeTraits{name, elems, bytes, q};
    };
    set(TensorType::F32, "f32", 1, 4, false);
    set(TensorType::F16, "f16", 1, 2, false);
    set(TensorType::Q4_0, "q4_0", 32, 18, true);
    set(TensorType::Q4_1, "q4_1", 32, 20, true);
    set(TensorType::Q5_0, "q5_0", 32, 22, true);
    set(TensorType::Q5_1, "q5_1", 32, 24, true);
    set(TensorType::Q8_0, "q8_0", 32, 34, true);
    set(TensorType::Q8_1, "q8_1", 32, 36, true);
    set(TensorType::Q2_K, "q2_K", 256, 84, true);
    set(TensorType::Q3_K, "q3_K", 256, 110, true);
    set(TensorType::Q4_K, "q4_K", 256, 144, true);
    set(TensorType::Q5_K, "q5_K", 256, 176, true);
    set(TensorType::Q6_K, "q6_K", 256, 210, true);
    set(TensorType::Q8_K, "q8_K", 256, 292, true);
    set(TensorType::IQ2_XXS, "iq2_xxs", 256, 66, true);
    set(TensorType::IQ2_XS, "iq2_xs", 256, 74, true);
    set(TensorType::IQ3_XXS, "iq3_xxs", 256, 98, true);
    set(TensorType::IQ1_S, "iq1_s", 256, 50, true);
    set(TensorType::IQ4_NL, "iq4_nl", 32, 18, true);
    set(TensorType::IQ3_S, "iq3_s", 256, 110, true);
    set(TensorType::IQ2_S, "iq2_s", 256, 82, true);
    set(TensorType::IQ4_XS, "iq4_xs", 256, 136, true);
    set(TensorType::I8, "i8", 1, 1, false);
    set(TensorType::I16, "i16", 1, 2, false);
    set(TensorType::I32, "i32", 1, 4, false);
    set(TensorType::I64, "i64", 1, 8, false);
    set(TensorType::F64, "f64", 1, 8, false);
    set(TensorType::IQ1_M, "iq1_m", 256, 56, true);
    set(TensorType::BF16, "bf16", 1, 2, false);
    set(TensorType::TQ1_0, "tq1_0", 256, 54, true);
    set(TensorType::TQ2_0, "tq2_0", 256, 66, true);
    set(TensorType::MXFP4, "mxfp4", 32, 17, true);
    set(TensorType::NVFP4, "nvfp4", 64, 36, true);
    set(TensorType::Q1_0, "q1_0", 128, 18, true);
    set(TensorType::Q2_0, "q2_0", 64, 18, true);
    return t;
}

constexpr auto kTable = make_table();

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t id) {
    if (id >= kTensorTypeIdEnd || kTable[id].block_elems == 0) return std::nullopt;
    return kTable[id];
}

const TypeTraits& traits(TensorType t) {
    const uint32_t id = static_cast<uint32_t>(t);
    if (id >= kTensorTypeIdEnd || kTable[id].block_elems == 0)
        throw std::invalid_argument("invalid tensor type id " + std::to_string(id));
    return kTable[id];
}

std::string_view type_name(TensorType t) { return traits(t).name; }

}  // namespace zinc::gguf
