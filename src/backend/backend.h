// The interface every backend implements: memory for weights and activations, and the ops the
// forward passes in engine/ are written against. Activations are always f32 matrices of `rows`
// token rows by `cols` values; weights keep the GGUF type they were stored in.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/kv_type.h"
#include "gguf/reader.h"

namespace zinc::backend {

// A weight tensor resident on a backend. `data` is backend memory (host memory for the CPU).
struct Weight {
    gguf::TensorType type = gguf::TensorType::F32;
    int64_t cols = 0;  // ne[0]: the reduction dimension of a matmul
    int64_t rows = 0;  // ne[1] * ne[2] * ne[3]
    const void* data = nullptr;
    std::string name;
    int64_t ne[4] = {0, 1, 1, 1};  // the GGUF extents; ne[2] counts the experts of a 3-D expert tensor
};

// An f32 activation matrix in backend memory: `rows` rows of `cols` contiguous values.
struct Act {
    float* data = nullptr;
    int64_t rows = 0, cols = 0;
    int64_t size() const { return rows * cols; }
};

// One attention layer's cache in backend memory: K and V rows of `width` (= n_head_kv * head_dim) values, stored as
// type_k and type_v (kv_type.h gives their layout). Position p lives in row p of `capacity` rows, or with `ring`, in
// row p % capacity: a sliding-window layer keeps only its window and the micro-batch being written. A paged layer
// (page_rows > 0) is one sequence's view of a pool of `capacity` rows that many sequences share, cut in pages of
// page_rows rows: position p lives in row pages[p / page_rows] * page_rows + p % page_rows, and the sequence holds
// the n_pages * page_rows positions of its page table (engine/page_pool.h keeps the tables).
struct KvLayer {
    void* k = nullptr;
    void* v = nullptr;
    int64_t width = 0, capacity = 0;
    KvType type_k = KvType::f32, type_v = KvType::f32;
    bool ring = false;
    int64_t page_rows = 0, n_pages = 0;
    const int32_t* pages = nullptr;
};

// The page tables of a step's paged caches (Backend::run_step): `stride` entries for each sequence of the step, of
// which its n_pages first are its table; the paged KvLayer views the step's ops are given point into `all`, so that a
// backend that keeps the tables in its own memory finds a view's there.
struct StepPages {
    std::span<const int32_t> all;
    int64_t stride = 0;
};

// The positions a cache holds: its page table's for a paged one, else its rows.
inline int64_t kv_positions(const KvLayer& kv) { return kv.page_rows > 0 ? kv.n_pages * kv.page_rows : kv.capacity; }
// The row that holds position p (p below kv_positions, or any p for a ring).
inline int64_t kv_row(const KvLayer& kv, int64_t p) {
    if (kv.page_rows > 0) return int64_t{kv.pages[p / kv.page_rows]} * kv.page_rows + p % kv.page_rows;
    return kv.ring ? p % kv.capacity : p;
}

// Rows of one sequence in a step of several: rows [first, first + rows) of q and out, at positions pos0, pos0 + 1,
// ... of the cache *kv (written by rope_kv_write, read by attention).
struct AttentionRange {
    int64_t first = 0, rows = 0, pos0 = 0;
    KvLayer* kv = nullptr;
};

// "f32", "f16", "q8_0" (llama.cpp's spelling); parse_kv_type returns false for any other name.
const char* kv_type_name(KvType t);
bool parse_kv_type(std::string_view name, KvType& t);

// An int32 matrix in backend memory (expert ids of MoE routing): `rows` rows of `cols` values.
struct IdAct {
    int32_t* data = nullptr;
    int64_t rows = 0, cols = 0;
};

// Gated delta-net recurrence (Qwen3.5 GDN) dimensions: n_v value heads of d_v values read key/query
// head `h mod n_k` when `tiled` (GGUF order of qwen35), else head `h / (n_v / n_k)` (HF order).
struct DeltaNetParams {
    int n_k = 0, n_v = 0, d_k = 0, d_v = 0;
    bool tiled = true;
    float scale = 1.0f;  // applied to the output (qwen35: 1/sqrt(d_k))
};

// The f32 weights of a gated delta-net layer that its decode step reads besides the input projections
// (Backend::delta_net_step).
struct DeltaNetWeights {
    const Weight* conv = nullptr;     // {K, channels}: the causal conv's filters
    const Weight* dt_bias = nullptr;  // {n_v}
    const Weight* ssm_a = nullptr;    // {n_v}: -exp(A_log)
    const Weight* norm = nullptr;     // {d_v}: the gated RMSNorm's weight, shared by the value heads
};

// The query, key and value pieces of one token's conv row in a delta-net step (n_k d_k, n_k d_k, then the n_v d_v
// value channels), views into it as delta_net_step passes them to delta_net.
struct DeltaNetPieces {
    Act q, k, v;
};
DeltaNetPieces delta_net_pieces(const Act& conv, const DeltaNetParams& p);

enum class MoeActivation {
    swiglu,      // SiLU(gate) * up
    geglu,       // GELU_tanh(gate) * up
    swiglu_oai,  // gpt-oss: g = min(gate, limit), u = clamp(up, -limit, limit), g * sigmoid(alpha * g) * (u + 1)
};

// The expert tensors of one MoE layer. Matrices are 3-D {in, out, n_expert}; either gate and up, or
// gate_up (per expert: n_ff gate rows, then n_ff up rows). Optional (null) F32 extras: per-expert scalars
// {n_expert} multiplying a projection's matmul output (down_scale: gemma4's ffn_down_exps.scale; gate/up
// scales: NVFP4-style conversions; with gate_up, up_scale scales the whole merged output), then per-expert
// biases {out, n_expert} added (gate_up_bias {2*n_ff, n_expert} with gate_up; the down bias before the
// routing weight, as gpt-oss).
struct MoeWeights {
    const Weight *gate = nullptr, *up = nullptr, *gate_up = nullptr, *down = nullptr;
    const Weight *gate_bias = nullptr, *up_bias = nullptr, *gate_up_bias = nullptr, *down_bias = nullptr;
    const Weight *gate_scale = nullptr, *up_scale = nullptr, *down_scale = nullptr;
    MoeActivation act = MoeActivation::swiglu;
    float alpha = 1.702f, limit = 7.0f;  // swiglu_oai only
};

// The activation of a gated FFN (Backend::ffn_gated).
enum class GatedActivation {
    swiglu,  // SiLU(gate) * up, as swiglu()
    geglu,   // GELU_tanh(gate) * up, as geglu()
};

struct RopeParams {
    int n_rot = 0;           // rotated dimensions of each head (the first n_rot)
    bool neox = true;        // pairs (i, i + n_rot/2); otherwise adjacent pairs (2i, 2i+1)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;  // linear position scaling (1/factor)
    // Attention variants and activations for gemma4 / gpt-oss: the defaults keep plain RoPE.
    // Per-pair frequency divisors (GGUF rope_freqs, n_rot/2 f32 values): theta_i = p * omega_i / f_i.
    // Gemma 4's proportional RoPE stores 1 for the rotating pairs and 1e30 for the others.
    const Weight* freq_factors = nullptr;
    // YaRN: pair i uses omega_i * (freq_scale * (1 - r_i) + r_i) with r_i = ext_factor * (1 - clamp((i - yarn_low) /
    // max(0.001, yarn_high - yarn_low), 0, 1)); 0 = off. The correction range is in pair units, computed by the
    // caller (it decides whether to round it, docs/models.md §1.4).
    float ext_factor = 0.0f;
    float yarn_low = 0.0f, yarn_high = 0.0f;
    float mscale = 1.0f;  // multiplies cos and sin (YaRN's attention factor 1 + 0.1 ln(factor))
};

struct AttentionParams {
    int n_head = 0, n_head_kv = 0, head_dim = 0;
    float scale = 1.0f;
    // Attention variants and activations for gemma4 / gpt-oss: the defaults keep plain causal attention.
    int64_t window = 0;             // sliding window: a query at p sees keys at p - window < p_k <= p; 0 = none
    const Weight* sinks = nullptr;  // f32, one logit per query head, in the softmax denominator only (gpt-oss)
    float softcap = 0.0f;           // scores -> softcap * tanh(scores / softcap) after scaling; 0 = off
};

// Which heads Backend::rope_kv_write RMS-normalizes before RoPE, each head on its own: q and k with their weights
// (head_dim f32 values; null: no weight), v without one (Gemma 4).
struct HeadNorms {
    bool q = false, k = false, v = false;
    const Weight* q_weight = nullptr;
    const Weight* k_weight = nullptr;
    float eps = 0.0f;
};

// Every public op checks its arguments once, here in the interface (backend.cpp: shapes, groups, f32 vectors, k
// ranges, cache positions, the consistency of a MoE weight set), and throws std::invalid_argument (std::out_of_range
// for a position past the cache or a token id outside the vocabulary) with a message naming the op and, where there is
// one, the weight. It then calls the backend's implementation, the protected do_<op> of the same arguments, which may
// assume valid arguments and rejects only what the backend itself cannot do (a weight type without a kernel, a head
// wider than its kernels take).
class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // Where the backend's memory lives, for messages ("CPU", "GPU 0 (NVIDIA H200)").
    virtual std::string where() const { return name(); }
    // Bytes the backend can still allocate: free device memory on a GPU, what the operating system can still give
    // without swapping on the CPU (MemAvailable); 0 when the backend cannot say (the sizing backend, which allocates
    // nothing).
    virtual uint64_t free_memory() const { return 0; }
    // Whether load_weight reads its weights from the file's mapping as the model runs or loads (the CPU's: views of
    // the mapping, or copies of the same size made from it at load, docs/architecture.md §4.2), so that reading the
    // file in ahead of time pays; false when they are copied into backend memory.
    virtual bool weights_are_mapped() const { return false; }
    // Whether its cache ops take paged layers (KvLayer::page_rows > 0).
    virtual bool pages_kv() const { return false; }

