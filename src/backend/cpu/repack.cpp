#include "backend/cpu/repack.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace zinc::backend::cpu {
namespace {

using gguf::TensorType;

// One chunk of a block: `bytes` bytes at byte `offset` of the block. A tile block holds its type's chunks in turn,
// each for the eight rows.
struct Chunk {
    int offset, bytes;
};

// Adds `count` consecutive chunks of `bytes` bytes from byte `offset` on.
void add(std::vector<Chunk>& v, int offset, int bytes, int count = 1) {
    for (int j = 0; j < count; ++j) v.push_back({offset + j * bytes, bytes});
}

// The chunks of a type's tile block, in the order the kernels read them (gemm_kernels.h); empty for types that are
// not packed.
std::vector<Chunk> make_chunks(TensorType t) {
    std::vector<Chunk> v;
    switch (t) {
        case TensorType::Q4_0:
        case TensorType::IQ4_NL: add(v, 0, 2), add(v, 2, 4, 4); break;  // d, qs
        case TensorType::MXFP4: add(v, 0, 1), add(v, 1, 4, 4); break;  // e, qs
        case TensorType::Q8_0: add(v, 0, 2), add(v, 2, 4, 8); break;   // d, qs
        case TensorType::Q2_K: add(v, 80, 2), add(v, 82, 2), add(v, 0, 4, 4), add(v, 16, 4, 16); break;  // d, dmin, …
        case TensorType::Q3_K: add(v, 108, 2), add(v, 96, 4, 3), add(v, 0, 4, 8), add(v, 32, 4, 16); break;  // d, …
        case TensorType::Q4_K: add(v, 0, 2), add(v, 2, 2), add(v, 4, 4, 3), add(v, 16, 4, 32); break;  // d, dmin, …
        case TensorType::Q5_K: add(v, 0, 2), add(v, 2, 2), add(v, 4, 4, 3), add(v, 16, 4, 8), add(v, 48, 4, 32); break;
        case TensorType::Q6_K:
            // d, scales, then per half h and group g of four positions: ql[64h + 4g], ql[64h + 32 + 4g], qh[32h + 4g]
            add(v, 208, 2), add(v, 192, 4, 4);
            for (int h = 0; h < 2; ++h)
                for (int g = 0; g < 8; ++g)
                    add(v, 64 * h + 4 * g, 4), add(v, 64 * h + 32 + 4 * g, 4), add(v, 128 + 32 * h + 4 * g, 4);
            break;
        case TensorType::IQ4_XS: add(v, 0, 2), add(v, 2, 2), add(v, 4, 4), add(v, 8, 4, 32); break;  // d, scales, qs
        default: break;
    }
    return v;
}

const std::vector<Chunk>& chunks(TensorType t) {
    static const std::vector<Chunk> table[] = {
        make_chunks(TensorType::Q4_0), make_chunks(TensorType::IQ4_NL), make_chunks(TensorType::MXFP4),
        make_chunks(TensorType::Q4_K), make_chunks(TensorType::Q5_K),   make_chunks(TensorType::Q6_K),
        make_chunks(TensorType::IQ4_XS), make_chunks(TensorType::Q8_0), make_chunks(TensorType::Q2_K),
        make_chunks(TensorType::Q3_K)};
    static const std::vector<Chunk> none;
    switch (t) {
        case TensorType::Q4_0: return table[0];
        case TensorType::IQ4_NL: return table[1];
        case TensorType::MXFP4: return table[2];
        case TensorType::Q4_K: return table[3];
        case TensorType::Q5_K: return table[4];
        case TensorType::Q6_K: return table[5];
        case TensorType::IQ4_XS: return table[6];
        case TensorType::Q8_0: return table[7];
        case TensorType::Q2_K: return table[8];
        case TensorType::Q3_K: return table[9];
        default: return none;
    }
}

// Copies one chunk (of 1, 2 or 4 bytes: fixed sizes, so that each is one move).
inline void copy_chunk(uint8_t* to, const uint8_t* from, int n) {
    switch (n) {
        case 4: std::memcpy(to, from, 4); return;
        case 2: std::memcpy(to, from, 2); return;
        default: std::memcpy(to, from, 1); return;
    }
}

// Calls fn(packed, plain, bytes) for every chunk of row i's block: `packed` its offset in the tile block, `plain` in
// the row's block.
template <class Fn>
void for_chunks(const std::vector<Chunk>& cs, int i, Fn&& fn) {
    int at = 0;
    for (const Chunk& c : cs) {
        fn(at + i * c.bytes, c.offset, c.bytes);
        at += kPackRows * c.bytes;
    }
}

[[noreturn]] void not_packed(TensorType t) {
    throw std::invalid_argument("repack: type " + std::string(gguf::type_name(t)) + " has no packed layout");
}

}  // namespace

bool can_repack(TensorType t) { return !chunks(t).empty(); }

bool can_repack(TensorType t, int64_t rows, int64_t cols) {
    return can_repack(t) && rows > 0 && rows % kPackRows == 0 && cols > 0 &&
           cols % static_cast<int64_t>(gguf::traits(t).block_elems) == 0;
}

void repack_rows(TensorType t, const void* src, void* dst, int64_t cols, int64_t r0, int64_t r1) {
    const std::vector<Chunk>& fs = chunks(t);
    if (fs.empty()) not_packed(t);
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
                for_chunks(fs, i, [&](int packed, int plain, int n) { copy_chunk(to + packed, from + plain, n); });
            }
        }
    }
}

void unpack_row(TensorType t, const void* packed, int64_t cols, int64_t r, void* dst) {
    const std::vector<Chunk>& fs = chunks(t);
    if (fs.empty()) not_packed(t);
    const size_t bb = gguf::traits(t).block_bytes;
    const int64_t nb = cols / static_cast<int64_t>(gguf::traits(t).block_elems);
    const size_t rb = bb * static_cast<size_t>(nb);
    const uint8_t* tile = static_cast<const uint8_t*>(packed) + static_cast<size_t>(r - r % kPackRows) * rb;
    auto* out = static_cast<uint8_t*>(dst);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* from = tile + static_cast<size_t>(b) * kPackRows * bb;
        uint8_t* to = out + static_cast<size_t>(b) * bb;
        for_chunks(fs, static_cast<int>(r % kPackRows),
                   [&](int packed, int plain, int n) { copy_chunk(to + plain, from + packed, n); });
    }
}

}  // namespace zinc::backend::cpu
