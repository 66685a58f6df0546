#include "quant/repack.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace zinc::quant {
namespace {

using gguf::TensorType;

// One field of a block: `count` chunks of `bytes` bytes starting at byte `offset` of the block.
struct Field {
    int offset, bytes, count;
};

// The fields of a block type in the order its tile block lists them; empty for types that are not packed.
struct Fields {
    Field f[5] = {};
    int n = 0;
};

Fields fields(TensorType t) {
    switch (t) {
        case TensorType::Q4_0:
        case TensorType::IQ4_NL: return {{{0, 2, 1}, {2, 4, 4}}, 2};                          // d, qs
        case TensorType::MXFP4: return {{{0, 1, 1}, {1, 4, 4}}, 2};                           // e, qs
        case TensorType::Q4_K: return {{{0, 2, 1}, {2, 2, 1}, {4, 4, 3}, {16, 4, 32}}, 4};   // d, dmin, scales, qs
        case TensorType::Q5_K:                                                                // ... qh before qs
            return {{{0, 2, 1}, {2, 2, 1}, {4, 4, 3}, {16, 4, 8}, {48, 4, 32}}, 5};
        case TensorType::Q6_K: return {{{208, 2, 1}, {192, 4, 4}, {0, 4, 32}, {128, 4, 16}}, 4};  // d, scales, ql, qh
        case TensorType::IQ4_XS:                                                              // d, scales_h/_l, qs
            return {{{0, 2, 1}, {2, 2, 1}, {4, 4, 1}, {8, 4, 32}}, 4};
        default: return {};
    }
}

// Calls fn(packed, plain, bytes) for every chunk of row i's block: `packed` its offset in the tile block, `plain` in
// the row's block.
template <class Fn>
void for_chunks(const Fields& fs, int i, Fn&& fn) {
    int at = 0;
    for (int k = 0; k < fs.n; ++k) {
        const Field& f = fs.f[k];
        for (int j = 0; j < f.count; ++j) fn(at + (j * kPackRows + i) * f.bytes, f.offset + j * f.bytes, f.bytes);
        at += kPackRows * f.bytes * f.count;
    }
}

[[noreturn]] void not_packed(TensorType t) {
    throw std::invalid_argument("repack: type " + std::string(gguf::type_name(t)) + " has no packed layout");
}

}  // namespace

bool can_repack(TensorType t) { return fields(t).n > 0; }

bool can_repack(TensorType t, int64_t rows, int64_t cols) {
    return can_repack(t) && rows > 0 && rows % kPackRows == 0 && cols > 0 &&
           cols % static_cast<int64_t>(gguf::traits(t).block_elems) == 0;
}

void repack_rows(TensorType t, const void* src, void* dst, int64_t cols, int64_t r0, int64_t r1) {
    const Fields fs = fields(t);
    if (fs.n == 0) not_packed(t);
    const size_t bb = gguf::traits(t).block_bytes;
    const int64_t nb = cols / static_cast<int64_t>(gguf::traits(t).block_elems);
    const size_t rb = bb * static_cast<size_t>(nb);
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    for (int64_t r = r0; r < r1; r += kPackRows) {
        uint8_t* tile = d + static_cast<size_t>(r) * rb;
        for (int i = 0; i < kPackRows; ++i) {
            const uint8_t* row = s + static_cast<size_t>(r + i) * rb;
            for (int64_t b = 0; b < nb; ++b) {
                uint8_t* to = tile + static_cast<size_t>(b) * kPackRows * bb;
                const uint8_t* from = row + static_cast<size_t>(b) * bb;
                for_chunks(fs, i, [&](int packed, int plain, int n) { std::memcpy(to + packed, from + plain, n); });
            }
        }
    }
}

void unpack_row(TensorType t, const void* packed, int64_t cols, int64_t r, void* dst) {
    const Fields fs = fields(t);
    if (fs.n == 0) not_packed(t);
    const size_t bb = gguf::traits(t).block_bytes;
    const int64_t nb = cols / static_cast<int64_t>(gguf::traits(t).block_elems);
    const size_t rb = bb * static_cast<size_t>(nb);
    const uint8_t* tile = static_cast<const uint8_t*>(packed) + static_cast<size_t>(r - r % kPackRows) * rb;
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* from = tile + static_cast<size_t>(b) * kPackRows * bb;
        uint8_t* to = out + static_cast<size_t>(b) * bb;
        for_chunks(fs, static_cast<int>(r % kPackRows),
                   [&](int packed, int plain, int n) { std::memcpy(to + plain, from + packed, n); });
    }
}

}  // namespace zinc::quant