    // Makes a GGUF tensor usable by the ops. The CPU backend keeps a view into the mapping, a copy repacked into tiles
    // for its matmul kernels, or an aligned copy of a tensor that its file leaves misaligned (§4.2 of
    // docs/architecture.md).
    Weight load_weight(const gguf::TensorInfo& t);
    // Activation and cache memory, zero-filled; owned by the backend until free() or until the backend is destroyed.
    Act alloc(int64_t rows, int64_t cols);
    // `spec` gives the cache's width, capacity, types and ring flag (its pointers are ignored); q8_0 needs a width
    // that is a multiple of 32. The two-argument form is a full-length f32 cache.
    KvLayer alloc_kv(const KvLayer& spec);
    KvLayer alloc_kv(int64_t width, int64_t capacity) { return alloc_kv(KvLayer{nullptr, nullptr, width, capacity}); }
    IdAct alloc_ids(int64_t rows, int64_t cols);
    // Releases what alloc, alloc_kv or alloc_ids returned and resets the handle; views of it become invalid. Freeing
    // an empty handle does nothing; freeing memory this backend did not allocate (a view that does not start it,
    // another backend's) throws std::invalid_argument.
    void free(Act& a);
    void free(KvLayer& kv);
    void free(IdAct& ids);
    // Views of `rows` consecutive rows starting at `row` share the memory of `a`.
    static Act rows_of(const Act& a, int64_t row, int64_t rows) { return {a.data + row * a.cols, rows, a.cols}; }

