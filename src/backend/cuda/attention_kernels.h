// Host-side launchers of the CUDA backend's RoPE and attention kernels (rope.cu, attention.cu), and the index and
// angle logic they share with the host. Plain C++17 for nvcc; each launcher enqueues on `s` and returns
// cudaGetLastError(). The __host__ __device__ functions also compile in plain C++ so tests can check them on a
// machine without a GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/rounded_math.h"
#include "backend/kv_type.h"

namespace zinc::backend::cuda {

// ---------------------------------------------------------------- RoPE

struct RopeArgs {
    int n_rot = 0;
    bool neox = true;
    float theta_scale = 1.0f;              // freq_base^(-2/n_rot), computed on the host as the CPU backend does
    float freq_scale = 1.0f;
    const float* freq_factors = nullptr;  // n_rot/2 divisors (device), or null
    float ext_factor = 0.0f, yarn_low = 0.0f, yarn_high = 0.0f;
    float mscale = 1.0f;
};

// The two elements of head values that pair i rotates: (i, i + half) for NeoX, (2i, 2i + 1) otherwise.
__host__ __device__ inline void rope_pair(int i, int half, bool neox, int* i0, int* i1) {
    *i0 = neox ? i : 2 * i;
    *i1 = neox ? i + half : 2 * i + 1;
}

// The angle of pair i from theta_i = pos * theta_scale^i (that power taken by repeated multiplication, as the
// CPU backend does) and the pair's frequency factor ff (1 when there are none: dividing by 1 is exact): the same
// operations in the same order as the CPU backend's rope, each rounded on its own.
__host__ __device__ inline float rope_angle(float theta_i, float ff, int i, const RopeArgs& a) {
    const float th_ext = div_rn(theta_i, ff);
    float theta = mul_rn(a.freq_scale, th_ext);
    if (a.ext_factor != 0.0f) {
        const float span = sub_rn(a.yarn_high, a.yarn_low);
        const float y = div_rn(sub_rn(float(i), a.yarn_low), 0.001f < span ? span : 0.001f);
        const float ramp = y < 0.0f ? 0.0f : (1.0f < y ? 1.0f : y);
        const float r = mul_rn(a.ext_factor, sub_rn(1.0f, ramp));  // 1: keep the extrapolated angle
        theta = add_rn(mul_rn(theta, sub_rn(1.0f, r)), mul_rn(th_ext, r));
    }
    return theta;
}

// One K or V plane of a cache: `capacity` rows of `width` values of `type` (kv_type.h); position p in row
// p % capacity (p itself in a full-length cache), or in a paged cache where its page table says.
struct CachePlane {
    void* data = nullptr;
    KvType type = KvType::f32;
};

// A row of a step over several sequences (rope_kv_write, and attention over rows of their own): query row `row`, whose
// position the call's positions give, of the cache planes k and v of `capacity` rows (of the types the call's planes
// give), paged by `pages` (device, or null) in pages of page_rows rows. Every byte is a member's, so that equal caches
// upload equal values (CudaBackend::device_step_ints).
struct RowCache {
    void* k = nullptr;
    void* v = nullptr;
    const int32_t* pages = nullptr;
    int64_t capacity = 0;
    int32_t row = 0, page_rows = 0;
};
static_assert(sizeof(RowCache) % 4 == 0, "uploaded as int32 values");

// attention.cu: stores the `rows` rows of k and v (`width` values each) at the cache rows of positions *pos,
// *pos + 1, ... (pos in device memory), converted to the planes' types; through the page table `pages` (device, of
// pages of page_rows rows) when not null.
cudaError_t kv_write(CachePlane k_cache, CachePlane v_cache, int64_t width, int64_t capacity, const int32_t* pages,
                     int64_t page_rows, const float* k, const float* v, int64_t rows, const int32_t* pos,
                     cudaStream_t s);

// rope.cu: rotates the first n_rot values of each head of width head_dim in place; pos: `rows` positions (device).
cudaError_t rope(float* x, int64_t rows, int64_t cols, int head_dim, const int32_t* pos, const RopeArgs& a,
                 cudaStream_t s);

// rope_kv_write.cu: the per-head steps from the Q/K/V projections to the cache (Backend::rope_kv_write) in one
// launch: each head of q, k (and v) RMS-normalized when asked (q and k with their weights, v without), q and k
// rotated, all three written back in place, and k and v stored at the cache rows of positions *kv_pos, *kv_pos + 1, ...
// head_dim % 4 == 0, head_dim <= 512, the rows 16-byte aligned; a q8_0 plane needs head_dim % 32 == 0.
struct HeadArgs {
    float *q = nullptr, *k = nullptr, *v = nullptr;  // rows of n_head (q) or n_head_kv (k, v) heads of head_dim
    int64_t rows = 0;
    int n_head = 0, n_head_kv = 0, head_dim = 0;
    bool norm_q = false, norm_k = false, norm_v = false;
    const float *q_weight = nullptr, *k_weight = nullptr;  // head_dim values each, or null (no weight)
    float eps = 0.0f;
    const int32_t* pos = nullptr;     // RoPE positions, one per row (device)
    const int32_t* kv_pos = nullptr;  // the position whose cache row row 0 goes to (device)
    RopeArgs rope;
    CachePlane k_cache, v_cache;
    int64_t capacity = 0;
    const int32_t* pages = nullptr;  // the caches' page table (device), or null: not paged
    int64_t page_rows = 0;
    // With row_caches (device, one per row), row t goes to row_caches[t]'s cache at position pos[t] instead (k_cache's
    // and v_cache's types; their data, capacity and kv_pos unused).
    const RowCache* row_caches = nullptr;
};
cudaError_t rope_kv_write(const HeadArgs& a, cudaStream_t s);

// ---------------------------------------------------------------- attention

constexpr int kMaxHeadDim = 512;
constexpr int kMaxSplits = 128;           // key splits per query row and head (flash-decoding)
constexpr int64_t kTargetBlocks = 1024;   // below this many (row, head) blocks, decode splits the keys
constexpr int64_t kMinSplitKeys = 128;    // ... but never into splits of fewer keys than this
// The tile kernel's blocks are larger (a group of heads, and K/V tiles in shared memory: about six fit on an SM), so
// its splits aim at one wave of blocks on a large GPU and at least kTileMinSplitKeys keys each; measured on an H200
// (Qwen3-8B, f16 cache), 96 splits beat 128 at 16k and 32k keys, 48 beat 32 and 64 at 4k.
constexpr int64_t kTileTargetBlocks = 768;
constexpr int64_t kTileMinSplitKeys = 96;
// The tensor-core kernel goes through its keys several times faster, so fewer and longer splits pay: on an H200
// (Qwen3-8B, 8 blocks of 4 heads per split) 16 splits did best at 4k and 16k keys, 32 at 32k.
constexpr int64_t kMmaTargetBlocks = 256;
constexpr int64_t kMmaMinSplitKeys = 256;
constexpr int kTileRows = 8;              // query rows per block of the prefill kernel (a warp each)
constexpr int kTileFloats = 4096;         // K (and as many V) values per shared-memory tile of that kernel

// Cache positions [begin, end).
struct KeyRange {
    int64_t begin = 0, end = 0;
};

// The keys a query at position pq sees: causal, and with a window W only itself and the W - 1 positions before.
__host__ __device__ inline KeyRange visible_keys(int64_t pq, int64_t window) {
    const int64_t first = pq - window + 1;
    return {window > 0 && first > 0 ? first : 0, pq + 1};
}

// Piece `split` of r cut into pieces of `chunk` keys from its start (empty past the end).
__host__ __device__ inline KeyRange split_keys(KeyRange r, int64_t chunk, int split) {
    const int64_t b = r.begin + int64_t(split) * chunk, e = b + chunk;
    return {b < r.end ? b : r.end, e < r.end ? e : r.end};
}

// The length of the pieces when the last query row's visible keys `last` (the most of any row) are cut into n_split;
// every row cuts its own keys into pieces of this length, the trailing ones possibly empty.
__host__ __device__ inline int64_t split_chunk(KeyRange last, int n_split) {
    return (last.end - last.begin + n_split - 1) / n_split;
}

// How one attention call spreads the work. Row tiles: blocks of kTileRows query rows of one head that share the
// K/V rows they read through shared memory (prefill). Otherwise a block per (row, head, key split), every query row
// cutting its visible keys into n_split pieces of equal length (decode and short prefill chunks); the kernel sizes
// the pieces from the positions in device memory.
struct AttentionPlan {
    bool flash = false;  // the prefill kernel on tensor cores (attention_flash.cu), blocks of `heads` query heads
    bool row_tiles = false;
    int n_split = 1;
    int heads = 1;     // query heads of one KV head per block: > 1 (without mma or flash) the tile kernel, 1 the keys
                       // kernel
    bool mma = false;  // the tensor-core kernel (attention_mma.cu), blocks of `heads` query heads
};

// Values of a head each lane of a keys-kernel warp holds: the least power of two with 32 of them covering head_dim.
inline int values_per_lane(int head_dim) {
    int p = 1;
    while (32 * p < head_dim) p *= 2;
    return p;
}

// Key buckets from which decode reads the cache through the tile kernel: K/V tiles copied into shared memory in the
// background, each row read once for all the query heads of its KV head. Below, the keys kernel's warps are quicker.
constexpr int64_t kTileMinKeys = 1024;

// The query heads a tile-kernel or tensor-core block serves: the most of 8, 4, 2, 1 that divides the heads sharing a
// KV head and keeps their outputs within 16 a thread of the tile kernel (heads * head_dim <= 2048).
inline int heads_per_block(int n_head, int n_head_kv, int head_dim) {
    const int group = n_head / n_head_kv;
    int g = 8;
    while (g > 1 && (group % g != 0 || g * head_dim > 2048)) g /= 2;
    return g;
}

// The key count the plan is made for: the last row's visible keys rounded up to a power of two (at least
// kMinSplitKeys), so that the plan, and with it a recorded decode step, stays the same while the context grows
// within a bucket (CudaBackend::run_step keys its recordings on this bucket). A window caps the keys, and rounding
// up commutes with that cap, so the bucket of a row's position decides the plan of every layer.
inline int64_t key_bucket(int64_t keys) {
    int64_t b = kMinSplitKeys;
    while (b < keys) b *= 2;
    return b;
}

// Whether the tensor-core kernel takes a cache: f16 K and V, head_dim 64, 128 or 256.
inline bool mma_cache(KvType type_k, KvType type_v, int head_dim) {
    return type_k == KvType::f16 && type_v == KvType::f16 && (head_dim == 64 || head_dim == 128 || head_dim == 256);
}

// Prefill chunks of at least this many rows over an f16 cache take the flash kernel (flash_cache).
constexpr int64_t kFlashMinRows = 32;

// Whether the flash kernel takes a cache: f16 K and V, head_dim 64, 128, 256 or 512.
inline bool flash_cache(KvType type_k, KvType type_v, int head_dim) {
    return type_k == KvType::f16 && type_v == KvType::f16 &&
           (head_dim == 64 || head_dim == 128 || head_dim == 256 || head_dim == 512);
}

// The flash kernel for prefill chunks of kFlashMinRows rows or more where the cache allows it (one split: its blocks
// of 64 rows fill the GPU). Otherwise row tiles when the (row, head) pairs alone fill the GPU and make a few tiles per
// head; otherwise the tensor-core kernel where the cache allows it, else the keys kernel and, at long contexts, the
// tile kernel. Splits only when the blocks would leave the GPU idle, and never into pieces below the kernel's least
// number of keys of the bucket. plan_keys is all but the first choice, for rows of which the last is at last_pos; with
// own_rows each row reads a cache of its own (AttentionArgs::row_caches) and the row tiles, which share keys between
// rows, are out.
inline AttentionPlan plan_keys(int64_t n_q, int n_head, int n_head_kv, int head_dim, int64_t last_pos, int64_t window,
                               KvType type_k, KvType type_v, bool own_rows) {
    const KeyRange last = visible_keys(last_pos, window);
    const int64_t keys = key_bucket(last.end - last.begin);
    const bool mma = mma_cache(type_k, type_v, head_dim);
    const int heads = mma || keys >= kTileMinKeys ? heads_per_block(n_head, n_head_kv, head_dim) : 1;
    const int64_t blocks = n_q * (n_head / heads);
    const int64_t target = mma ? kMmaTargetBlocks : (heads > 1 ? kTileTargetBlocks : kTargetBlocks);
    const int64_t least = mma ? kMmaMinSplitKeys : (heads > 1 ? kTileMinSplitKeys : kMinSplitKeys);
    int64_t n = 1;
    if (blocks > 0 && blocks < target) {
        const int64_t want = (target + blocks - 1) / blocks, most = keys / least;
        n = want < most ? want : most;
    }
    AttentionPlan p;
    p.heads = heads;
    p.mma = mma;
    // The tensor-core kernel serves prefill too: on an H200 (Qwen3-8B, a 512-token prompt) its 36 layers took 4.5 ms
    // against the row tiles' 28 ms, each query reading its keys from L2.
    p.row_tiles = !own_rows && !mma && n_q * n_head >= kTargetBlocks && n_q >= 2 * kTileRows;
    p.n_split = p.row_tiles ? 1 : int(n < 1 ? 1 : (n > kMaxSplits ? kMaxSplits : n));
    return p;
}

inline AttentionPlan plan_attention(int64_t n_q, int n_head, int n_head_kv, int head_dim, int64_t pos0,
                                    int64_t window, KvType type_k = KvType::f32, KvType type_v = KvType::f32) {
    if (n_q >= kFlashMinRows && flash_cache(type_k, type_v, head_dim)) {
        AttentionPlan p;
        p.flash = true;
        p.heads = heads_per_block(n_head, n_head_kv, head_dim);
        return p;
    }
    return plan_keys(n_q, n_head, n_head_kv, head_dim, pos0 + n_q - 1, window, type_k, type_v, false);
}

// The position by which rows of caches of their own, the furthest at `last`, split their keys: the end of last's key
// bucket, so that the pieces keep their length while the sequences grow within the bucket (which a recorded step of
// several sequences keys on), and still cover the keys of every row.
inline int64_t rows_split_pos(int64_t last) { return key_bucket(last + 1) - 1; }

// The plan of n_q rows each of a cache of its own (AttentionArgs::row_caches), the last of them at last_pos.
inline AttentionPlan plan_rows(int64_t n_q, int n_head, int n_head_kv, int head_dim, int64_t last_pos,
                               int64_t window, KvType type_k, KvType type_v) {
    return plan_keys(n_q, n_head, n_head_kv, head_dim, last_pos, window, type_k, type_v, true);
}

struct AttentionArgs {
    const float* q = nullptr;  // n_q rows of n_head * head_dim, at positions *pos, *pos + 1, ...
    CachePlane k, v;           // cache rows of kv_width = n_head_kv * head_dim
    int64_t capacity = 0;      // cache rows; position p is in row p % capacity, or paged:
    const int32_t* pages = nullptr;  // the page table (device) of pages of page_rows rows
    int64_t page_rows = 0;
    float* out = nullptr;           // q's shape
    const float* sinks = nullptr;   // one logit per query head (device), or null
    const int32_t* pos = nullptr;   // the position of query row 0 (device)
    int64_t n_q = 0, kv_width = 0, window = 0;
    int n_head = 0, n_head_kv = 0, head_dim = 0;
    float scale = 1.0f, softcap = 0.0f;
    // With row_caches (device, one per query row t: the plan of plan_rows), row t is q's and out's row
    // row_caches[t].row and reads its own cache at position pos[row_caches[t].row] (pos then holds the positions of
    // all the step's rows; k's and v's types; their data, capacity and pages unused). The keys are split by last_pos,
    // at least the largest of those positions: rows_split_pos of it.
    const RowCache* row_caches = nullptr;
    int64_t last_pos = 0;
};

// The scratch floats attention() needs for a plan: the partial results of the key splits (none for one split).
inline size_t attention_partial_floats(const AttentionPlan& p, int64_t n_q, int n_head, int head_dim) {
    return p.n_split > 1 ? size_t(n_q) * size_t(n_head) * size_t(p.n_split) * size_t(head_dim + 2) : 0;
}

// attention_flash.cu: the kernel of plans with `flash`; attention() calls it.
cudaError_t attention_flash(const AttentionArgs& a, const AttentionPlan& p, cudaStream_t s);

// attention_mma.cu: the tensor-core kernel of plans with `mma` (not row tiles); attention() calls it.
cudaError_t attention_mma(const AttentionArgs& a, const AttentionPlan& p, float* partials, cudaStream_t s);

// attention.cu: causal GQA attention (sliding window, sinks, soft-cap as AttentionParams); head_dim <= kMaxHeadDim,
// n_q * n_head < 2^31; `partials`: attention_partial_floats(...) floats of device scratch.
cudaError_t attention(const AttentionArgs& a, const AttentionPlan& plan, float* partials, cudaStream_t s);

}  // namespace zinc::backend::cuda
