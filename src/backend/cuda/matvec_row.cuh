// The dot product of one weight row with one activation row, computed by one warp: the core of every decode matvec
// (matvec_q.cu: one weight, MoE experts; matvec_fused.cu: several weights in one launch, gate and up with their
// activation, the residual add). Lane l takes the 32-value chunks l, l+32, ... of a quantized row (chunk_dot against
// the Q8_1 blocks of the activations), the 64-value groups l, l+32, ... of a Q4_K, Q5_K, Q6_K, MXFP4 or IQ4_XS row
// (k_group_dot, q6_k_group_dot), or the 4-value vectors l, l+32, ... of a float row (in f32 against the f32
// activations; single values l, l+32, ... where a row is not aligned to them), and a butterfly of shuffles adds the
// lanes' partial sums; which of these a row takes depends only on its type, width and alignment. The lanes
// add with __fadd_rn, which nvcc never merges with the product before it into a fused multiply-add, so the arithmetic
// is fixed by this code and not by how a kernel around it is optimized: every kernel built on these functions gives a
// row the same value bit for bit, and a fused op equals the separate ops on the GPU too.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/vec_dot_q8_1.cuh"

namespace zinc::backend::cuda {

// Every type with a chunk_dot, and the float types, for the launchers' switches.
#define ZINC_DP4A_TYPES(X)                                                                   \
    X(kQ8_0) X(kQ4_0) X(kQ4_1) X(kQ5_0) X(kQ5_1) X(kQ2_K) X(kQ3_K) X(kQ4_K) X(kQ5_K) X(kQ6_K) \
    X(kIQ4_NL) X(kIQ4_XS) X(kMXFP4)
#define ZINC_FLOAT_TYPES(X) X(kF32) X(kF16) X(kBF16)

__host__ __device__ constexpr bool is_float_weight(int type) { return type == kF32 || type == kF16 || type == kBF16; }

// Which weight types a launcher has kernels for (for_weight_type).
enum WeightTypes : int { kQuantTypes = 1, kFloatTypes = 2, kAllTypes = 3 };

// The one switch over weight types of the matvec launchers: returns f(std::integral_constant<int, T>{}) for the type
// T = `type` when T is one of kSet's types, cudaErrorInvalidValue for any other type. f instantiates its kernels for
// kSet's types only.
template <int kSet, typename F>
cudaError_t for_weight_type(int type, F&& f) {
#define ZINC_CASE(T) \
    case T: return f(std::integral_constant<int, T>{});
    if constexpr ((kSet & kQuantTypes) != 0) {
        switch (type) {
            ZINC_DP4A_TYPES(ZINC_CASE)
        default: break;
        }
    }
    if constexpr ((kSet & kFloatTypes) != 0) {
        switch (type) {
            ZINC_FLOAT_TYPES(ZINC_CASE)
        default: break;
        }
    }
#undef ZINC_CASE
    return cudaErrorInvalidValue;
}

// Value i of a row of F32, F16 or BF16 weights.
template <int T>
__device__ __forceinline__ float float_weight(const uint8_t* row, int64_t i) {
    if constexpr (T == kF32)
        return reinterpret_cast<const float*>(row)[i];
    else if constexpr (T == kF16)
        return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
    else
        return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
}

template <int T>
__host__ __device__ constexpr int sizeof_float_weight() {
    return T == kF32 ? 4 : 2;
}
// Values 4v..4v+3 of a row of F32, F16 or BF16 weights (aligned to 4 values).
template <int T>
__device__ __forceinline__ float4 float_weight_vector(const uint8_t* row, int64_t v) {
    if constexpr (T == kF32) {
        return reinterpret_cast<const float4*>(row)[v];
    } else {
        const uint2 p = reinterpret_cast<const uint2*>(row)[v];
        const uint16_t h[4] = {uint16_t(p.x), uint16_t(p.x >> 16), uint16_t(p.y), uint16_t(p.y >> 16)};
        if constexpr (T == kF16)
            return make_float4(f16_to_f32(h[0]), f16_to_f32(h[1]), f16_to_f32(h[2]), f16_to_f32(h[3]));
        else
            return make_float4(bf16_to_f32(h[0]), bf16_to_f32(h[1]), bf16_to_f32(h[2]), bf16_to_f32(h[3]));
    }
}
// Vectors of a float row in flight per lane. F32 takes 8, so that a 2048-wide router row is read in two round trips of
// memory (tg128 on the H100 against 4: Qwen3.6-35B-A3B 347.4 against 344.6 tok/s, gpt-oss-20b 492.5 against 489.4);
// F16 and BF16 keep 4, since 8 of theirs with their conversions take more registers than the kernels have.
template <int T>
constexpr int kFloatVectors = T == kF32 ? 8 : 4;

// v summed over the warp, the same in every lane (a butterfly of commutative adds).
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// The bytes of n 32-value chunks of a row of type T, from a block or super-block boundary (n a multiple of 8 for the
// 256-value types, whose rows are whole super-blocks).
template <int T>
__host__ __device__ constexpr int64_t chunks_bytes(int64_t n) {
    switch (T) {
    case kQ8_0: return n * 34;
    case kQ4_0: return n * 18;
    case kQ4_1: return n * 20;
    case kQ5_0: return n * 22;
    case kQ5_1: return n * 24;
    case kIQ4_NL: return n * 18;
    case kMXFP4: return n * 17;
    // The 256-value formats; chunks_bytes<T>(1) is 0 for them, which tells them apart.
    case kQ2_K: return n / 8 * 84;
    case kQ3_K: return n / 8 * 110;
    case kQ4_K: return n / 8 * 144;
    case kQ5_K: return n / 8 * 176;
    case kQ6_K: return n / 8 * 210;
    case kIQ4_XS: return n / 8 * 136;
    default: return 0;
    }
}

// Rows of quantized types pass through shared memory in segments of kStageChunks chunks, copied by the warp with
// 16-byte cp.async copies that run kStages - 1 segments ahead of the dot products: a warp keeps two segments of
// weights in flight while it computes a third, instead of waiting for each segment before it computes, and its
// lanes read each chunk's narrow pieces from shared memory rather than from the weights where they lie. The first
// segments are asked for before the kernel waits for the kernels before it (begin_kernel): no kernel writes weights.
// Rows that are not 16-byte aligned (gpt-oss's 2880-wide MXFP4 and Q8_0 rows) are read in place.
constexpr int kStageChunks = 64;  // a multiple of 8, so K-quant super-blocks are never cut
constexpr int kStages = 3;        // segments of a warp in shared memory at a time
constexpr int kStageWarps = 4;    // warps per block of every kernel built on these functions
// Blocks per multiprocessor the kernels built on these functions ask registers for (__launch_bounds__): at 80
// registers only 6 fit, and the warps then spend half their cycles waiting for loads with too few others to switch to.
// 10 (51 registers) was measured slower still: Qwen3-8B decoded 311 tokens/s against 373.
constexpr int kMinBlocksPerSm = 8;

template <int T>
constexpr int kSegmentBytes = int(chunks_bytes<T>(kStageChunks));

__device__ __forceinline__ void copy_16_async(void* dst, const void* src) {
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
// The same through L1 (.ca): for data that other blocks of the multiprocessor read too.
__device__ __forceinline__ void copy_16_async_l1(void* dst, const void* src) {
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void copies_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's copy groups are still in flight.
template <int N>
__device__ __forceinline__ void copies_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Q4_K/Q5_K rows of at least 32 groups (2048 values) are read in place, a 64-value group per lane and step
// (vec_dot_q8_1.cuh): lane l takes groups l, l + 32, ... of a row, loaded straight into registers two at a time (one
// for Q5_K), and for two rows at once (the gate and up rows of a gated FFN; two Q4_K rows of a plain matvec,
// paired_rows) the same groups of both, which share their activation loads. A lane then has 96 bytes of weights of
// each row in flight, and a warp waits for memory once per 4096-value row. (Two rows per warp for the plain matvecs
// at 64 registers spilled and measured slower, Qwen3-8B tg128 334 against 380 tok/s; at 80 registers, six blocks
// per multiprocessor, they measured faster, with Q6_K's rows paired too: 420 against 388 on the H200.)
constexpr int kMinGroupsInPlace = 32;

// MXFP4 and IQ4_XS rows are read in place the same way (vec_dot_q8_1.cuh's KGroup<kMXFP4>: five 8-byte loads a
// group), two rows a warp, where they were staged chunk by chunk, one row a warp whose lanes read every activation
// block where it lies, 48 bytes from their neighbours' (H100, alone, staged against in place: MXFP4 4096 -> 12288
// 17.06 -> 14.34 µs, the LM head 4096 -> 151936 161.7 -> 135.8; IQ4_XS 17.05 -> 13.65, 164.8 -> 128.5).
template <int T>
constexpr bool kGroupsInPlace = T == kQ4_K || T == kQ5_K || T == kMXFP4 || T == kIQ4_XS;
// The alignment of the rows (and of their byte counts) that lane_rows_dot reads in place by groups: the 16-byte loads
// of Q4_K and Q5_K, the 8-byte ones of IQ4_XS; MXFP4's 34-byte groups are cut out of 8-byte words at any even address.
// 0 for the other types.
__host__ __device__ constexpr int group_row_align(int type) {
    return type == kQ4_K || type == kQ5_K ? 16 : type == kIQ4_XS ? 8 : type == kMXFP4 ? 2 : 0;
}

// On the host, before a launch: whether rows of `type` at w, row_bytes apart, of `cols` values are 16-byte aligned,
// and whether lane_rows_dot reads them in place (a type of kGroupsInPlace at its alignment, of a width groups_width
// allows: whole groups, at least kMinGroupsInPlace of them, filling the lanes where groups_fill_lanes asks it).
inline bool aligned_rows(const void* w, size_t row_bytes) {
    return reinterpret_cast<uintptr_t>(w) % 16 == 0 && row_bytes % 16 == 0;
}
// MXFP4 and IQ4_XS rows are read by groups only where their groups fill a warp's lanes evenly: gpt-oss's 2880-value
// expert rows (45 groups, two for 13 lanes and one for the rest) took longer by groups, two rows a warp, than chunk by
// chunk in place (its decode expert FFN on the H100: 43.4 against 36.8 µs; tg128 463 against 502 tok/s).
__host__ __device__ constexpr bool groups_fill_lanes(int type, int64_t n_groups) {
    return (type != kMXFP4 && type != kIQ4_XS) || n_groups % 32 == 0;
}
// The part of groups_in_place that depends on the rows' width only: where it is false, no row of that width is read
// by groups, and a kernel may leave the group path out (lane_rows_dot's kGroups), holding fewer registers.
__host__ __device__ constexpr bool groups_width(int type, int64_t cols) {
    return cols % 64 == 0 && cols / 64 >= kMinGroupsInPlace && groups_fill_lanes(type, cols / 64);
}
inline bool groups_in_place(int type, const void* w, size_t row_bytes, int64_t cols) {
    const int align = group_row_align(type);
    return align > 0 && reinterpret_cast<uintptr_t>(w) % align == 0 && row_bytes % align == 0 &&
           groups_width(type, cols);
}

// Rows of these types go two to a warp where paired_rows allows it, their dot products sharing the activation loads
// (lane_k_groups_dot's two rows, lane_row_pair_q6_k): a single row is limited by its activation loads, its lanes
// reading Q8_1 blocks 96 bytes apart, more than by its weights (Qwen3-8B's 12288 -> 4096 Q4_K matvec alone on the
// H200: L1 82% busy, DRAM 34%). Q4_K rows pair where they are read in place, Q6_K rows where they are staged. On the
// H100, alone: Q4_K 4096 -> 4096 6.41 against 7.83 µs, 12288 -> 4096 13.10 against 15.49; Q6_K 12288 -> 4096 22.08
// against 24.07, the LM head 4096 -> 151936 178 against 190. Q5_K rows, whose paired kernels spill, were as fast or
// slower that way (4096 -> 4096 8.34 against 7.93 µs) and stay single. MXFP4 and IQ4_XS rows pair where they are read
// in place, as Q4_K's do.
template <int T>
constexpr bool kPairedTypes = T == kQ4_K || T == kQ6_K || T == kMXFP4 || T == kIQ4_XS;
inline bool paired_rows(int type, const void* w, size_t row_bytes, int64_t cols) {
    if (type == kQ6_K) return aligned_rows(w, row_bytes);
    return type != kQ5_K && groups_in_place(type, w, row_bytes, cols);
}

// Where the groups read in place find their activations: act.ready() takes begin_kernel()'s place (every lane of the
// block calls it exactly once, after its first weights are asked for), act.group(gi, a) loads group gi's two Q8_1
// blocks. ActBlocks reads them where they lie. There a lane's blocks are 96 bytes from its neighbours', so each
// 16-byte load of a warp touches 24 cache lines where 4 would hold its bytes, and these loads, more than the weights,
// kept L1 busy (Qwen3-8B's 12288 -> 4096 Q4_K matvec alone on the H200, one row per warp: L1 82% busy, DRAM 34%).
// ActShared has the block's warps, which all read the same activation row, copy it once into shared memory, where
// each group's bytes are laid out so that a warp's loads are free of bank conflicts.
struct ActBlocks {
    const BlockQ8_1f* xq;
    __device__ __forceinline__ void ready() const { begin_kernel(); }
    __device__ __forceinline__ void group(int gi, ActGroup& a) const { load_act_group(xq + 2 * gi, a); }
};

// ActShared's layout: group g at 112 g, its blocks' quants at 0 and 32, their headers at 64 and 80, 16 bytes unused.
// A quarter-warp's 16-byte loads (eight lanes, eight consecutive groups) then start 7 pieces apart, in 8 different
// 16-byte bank slots: no two of them conflict (at 96 bytes a group, two would).
constexpr int kActGroupBytes = 112;
// Rows of at most 64 groups (4096 values) only: the copy is waited for before the first dot product, and for longer
// rows that wait costs more than the loads it saves (H200, alone: Q4_K 4096 -> 12288 11.04 -> 9.82 µs, the gated FFN
// 4096 -> 2 x 12288 18.61 -> 17.15, 4096 -> 4096 5.72 -> 5.40, Q5_K 4096 -> 4096 7.21 -> 5.89; but 12288 -> 4096
// Q4_K 11.07 -> 12.71, Q5_K 15.35 -> 15.76).
constexpr int kMaxActSharedGroups = 64;
struct ActShared {
    const BlockQ8_1f* xq;
    uint8_t* s;  // the block's dynamic shared memory, kActGroupBytes per group
    int n_groups;
    // Waits for the kernel before, then copies the row: 16-byte piece q of the Q8_1 blocks (piece r = q % 6 of group
    // q / 6: block 2g's quants (r = 0, 1) and header (2), block 2g + 1's (3-5)) to its slot, coalesced reads of the
    // row that other blocks of the multiprocessor find in L1.
    __device__ __forceinline__ void ready() const {
        begin_kernel();
        const uint8_t* src = reinterpret_cast<const uint8_t*>(xq);
        for (int q = int(threadIdx.x); q < 6 * n_groups; q += int(blockDim.x)) {
            const int g = q / 6, r = q - 6 * g;
            const int slot = (0x532410 >> (4 * r)) & 0xF;  // r = 0..5 -> slots 0, 1, 4, 2, 3, 5
            copy_16_async_l1(s + kActGroupBytes * g + 16 * slot, src + 16 * q);
        }
        copies_commit();
        copies_wait<0>();
        __syncthreads();
    }
    __device__ __forceinline__ void group(int gi, ActGroup& a) const {
        const uint8_t* p = s + kActGroupBytes * gi;
        load_act_group(p, p + 32, p + 64, p + 80, a);
    }
};
// ActShared's layout, quantized by the block from the f32 row x instead of copied: the row goes to shared memory past
// the groups (4 bytes a value), and its float4s are quantized there by 8 lanes a block (quantize_8_lanes: the blocks
// quantize_q8_1 writes, bit for bit). A kernel of its own (matvec_multi_kernel's kQuantize), as the registers it
// takes beside the first weights in flight would make the other kernels spill.
struct ActSharedF32 {
    const float* x;
    uint8_t* s;  // kActGroupBytes per group, then 4 bytes a value
    int n_groups;
    __device__ __forceinline__ void ready() const {
        begin_kernel();
        float4* f = reinterpret_cast<float4*>(s + kActGroupBytes * n_groups);
        const int n4 = 16 * n_groups;  // a multiple of 8: whole blocks
        for (int i = int(threadIdx.x); i < n4; i += int(blockDim.x)) copy_16_async_l1(f + i, x + 4 * i);
        copies_commit();
        copies_wait<0>();
        __syncthreads();
        for (int i0 = 0; i0 < n4; i0 += int(blockDim.x)) {  // every lane of a warp takes part in its blocks
            const int i = i0 + int(threadIdx.x), b = i / 8;
            const Q8Lanes q = quantize_8_lanes(i < n4 ? f[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f));
            uint8_t* group = s + kActGroupBytes * (b / 2);
            if (i < n4) store_8_lanes(q, group + 32 * (b % 2), group + 64 + 16 * (b % 2), i % 8);
        }
        __syncthreads();
    }
    __device__ __forceinline__ void group(int gi, ActGroup& a) const { ActShared{nullptr, s, n_groups}.group(gi, a); }
};
// The dynamic shared memory of a matvec block whose rows of `type` are all read in place with ActShared
// (groups_in_place, up to kMaxActSharedGroups groups), or 0 where they are not (their activations are read where they
// lie); with from_f32, for a block that quantizes the row itself (ActSharedF32). The launcher passes it as the
// launch's shared memory.
inline int act_shared_bytes(int type, const void* w, size_t row_bytes, int64_t cols, bool from_f32 = false) {
    if (!groups_in_place(type, w, row_bytes, cols) || cols / 64 > kMaxActSharedGroups) return 0;
    return int(cols / 64 * kActGroupBytes + (from_f32 ? cols * 4 : 0));
}
// The block's dynamic shared memory, where ActShared keeps its row.
__device__ __forceinline__ uint8_t* act_shared_memory() {
    extern __shared__ __align__(16) uint8_t act_smem[];
    return act_smem;
}

// The R rows r (R = 1 or 2) dotted group by group, U groups of each row in flight: two for one row, one for two rows
// (the gated FFN's gate and up: with two, its Qwen3-8B shape took 20.4 µs against 18.5) and for Q5_K, whose groups
// carry 32 more bytes each; acc[k] is this lane's sum for row k, its groups added in ascending order.
template <int T, int R, typename Act>
__device__ __forceinline__ void rows_k_groups_dot(const uint8_t* const (&r)[R], const Act& act, int n_groups,
                                                  int lane, bool& waiting, float (&acc)[R]) {
    constexpr int U = T == kQ5_K || R == 2 ? 1 : 2;
    const int g = lane & 3;  // every group of this lane is group g of its super-block
#pragma unroll
    for (int k = 0; k < R; ++k) acc[k] = 0.0f;
    for (int gi = lane; gi < n_groups; gi += 32 * U) {
        KGroup<T> w[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (gi + 32 * u < n_groups)
#pragma unroll
                for (int k = 0; k < R; ++k) load_k_group<T>(r[k], gi + 32 * u, w[u][k]);
        if (waiting) act.ready(), waiting = false;
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (gi + 32 * u < n_groups) {
                ActGroup a;
                act.group(gi + 32 * u, a);
#pragma unroll
                for (int k = 0; k < R; ++k) acc[k] = __fadd_rn(acc[k], k_group_dot<T>(w[u][k], g, a));
            }
    }
}

// The n_rows rows row_of(k), two at a time (lane_rows_dot's contract; n_groups >= 32, so that every lane has a group of
// every row and calls act.ready()).
template <int T, typename RowOf, typename Act, typename Done>
__device__ __forceinline__ void lane_k_groups_dot(const RowOf& row_of, int n_rows, const Act& act, int n_groups,
                                                  int lane, bool early_weights, const Done& done) {
    if (!early_weights) act.ready();
    bool waiting = early_weights;  // act.ready() once this lane's first weights are asked for
    for (int k = 0; k < n_rows; k += 2) {
        if (k + 1 < n_rows) {
            const uint8_t* r[2] = {row_of(k), row_of(k + 1)};
            float acc[2];
            rows_k_groups_dot<T, 2>(r, act, n_groups, lane, waiting, acc);
            done(k, acc[0]);
            done(k + 1, acc[1]);
        } else {
            const uint8_t* r[1] = {row_of(k)};
            float acc[1];
            rows_k_groups_dot<T, 1>(r, act, n_groups, lane, waiting, acc);
            done(k, acc[0]);
        }
    }
    if (waiting) act.ready();
}

// lane_rows_dot's rows of a quantized type T through shared memory, in segments of kStageChunks chunks that
// cp.async copies kStages - 1 segments ahead of the dot products (the rows 16-byte aligned, n_chunks a multiple of 8
// for the 256-value types).
template <int T, typename RowOf, typename Done>
__device__ __forceinline__ void lane_rows_staged(const RowOf& row_of, int n_rows, const BlockQ8_1f* xq,
                                                 int64_t n_chunks, int lane, bool early_weights, const Done& done) {
    __shared__ __align__(16) uint8_t stage[kStageWarps][kStages][kSegmentBytes<T>];
    uint8_t(*buf)[kSegmentBytes<T>] = stage[(threadIdx.x / 32) % kStageWarps];
    const int n_seg = int((n_chunks + kStageChunks - 1) / kStageChunks), total = n_rows * n_seg;
    // Segment q: segment q % n_seg of row q / n_seg, into buffer q % kStages. A group is committed for every q,
    // one past the last included, so that the count of groups in flight says which segment has landed.
    auto ask = [&](int q) {
        if (q < total) {
            const int64_t c0 = int64_t(q % n_seg) * kStageChunks;
            const int seg = int(n_chunks - c0 < kStageChunks ? n_chunks - c0 : kStageChunks);
            const uint8_t* src = row_of(q / n_seg) + chunks_bytes<T>(c0);
            for (int off = lane * 16; off < int(chunks_bytes<T>(seg)); off += 32 * 16)
                copy_16_async(buf[q % kStages] + off, src + off);
        }
        copies_commit();
    };
#pragma unroll
    for (int q = 0; q < kStages - 1; ++q) ask(q);
    if (early_weights) begin_kernel();
    float acc = 0.0f;
    for (int q = 0, i = 0; q < total; ++q) {  // i: q's segment within its row
        copies_wait<kStages - 2>();  // segment q has landed (this lane's copies) ...
        __syncwarp();                // ... and every lane's; every lane is done with segment q - 1
        ask(q + kStages - 1);        // into segment q - 1's buffer
        const int64_t c0 = int64_t(i) * kStageChunks;
        const int seg = int(n_chunks - c0 < kStageChunks ? n_chunks - c0 : kStageChunks);
        const uint8_t* b = buf[q % kStages];
        if constexpr (T == kQ6_K) {
            // A segment is 8 super-blocks, one 64-value group per lane: group lane % 4 of super-block lane / 4.
            const int sb = lane >> 2, u = lane & 3;
            if (2 * lane < seg)
                acc = __fadd_rn(acc, q6_k_group_dot(b, 210 * sb, u, xq + c0 + 8 * sb + 4 * (u >> 1)));
        } else {
#pragma unroll 2
            for (int c = lane; c < seg; c += 32) acc = __fadd_rn(acc, chunk_dot<T>(b, c, xq[c0 + c]));
        }
        if (++i == n_seg) {
            done(q / n_seg, acc);
            acc = 0.0f;
            i = 0;
        }
    }
}

// A segment's activations for the Q6_K pairs (lane_row_pair_q6_k), copied once by the whole block, since every warp
// of it reads the same activation row and goes through the same segments. Read where they lie, a lane's four Q8_1
// blocks are 384 bytes from those of the lanes of its neighbouring super-block, which made these loads more of L1's
// work than the weights' (H100, alone, read where they lie against copied: 12288 -> 4096 21.95 -> 20.19 µs,
// 4096 -> 12288 21.06 -> 18.19, 4096 -> 4096 9.62 -> 8.38, the LM head 4096 -> 151936 170.98 -> 168.96). Layout:
// quad m of the segment (its blocks 4m .. 4m + 3, the activations of one half of super-block m / 2) at
// kQ6QuadBytes m, block i's two 16-byte halves of quants at 32 i and 32 i + 16, its header at 128 + 16 i, 32 bytes
// unused. The lanes of a quarter-warp read four quads, both halves (super-blocks 2q, 2q + 1, groups 0-3), which then
// lie in eight different 16-byte bank slots (quads 14 slots apart); the two lanes of a quad read its headers together.
constexpr int kQ6QuadBytes = 224;
constexpr int kQ6ActBytes = kStageChunks / 4 * kQ6QuadBytes;  // a segment's 16 quads
// Piece q of the segment's blocks xq (16 bytes: piece q % 3 of block q / 3, its two halves of quants, then its
// header) to its place in dst, the copies spread over the block's threads.
__device__ __forceinline__ void copy_q6_act_segment(const BlockQ8_1f* xq, int seg, uint8_t* dst) {
    const uint8_t* src = reinterpret_cast<const uint8_t*>(xq);
    for (int q = int(threadIdx.x); q < 3 * seg; q += int(blockDim.x)) {
        const int b = q / 3, r = q - 3 * b, i = b & 3;
        copy_16_async_l1(dst + kQ6QuadBytes * (b >> 2) + (r < 2 ? 32 * i + 16 * r : 128 + 16 * i), src + 16 * q);
    }
}

// Two Q6_K rows of the same width through shared memory, their segments in turn (segment i of row 0, then of row 1),
// so that each lane computes its group of both rows' segment i together, from one load of its activations: half the
// activation loads of lane_rows_staged's one row after the other. Four segments of a warp in shared memory: the next
// pair comes in while a pair is computed; the activations of two segments of the block (copy_q6_act_segment), the
// next one coming in too. Every warp of the block calls this with the same n_chunks and xq, since they wait for each
// other's copies at each segment (a warp past the last row computes some row again and drops it). Each row's sum is
// lane_rows_staged's bit for bit (its groups in the same order, the same arithmetic). Without early_weights the caller
// has waited for the kernels before (begin_kernel).
constexpr int kPairStages = 4;
template <typename RowOf, typename Done>
__device__ __forceinline__ void lane_row_pair_q6_k(const RowOf& row_of, const BlockQ8_1f* xq, int64_t n_chunks,
                                                   int lane, bool early_weights, const Done& done) {
    constexpr int T = kQ6_K;
    __shared__ __align__(16) uint8_t stage[kStageWarps][kPairStages][kSegmentBytes<T>];
    __shared__ __align__(16) uint8_t act[2][kQ6ActBytes];
    uint8_t(*buf)[kSegmentBytes<T>] = stage[(threadIdx.x / 32) % kStageWarps];
    const int n_seg = int((n_chunks + kStageChunks - 1) / kStageChunks);
    const uint8_t* rows[2] = {row_of(0), row_of(1)};
    const auto seg_chunks = [&](int i) {
        const int64_t c0 = int64_t(i) * kStageChunks;
        return int(n_chunks - c0 < kStageChunks ? n_chunks - c0 : kStageChunks);
    };
    // Segment i of both rows into buffers 2 (i % 2) and 2 (i % 2) + 1 and, once the kernels before have ended, its
    // activations into act[i % 2]; one copy group for the three (committed also past the last, so that the count of
    // groups in flight says which segment has landed).
    const auto ask_weights = [&](int i) {
        if (i < n_seg)
            for (int r = 0; r < 2; ++r) {
                const uint8_t* src = rows[r] + chunks_bytes<T>(int64_t(i) * kStageChunks);
                for (int off = lane * 16; off < int(chunks_bytes<T>(seg_chunks(i))); off += 32 * 16)
                    copy_16_async(buf[2 * (i % 2) + r] + off, src + off);
            }
    };
    const auto ask_act = [&](int i) {
        if (i < n_seg) copy_q6_act_segment(xq + int64_t(i) * kStageChunks, seg_chunks(i), act[i % 2]);
    };
    ask_weights(0);
    if (early_weights) begin_kernel();
    ask_act(0);
    copies_commit();
    float acc[2] = {0.0f, 0.0f};
    const int sb = lane >> 2, u = lane & 3;
    for (int i = 0; i < n_seg; ++i) {
        copies_wait<0>();  // segment i has landed (this thread's copies) ...
        __syncthreads();   // ... and every thread's; the block is done with segment i - 1
        ask_weights(i + 1);  // into segment i - 1's buffers
        ask_act(i + 1);
        copies_commit();
        if (2 * lane < seg_chunks(i)) {
            // A segment is 8 super-blocks, one 64-value group per lane: group u of super-block sb, whose activations
            // are quad 2 sb + u / 2, half u % 2.
            const uint8_t* quad = act[i % 2] + kQ6QuadBytes * (2 * sb + (u >> 1));
            const uint8_t* q[4] = {quad + 16 * (u & 1), quad + 32 + 16 * (u & 1), quad + 64 + 16 * (u & 1),
                                   quad + 96 + 16 * (u & 1)};
            const uint8_t* h[4] = {quad + 128, quad + 144, quad + 160, quad + 176};
            Q6Act x;
            load_q6_k_act(q, h, u & 1, x);
            acc[0] = __fadd_rn(acc[0], q6_k_group_dot(buf[2 * (i % 2)], 210 * sb, u, x));
            acc[1] = __fadd_rn(acc[1], q6_k_group_dot(buf[2 * (i % 2) + 1], 210 * sb, u, x));
        }
    }
    done(0, acc[0]);
    done(1, acc[1]);
}

// Each lane's partial sums of the dot products with x of the n_rows rows row_of(0), row_of(1), ... (of one weight type
// and width): done(k, s) is called in every lane with its partial sum s of row k as soon as the row's last chunk is
// added, for k in order. Quantized types read xq, the cols / 32 Q8_1 blocks of x; float types read x. Every lane adds
// its chunks (values) of a row in ascending order, from 0, whatever the rows around it and wherever the bytes come
// from. The staged copies run ahead across the rows' boundaries, so a warp given several rows keeps loads in flight
// while it computes, from its first segment to its last. With early_weights the first segments are asked for before
// begin_kernel() (row_of reads no memory another kernel writes); without (rows found through ids another kernel wrote),
// after it. Without kStage, rows of types that would be staged are read in place chunk by chunk instead (the same
// values: a lane's chunks in the same order), and the kernel has no shared memory for them: a kernel with the dot
// products of two types stages only one of them. Without kGroups, the caller has found that its rows' width rules
// groups out (groups_width), and the kernel holds no registers for them.
template <int T, bool kStage = true, bool kGroups = true, typename RowOf, typename Done>
__device__ __forceinline__ void lane_rows_dot(const RowOf& row_of, int n_rows, const BlockQ8_1f* xq, const float* x,
                                              int64_t cols, int lane, bool early_weights, const Done& done) {
    if constexpr (is_float_weight(T)) {
        bool vectors = cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
        for (int k = 0; k < n_rows; ++k)
            vectors = vectors && reinterpret_cast<uintptr_t>(row_of(k)) % (4 * sizeof_float_weight<T>()) == 0;
        if (!vectors) {
            begin_kernel();
            // Consecutive lanes read consecutive values: coalesced. Unrolled so several loads are in flight.
            for (int k = 0; k < n_rows; ++k) {
                const uint8_t* row = row_of(k);
                float sum = 0.0f;
#pragma unroll 8
                for (int64_t i = lane; i < cols; i += 32) sum = __fadd_rn(sum, float_weight<T>(row, i) * x[i]);
                done(k, sum);
            }
            return;
        }
        // Lane l takes the 4-value vectors l, l + 32, ... (16 bytes of F32, 8 of F16 or BF16 each), kFloatVectors<T> of
        // them in flight: a router's few rows (128-256 of 2048-2816 values) are read in a few round trips of memory.
        if (!early_weights) begin_kernel();
        bool waiting = early_weights;
        const int64_t n4 = cols / 4;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        for (int k = 0; k < n_rows; ++k) {
            const uint8_t* row = row_of(k);
            float sum = 0.0f;
            for (int64_t v0 = lane; v0 < n4; v0 += 32 * kFloatVectors<T>) {
                float4 w[kFloatVectors<T>];
#pragma unroll
                for (int u = 0; u < kFloatVectors<T>; ++u)
                    if (v0 + 32 * u < n4) w[u] = float_weight_vector<T>(row, v0 + 32 * u);
                if (waiting) begin_kernel(), waiting = false;
#pragma unroll
                for (int u = 0; u < kFloatVectors<T>; ++u)
                    if (v0 + 32 * u < n4) {
                        const float4 a = x4[v0 + 32 * u];
                        sum = __fadd_rn(sum, w[u].x * a.x);
                        sum = __fadd_rn(sum, w[u].y * a.y);
                        sum = __fadd_rn(sum, w[u].z * a.z);
                        sum = __fadd_rn(sum, w[u].w * a.w);
                    }
            }
            done(k, sum);
        }
        if (waiting) begin_kernel();
    } else {
        const int64_t n_chunks = cols / 32;
        if (!early_weights) begin_kernel();
        if constexpr (kGroupsInPlace<T> && kGroups) {  // groups_in_place's test
            constexpr int kAlign = group_row_align(T);
            bool in_place = groups_width(T, cols) && chunks_bytes<T>(n_chunks) % kAlign == 0 &&
                            n_chunks / 2 <= INT32_MAX;
            for (int k = 0; k < n_rows; ++k)
                in_place = in_place && reinterpret_cast<uintptr_t>(row_of(k)) % kAlign == 0;
            if (in_place) {
                lane_k_groups_dot<T>(row_of, n_rows, ActBlocks{xq}, int(n_chunks / 2), lane, early_weights, done);
                return;
            }
        }
        bool aligned = chunks_bytes<T>(n_chunks) % 16 == 0;
        for (int k = 0; k < n_rows; ++k) aligned = aligned && reinterpret_cast<uintptr_t>(row_of(k)) % 16 == 0;
        if (!kStage || !aligned) {
            static_assert(kStage || T != kQ6_K, "Q6_K rows in shared memory take groups, in place chunks");
            begin_kernel();
            for (int k = 0; k < n_rows; ++k) {
                const uint8_t* row = row_of(k);
                float sum = 0.0f;
#pragma unroll 4
                for (int64_t c = lane; c < n_chunks; c += 32)
                    sum = __fadd_rn(sum, chunk_dot<T>(row, c, xq[c]));
                done(k, sum);
            }
            return;
        }
        if constexpr (kStage) lane_rows_staged<T>(row_of, n_rows, xq, n_chunks, lane, early_weights, done);
    }
}

// row . x in every lane of the warp.
template <int T, bool kStage = true, bool kGroups = true>
__device__ __forceinline__ float warp_row_dot(const uint8_t* row, const BlockQ8_1f* xq, const float* x, int64_t cols,
                                              int lane, bool early_weights) {
    float sum = 0.0f;
    lane_rows_dot<T, kStage, kGroups>([&](int) { return row; }, 1, xq, x, cols, lane, early_weights,
                                      [&](int, float s) { sum = warp_sum(s); });
    return sum;
}

}  // namespace zinc::backend::cuda
