// Weights rearranged for the CPU's packed matmul kernels (gemm.h): tiles of kPackRows consecutive rows whose blocks
// are interleaved, so that one 32-byte load holds the same four bytes of quants of all eight rows, and each row's
// scales sit in one SIMD lane (docs/formats.md §3.10). A packed tensor holds the same bytes as the file's, reordered:
// its size is row_bytes(t, cols) · rows, so memory plans count it as the tensor it replaces.
//
// Layout: tile k covers rows 8k … 8k+7 and takes 8 · row_bytes bytes; within it, block b of the eight rows is one
// "tile block" of 8 · block_bytes bytes. A tile block is a sequence of chunks of the block (its scales, four bytes of
// quants, ...), each for the eight rows in turn, in the order the kernels read them: a chunk of c bytes holds row i's
// bytes at i · c. For example a Q4_0 tile block (144 bytes) is the chunk of the f16 scale (16 bytes), then the four
// 4-byte chunks of quants: bytes 16 + 32j + 4i … +3 are row i's qs[4j … 4j+3]. Q6_K's chunks of quants go by half h
// and group g of four positions: ql[64h + 4g], ql[64h + 32 + 4g], qh[32h + 4g], so that a decode reads it in one pass.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"

namespace zinc::backend::cpu {

inline constexpr int kPackRows = 8;

// Types with packed kernels: Q4_0, IQ4_NL, MXFP4, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
bool can_repack(gguf::TensorType t);

// True when a matrix of `rows` rows of `cols` values of type t can be packed: a packed type, rows a multiple of
// kPackRows, cols a whole number of blocks.
bool can_repack(gguf::TensorType t, int64_t rows, int64_t cols);

// Packs rows [r0, r1) (multiples of kPackRows) of src, a row-major tensor of `cols` values per row, into the same
// bytes of dst (row_bytes(t, cols) · rows in all). src and dst must not overlap.
void repack_rows(gguf::TensorType t, const void* src, void* dst, int64_t cols, int64_t r0, int64_t r1);

// Writes row r of a packed tensor back in the file's layout: row_bytes(t, cols) bytes at dst.
void unpack_row(gguf::TensorType t, const void* packed, int64_t cols, int64_t r, void* dst);

}  // namespace zinc::backend::cpu