    void upload(Act& dst, std::span<const float> src);
    void download(const Act& src, std::span<float> dst);

    // out[t] = dequantized row ids[t] of table.
    void get_rows(const Weight& table, std::span<const int32_t> ids, Act& out);
    // out = x / rms(x) * w over each group of `group` values (group = x.cols for a plain norm,
    // head_dim for per-head norms); w (f32, length group) may be null.
    void rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out);
    // out[t][o] = sum_i W[o][i] * x[t][i]
    void matmul(const Weight& w, const Act& x, Act& out);
    // Rotates each head of width head_dim in x in place; pos[t] is the position of row t.
    void rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p);
    void add(const Act& a, const Act& b, Act& out);
    // out = SiLU(gate) * up
    void swiglu(const Act& gate, const Act& up, Act& out);
    // Stores k and v rows (one per token) at cache positions pos0, pos0+1, ..., converted to the cache's types.
    void kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0);
    // Copies `rows` cache rows (K and V, as stored) from rows [src_row, ...) of src to rows [dst_row, ...) of dst:
    // physical rows, whatever the layers' pages; the layers have the same width and types, and the rows do not
    // overlap unless they are the same.
    void kv_copy_rows(const KvLayer& src, int64_t src_row, KvLayer& dst, int64_t dst_row, int64_t rows);
    // Causal attention of q (rows at positions pos0, pos0+1, ...) over cache positions [0, pos0 + q.rows) (those of
    // the window with p.window). A ring cache needs a window, and room for it and q's rows: window + rows - 1 <=
    // capacity.
    void attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out);
    // The rows of several sequences in one op: each range as attention(its rows of q, *kv, pos0, p, its rows of out).
    // The ranges' rows do not overlap.
    void attention(const Act& q, std::span<const AttentionRange> ranges, const AttentionParams& p, Act& out);

    // Recurrent (gated delta-net) ops
    // out[t] = x[t] * sigmoid(gate[t]) element-wise; gate has x's shape, or one column (one gate per row).
    void sigmoid_mul(const Act& x, const Act& gate, Act& out);
    // a = fill value everywhere (resets recurrent state).
    void fill(Act& a, float value);
    // Column gather: src rows are groups of `group` values; from each group, out takes the out.cols /
    // (src.cols / group) values starting at `offset`. group = src.cols: a plain column slice; group =
    // 2*head_dim, offset 0 / head_dim: the query / gate halves of per-head packed [q | gate] rows. out must not
    // be src.
    void slice_groups(const Act& src, int64_t group, int64_t offset, Act& out);
    // out = x / sqrt(sum(x^2) + eps) over each group of `group` values (transformers' l2norm).
    void l2_norm(const Act& x, float eps, int64_t group, Act& out);
    // out = rms_norm(x) * w * SiLU(z) over each group of `group` values; w (f32, length group) shared.
    void gated_rms_norm(const Act& x, const Weight& w, const Act& z, float eps, int64_t group, Act& out);
    // Delta-net gates from the alpha/beta projections (rows of n_v values): beta_out = sigmoid(b),
    // g = softplus(a + dt_bias) * ssm_a (ssm_a = -exp(A_log) < 0, so exp(g) is the decay). dt_bias and
    // ssm_a are f32 {n_v}.
    void delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g,
                         Act& beta_out);
    // Causal depthwise conv over time for the rows of x (tokens in order) with a rolling state of the
    // previous K-1 input rows (state: K-1 rows of x.cols, oldest first; zeros at sequence start):
    // out[t][c] = sum_j w[c][j] * x(t - K + 1 + j)[c], w = {K, channels} f32; SiLU applied when `silu`.
    // The state is updated to the last K-1 inputs. One token (decode) or a whole prompt. out may be x itself but
    // no other view overlapping it; the state overlaps neither.
    void conv1d_causal(const Act& x, Act& state, const Weight& w, bool silu, Act& out);
    // Gated delta rule, token by token. q, k: rows of n_k*d_k; v, out: rows of n_v*d_v; g, beta: rows of n_v.
    // state: n_v rows of d_k*d_v (S[h][i*d_v + j], i key dim, j value dim), updated in place. Per token and
    // value head h (key head kh): S *= exp(g); d = beta * (v - S^T k); S += k d^T; out = scale * S^T q.
    void delta_net(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                   const DeltaNetParams& p, Act& out);
    // The same recurrence in the chunked (WY) form for prefill: chunks of `chunk` tokens handled with
    // matrix products; equal to delta_net up to float rounding.
    void delta_net_chunked(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                           const DeltaNetParams& p, int chunk, Act& out);

    // Mixture-of-experts ops
    // Router: per row of `logits` (rows of n_expert), softmax over all experts, then the k largest
    // (ids[t][0..k) in descending order, weights[t][0..k) their probabilities), renormalized to sum 1
    // when `renormalize` (= softmax over the k selected logits, gpt-oss's top-k-then-softmax). ids and
    // weights have logits.rows rows of k.
    void moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights);
    // out[t] = sum_s weights[t][s] * expert_{ids[t][s]}(x[t]) (summed in slot order) where
    // expert_e(x) = P_down(act(P_gate(x), P_up(x))) and P(x) = scale_e * (W_e x) + bias_e (MoeWeights).
    // x: rows of `in`; out (rows of the down projection's out) is overwritten. The ids live in backend memory, so
    // the backend, not this interface, checks that they are below n_expert.
    void moe_ffn(const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& w, Act& out);

    // Attention variants and activations for gemma4 / gpt-oss.
    // (attention() also honours AttentionParams::window/sinks/softcap, rope() RopeParams::freq_factors and YaRN.)
    // out = GELU_tanh(gate) * up, evaluated in f32 (transformers' gelu_pytorch_tanh).
    void geglu(const Act& gate, const Act& up, Act& out);
    // x[t][i] += b[i] for every row t; b is f32 of length x.cols.
    void add_bias(Act& x, const Weight& b);
    // out = x * s
    void scale(const Act& x, float s, Act& out);
    // x = cap * tanh(x / cap), element-wise (final logit soft-capping); cap > 0.
    void softcap(Act& x, float cap);

    // Fused ops: each is defined as a sequence of the ops above and the base class runs exactly that sequence, so a
    // backend without its own version computes the same values as the ops one by one; a backend's own version (the
    // CUDA backend's for one activation row, where launches dominate) agrees with it up to float rounding. The
    // forward passes call them where their op order is that sequence.
    // out[i] = w[i] x (+ bias[i]) for every i: matmul(*w[i], x, *out[i]), then add_bias(*out[i], *bias[i]) where
    // bias[i] is given, in turn (the Q/K/V projections of one input). bias is empty or has one entry per weight, null
    // for none; a bias is f32 with w[i]->rows values. The outputs overlap neither x nor each other.
    void matmuls(std::span<const Weight* const> w, const Act& x, std::span<Act* const> out,
                 std::span<const Weight* const> bias = {});
    // out = act(gate x) * (up x): matmul(gate, x, out); matmul(up, x, up_tmp); swiglu or geglu(out, up_tmp, out).
    // up_tmp has out's shape and is left unspecified; out and up_tmp overlap neither x nor each other.
    void ffn_gated(const Weight& gate, const Weight& up, const Act& x, GatedActivation act, Act& up_tmp, Act& out);
    // out += w x (+ bias), the residual add of a projection: matmul(w, x, tmp); add_bias(tmp, *bias) when bias is
    // given (f32, w.rows values); add(out, tmp, out). tmp has out's shape and is left unspecified; out overlaps
    // neither x nor tmp, and tmp not x.
    void matmul_add(const Weight& w, const Act& x, Act& tmp, Act& out, const Weight* bias = nullptr);
    // out += rms_norm(x) * w over each row, then out *= s when s != 1 (a post-norm's residual add, and a layer's
    // output scale): rms_norm(x, w, eps, x.cols, x); add(out, x, out); scale(out, s, out) when s != 1. w (f32,
    // x.cols values) may be null; x is left unspecified; out has x's shape and does not overlap it.
    void norm_add(Act& x, const Weight* w, float eps, Act& out, float s = 1.0f);
    // *out[i] = rms_norm(x) * w[i], then times s[i] where s[i] != 1, for each i (several norms of one residual stream:
    // Gemma 4's dense FFN, router and expert inputs): rms_norm(x, w[i], eps, x.cols, *out[i]), then
    // scale(*out[i], s[i], *out[i]) where s[i] != 1, in turn. One output per weight, at least one; w[i] (f32, x.cols
    // values) may be null; s is empty (every scale 1) or has one entry per output. The outputs have x's shape and
    // overlap neither x nor each other.
    void rms_norms(const Act& x, std::span<const Weight* const> w, float eps, std::span<Act* const> out,
                   std::span<const float> s = {});
    // out += a + b * sigmoid(gate), a MoE block's residual add with its gated shared expert (a: the experts' sum, b:
    // the shared expert's output): sigmoid_mul(b, gate, b); add(a, b, a); add(out, a, out). a, b and out have one
    // shape, gate b's shape or one column (one gate per row); a and b are left unspecified; out overlaps neither.
    void shared_expert_add(Act& a, Act& b, const Act& gate, Act& out);
    // shared_expert_add(a, b, gate, out), then h = rms_norm(out) * w over each row: a MoE block's residual add and the
    // next layer's input norm. shared_expert_add(a, b, gate, out); rms_norm(out, w, eps, out.cols, h). w (f32, out.cols
    // values) may be null; h has out's shape and overlaps none of a, b, gate and out.
    void shared_expert_add_norm(Act& a, Act& b, const Act& gate, Act& out, const Weight* w, float eps, Act& h);

    // One token's gated delta-net step (decode), from the layer's input projections qkv (n_k d_k query, n_k d_k key and
    // n_v d_v value channels), z (n_v d_v), a and b (n_v each) to the gated norm before its output projection:
    //   delta_net_gates(a, b, *w.dt_bias, *w.ssm_a, g, beta);
    //   conv1d_causal(qkv, conv_state, *w.conv, true, conv);
    //   l2_norm(qk, eps, p.d_k, qk), qk the first 2 n_k d_k values of conv (the query and key heads);
    //   delta_net(q, k, v, g, beta, state, p, out), q, k and v the consecutive pieces of conv;
    //   gated_rms_norm(out, *w.norm, z, eps, p.d_v, out).
    // conv, g and beta are left as the sequence leaves them. One row; none of the outputs and states (conv, g, beta,
    // out, conv_state, state) overlaps another or an input.
    void delta_net_step(const Act& qkv, const Act& z, const Act& a, const Act& b, const DeltaNetWeights& w, float eps,
                        Act& conv_state, Act& state, const DeltaNetParams& p, Act& conv, Act& g, Act& beta, Act& out);
    // The same for one token of each of several sequences: row t of every Act with conv_states[t] and states[t], as
    // if each row were a step of its own.
    void delta_net_step(const Act& qkv, const Act& z, const Act& a, const Act& b, const DeltaNetWeights& w, float eps,
                        std::span<Act* const> conv_states, std::span<Act* const> states, const DeltaNetParams& p,
                        Act& conv, Act& g, Act& beta, Act& out);

    // The steps from the Q/K/V projections to the cache, for rows at positions pos (pos[t] = pos0 + t), heads of
    // head_dim values: rms_norm(q, norms.q_weight, norms.eps, head_dim, q) if norms.q; the same for k if norms.k, and
    // for v without a weight if norms.v; rope(q, head_dim, pos, rope); rope(k, head_dim, pos, rope);
    // kv_write(kv, k, v, pos0). q, k and v overlap none of the others.
    void rope_kv_write(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim, std::span<const int32_t> pos,
                       const RopeParams& rope, KvLayer& kv, int64_t pos0);
    // The same for the rows of several sequences: each range's rows go to its own cache; the ranges cover q's rows
    // (pos: one per row).
    void rope_kv_write(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim, std::span<const int32_t> pos,
                       const RopeParams& rope, std::span<const AttentionRange> ranges);

    // out[t] = the index of the largest value in row t of x, the first one on ties (as torch.argmax and the
    // greedy sampler), or -1 when the row holds a NaN or an infinity; waits for the result, which is all the host
    // needs of greedy decoding's logits.
    void argmax_rows(const Act& x, std::span<int32_t> out);
    // The k largest values of the last row of x and their indices, ordered by value (descending) and then index
    // (ascending), as the sampler orders candidates; waits for the result. k <= kMaxTopK and k <= x.cols. A NaN or
    // an infinity counts as +infinity, so values[0] is not finite when the row holds one.
    static constexpr int kMaxTopK = 128;
    void top_k_last_row(const Act& x, int k, std::span<int32_t> ids, std::span<float> values);

    // Runs `step`, which queues the ops of one forward pass over the tokens `ids` at positions `pos` and returns its
    // result, and returns that result. A backend may record the ops of a step the first times it sees `shape` and
    // `layout` from `owner` (the caller whose buffers the step uses: a family) and replay the recording for later
    // steps of the same owner, shape and layout instead of calling `step` (the CUDA backend does for single-token
    // steps, and for steps of several rows given a layout, with CUDA graphs). So `step` must only queue ops, and what
    // it queues may depend on the host only through `owner`, `shape`, `layout`, `ids` and `pos`: ops given these ids
    // and positions (get_rows; rope, kv_write and attention at pos[0], or at each row's own position) read them from
    // backend memory that this call fills, and a replay reads the new values. A step of several rows is recorded
    // only with a layout, which says how its rows go to sequences. With paged caches, `pages` are the step's page
    // tables, which a replay reads anew too.
    // A shape with kEagerStep set is never recorded: its step may read results back as it goes (a search for the
    // first layer whose output is not finite).
    static constexpr uint64_t kEagerStep = uint64_t(1) << 63;
    virtual Act run_step(const void* owner, uint64_t shape, std::span<const int32_t> ids,
                         std::span<const int32_t> pos, const std::function<Act()>& step,
                         std::span<const int32_t> layout = {}, StepPages pages = {});
    // The owner of run_step's steps is gone: what was recorded for it points into its buffers, and a later owner at
    // the same address must record its own.
    virtual void forget_steps(const void* owner) { (void)owner; }

    // Side work: the ops queued from begin_side() to end_side() may run beside those queued after end_side(), up to
    // join_side(), after which every op sees their results. The CUDA backend runs them on a second stream in a decode
    // step: a MoE layer's shared expert or dense FFN beside its router and routed experts, whose short kernels, one
    // after another, leave most of the GPU idle. The side ops read only what was computed before begin_side(); the
    // ops between end_side() and join_side() neither write what the side ops read nor read or write what they write.
    // The three calls come in this order, once each per side; a backend that runs its ops in order (the default)
    // runs them as queued, which gives the same values.
    void begin_side();
    void end_side();
    void join_side();

    // Per-op timing (`zinc bench --profile`). While profiling is on, the time of every op is added up under its
    // label: the op's name, and for products with a weight the weight's type and shape. An op built from other ops
    // (a composed default) counts as itself only. take_profile waits for queued work and returns the totals since
    // the last call, labels in the order first seen. A backend that queues its ops times them on the device; recorded
    // steps (run_step) keep their timing points, so a replayed step is timed too.
    struct OpTime {
        std::string label;
        int64_t calls = 0;
        double us = 0;
    };
    void set_profiling(bool on);
    std::vector<OpTime> take_profile();

    // Waits for queued work (no-op on the CPU).
    virtual void synchronize() {}
    // How many times the host has waited for queued work so far (0 on the CPU, which never queues): a decode step
    // should cost exactly one wait, for its result.
    virtual uint64_t host_waits() const { return 0; }

protected:
    // Profiling hooks: an op with `label` starts / ends (outermost ops only), the profiling switch changed, and the
    // (label, µs) of the ops timed since the last call. The defaults time ops on the host, which is right for a backend
    // whose ops run when they are called.
    virtual void op_started(const std::string& label);
    virtual void op_finished();
    virtual void profiling_changed() {}
    virtual std::vector<std::pair<std::string, double>> timed_ops();

    // The side work hooks (begin_side): called in order, so a backend only says where the ops go.
    virtual void side_begun() {}
    virtual void side_ended() {}
    virtual void side_joined() {}
    bool profiling() const { return profiling_; }
    // Forgets side work a step left behind (it threw, or did not join), saying whether there was none; the next step
    // starts without any.
    bool clear_side();

    // How many ops have begun so far: every public op (a composed default's parts too), upload, allocation and free
    // counts one. An op that sees the count one above what it was in the op before knows that nothing came between
    // them (the CUDA backend's rms_norm leaves the Q8_1 form of its row for a matvec right after it).
    uint64_t ops_begun() const { return ops_begun_; }

    // The implementations of the public ops above, called with checked arguments.
    // The backend memory holding t's bytes (t is readable; its data is non-null unless it has no bytes).
    virtual const void* do_load_weight(const gguf::TensorInfo& t) = 0;
    // Memory of the given (non-negative) size.
    virtual Act do_alloc(int64_t rows, int64_t cols) = 0;
    // Allocates spec's two planes (kv_plane_bytes of its types), zero-filled, and returns spec with them.
    virtual KvLayer do_alloc_kv(const KvLayer& spec) = 0;
    virtual IdAct do_alloc_ids(int64_t rows, int64_t cols) = 0;
    // Releases the allocation that starts at `data` (an Act's, an IdAct's, or one of a KvLayer's two); false when
    // the backend has none there.
    virtual bool do_free(const void* data) = 0;
    virtual void do_upload(Act& dst, std::span<const float> src) = 0;
    virtual void do_download(const Act& src, std::span<float> dst) = 0;
    virtual void do_get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) = 0;
    virtual void do_rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) = 0;
    virtual void do_matmul(const Weight& w, const Act& x, Act& out) = 0;
    virtual void do_rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) = 0;
    virtual void do_add(const Act& a, const Act& b, Act& out) = 0;
    virtual void do_swiglu(const Act& gate, const Act& up, Act& out) = 0;
    virtual void do_kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) = 0;
    // By default refused: a backend whose caches are not paged has no sequences to fork yet.
    virtual void do_kv_copy_rows(const KvLayer& src, int64_t src_row, KvLayer& dst, int64_t dst_row, int64_t rows);
    virtual void do_attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p,
                              Act& out) = 0;
    // By default do_attention on each range's rows; a backend overrides it to spread all of them over its threads.
    virtual void do_attention_ranges(const Act& q, std::span<const AttentionRange> ranges, const AttentionParams& p,
                                     Act& out);
    virtual void do_sigmoid_mul(const Act& x, const Act& gate, Act& out) = 0;
    virtual void do_fill(Act& a, float value) = 0;
    virtual void do_slice_groups(const Act& src, int64_t group, int64_t offset, Act& out) = 0;
    virtual void do_l2_norm(const Act& x, float eps, int64_t group, Act& out) = 0;
    virtual void do_gated_rms_norm(const Act& x, const Weight& w, const Act& z, float eps, int64_t group,
                                   Act& out) = 0;
    virtual void do_delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g,
                                    Act& beta_out) = 0;
    virtual void do_conv1d_causal(const Act& x, Act& state, const Weight& w, bool silu, Act& out) = 0;
    virtual void do_delta_net(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                              const DeltaNetParams& p, Act& out) = 0;
    virtual void do_delta_net_chunked(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta,
                                      Act& state, const DeltaNetParams& p, int chunk, Act& out) = 0;
    virtual void do_moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights) = 0;
    virtual void do_moe_ffn(const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& w, Act& out) = 0;
    virtual void do_geglu(const Act& gate, const Act& up, Act& out) = 0;
    virtual void do_add_bias(Act& x, const Weight& b) = 0;
    virtual void do_scale(const Act& x, float s, Act& out) = 0;
    virtual void do_softcap(Act& x, float cap) = 0;
    virtual void do_argmax_rows(const Act& x, std::span<int32_t> out) = 0;
    virtual void do_top_k_last_row(const Act& x, int k, std::span<int32_t> ids, std::span<float> values) = 0;

    // The fused ops' sequences, through the public ops (backend.cpp). A backend overrides them with fused kernels for
    // the cases it has them and calls these for the rest.
    virtual void do_matmuls(std::span<const Weight* const> w, const Act& x, std::span<Act* const> out,
                            std::span<const Weight* const> bias);
    virtual void do_ffn_gated(const Weight& gate, const Weight& up, const Act& x, GatedActivation act, Act& up_tmp,
                              Act& out);
    virtual void do_matmul_add(const Weight& w, const Act& x, Act& tmp, Act& out, const Weight* bias);
    virtual void do_norm_add(Act& x, const Weight* w, float eps, Act& out, float s);
    virtual void do_rms_norms(const Act& x, std::span<const Weight* const> w, float eps, std::span<Act* const> out,
                              std::span<const float> s);
    virtual void do_shared_expert_add(Act& a, Act& b, const Act& gate, Act& out);
    virtual void do_shared_expert_add_norm(Act& a, Act& b, const Act& gate, Act& out, const Weight* w, float eps,
                                           Act& h);
    virtual void do_rope_kv_write(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                                  std::span<const int32_t> pos, const RopeParams& rope, KvLayer& kv, int64_t pos0);
    virtual void do_rope_kv_write_ranges(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                                         std::span<const int32_t> pos, const RopeParams& rope,
                                         std::span<const AttentionRange> ranges);
    virtual void do_delta_net_step(const Act& qkv, const Act& z, const Act& a, const Act& b, const DeltaNetWeights& w,
                                   float eps, std::span<Act* const> conv_states, std::span<Act* const> states,
                                   const DeltaNetParams& p, Act& conv, Act& g, Act& beta, Act& out);

private:
    friend class OpScope;
    bool profiling_ = false;
    enum class Side { none, open, closed };  // no side work; its ops being queued; queued and not yet joined
    Side side_ = Side::none;
    int op_depth_ = 0;  // ops in progress: only the outermost is timed
    uint64_t ops_begun_ = 0;
    std::vector<std::pair<std::string, double>> host_times_;  // the default hooks' timings
    std::string host_label_;
    std::chrono::steady_clock::time_point host_start_;
};

std::unique_ptr<Backend> make_cpu_backend(int n_threads);
// The CUDA backend on GPU `device` (backend/cuda/). In a build without CUDA it throws std::runtime_error saying so.
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace zinc::backend
