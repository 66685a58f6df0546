// A family's tensors are declared once, in its model file, as a function of its hyper-parameters: each tensor's
// name, extents and what it holds. The one declaration serves every use: the engine binds a file's tensors to a
// backend through it (which the memory plan does on the sizing backend), `zinc synth`, the Brown model's writer and
// the fuzz seeds list the tensors to write from it.
//
// A declaration is a template over the slot type W: backend::Weight when tensors are bound to a backend, Unbound
// when they are only listed. The model layer thus declares the per-family weight structs without knowing the
// backends.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace zinc::model {

// What a tensor holds; decides the checks a loader applies and how a synthetic file initialises it.
enum class TensorRole {
    Embedding,   // token_embd.weight
    Output,      // output.weight (LM head)
    Matrix,      // any other 2-D/3-D projection weight (attention, FFN, experts, delta-net projections)
    Router,      // ffn_gate_inp.weight (MoE router, kept F32 by converters)
    Vector,      // 1-D weight used as a dot product (ffn_gate_inp_shexp)
    Norm,        // RMSNorm weight (a plain multiplier, near 1)
    Bias,        // additive bias
    Scale,       // multiplicative scale that is 1 in an untrained model (layer_output_scale, router/expert scales)
    SsmA,        // qwen35 ssm_a = -exp(A_log) (negative)
    SsmDtBias,   // qwen35 ssm_dt.bias
    SsmConv,     // qwen35 ssm_conv1d.weight (depthwise conv taps)
    Sinks,       // gpt-oss attention sinks
    RopeFreqs,   // gemma4 rope_freqs.weight (1 for rotated pairs, 1e30 for the rest)
    RopeFactorsLong, RopeFactorsShort,  // phi3's LongRoPE frequency divisors (rope_factors_long / _short.weight)
};

// Whether the forward pass reads a tensor of this role as plain f32 values (norm weights, biases, scales, ...);
// the others go through matmuls and may have any type.
inline bool role_is_f32(TensorRole r) {
    return r != TensorRole::Embedding && r != TensorRole::Output && r != TensorRole::Matrix &&
           r != TensorRole::Router && r != TensorRole::Vector;
}

struct TensorSpec {
    std::string name;
    std::vector<int64_t> ne;  // extents in ggml order; a file's tensor may add trailing extents of 1
    TensorRole role = TensorRole::Matrix;
    int layer = -1;           // blk index, -1 for model-level tensors
};

// Where a declaration puts its tensors.
template <class W>
class TensorBinder {
public:
    virtual ~TensorBinder() = default;
    // Whether the model has tensor `name`, for tensors that are optional or come in alternative layouts. A model
    // that is being written has it when `written` says so: what the family's released files hold.
    virtual bool has(const std::string& name, bool written) const = 0;
    // Binds the tensor spec.name, which the model must have with extents spec.ne, to `slot`.
    virtual void bind(W& slot, const TensorSpec& spec) = 0;
    // Binds the 2-D tensor spec.name, whose rows are parts stacked one after another (part i: rows[i] rows, the rows
    // summing to spec.ne[1]), each part to its own slot as if it were a tensor of its own: a fused projection (phi3's
    // attn_qkv, its ffn_up of gate rows then up rows) becomes the separate projections the blocks take. The file
    // keeps one tensor; listed, it is one tensor.
    virtual void bind_parts(std::span<W* const> slots, const TensorSpec& spec, std::span<const int64_t> rows) = 0;
    // Stops the declaration: the model's tensors contradict its hyper-parameters. The message names the model.
    [[noreturn]] virtual void fail(const std::string& what) const = 0;
};

// The slot type when tensors are only listed.
struct Unbound {};

// Declares the tensors of one layer ("blk.<layer>.<name>") or, for layer -1, of the model.
template <class W>
class Declare {
public:
    Declare(TensorBinder<W>& b, int layer)
        : b_(b), layer_(layer), prefix_(layer < 0 ? std::string() : "blk." + std::to_string(layer) + ".") {}

    // A tensor the model must have.
    void tensor(W& slot, const std::string& name, std::vector<int64_t> ne, TensorRole role) {
        b_.bind(slot, TensorSpec{prefix_ + name, std::move(ne), role, layer_});
    }
    // A tensor of stacked parts, each bound to its slot (TensorBinder::bind_parts).
    void parts(std::initializer_list<W*> slots, const std::string& name, std::vector<int64_t> ne, TensorRole role,
               std::initializer_list<int64_t> rows) {
        b_.bind_parts(std::span<W* const>(slots.begin(), slots.size()),
                      TensorSpec{prefix_ + name, std::move(ne), role, layer_},
                      std::span<const int64_t>(rows.begin(), rows.size()));
    }
    // A tensor the model may have (written: whether released files have it); returns whether it was bound.
    bool optional(W& slot, const std::string& name, std::vector<int64_t> ne, TensorRole role, bool written) {
        if (!has(name, written)) return false;
        tensor(slot, name, std::move(ne), role);
        return true;
    }
    bool has(const std::string& name, bool written) const { return b_.has(prefix_ + name, written); }

private:
    TensorBinder<W>& b_;
    int layer_;
    std::string prefix_;
};

// The embedding table and the head every family has. Without output.weight the head is the embedding table
// itself (tied): the slot is a copy of token_embd's, so a backend holds the table once.
template <class W>
struct Head {
    W token_embd, output_norm, output;
};

template <class W>
void declare_head(TensorBinder<W>& b, int64_t n_embd, int64_t n_vocab, Head<W>& h) {
    Declare<W> d(b, -1);
    d.tensor(h.token_embd, "token_embd.weight", {n_embd, n_vocab}, TensorRole::Embedding);
    d.tensor(h.output_norm, "output_norm.weight", {n_embd}, TensorRole::Norm);
    if (!d.optional(h.output, "output.weight", {n_embd, n_vocab}, TensorRole::Output, true)) h.output = h.token_embd;
}

// The routed experts of an MoE layer: 3-D tensors {in, out, n_expert}; gate and up, or the merged gate_up (per
// expert n_ff gate rows, then n_ff up rows); optional per-expert scales {n_expert}; biases {out, n_expert} where the
// family has them.
template <class W>
struct Experts {
    bool merged = false, has_gate_scale = false, has_up_scale = false, has_down_scale = false, biased = false;
    W gate_up, gate, up, down, gate_scale, up_scale, down_scale, gate_up_bias, gate_bias, up_bias, down_bias;
};

// What a family's released files hold of the expert tensors that may be absent.
struct ExpertLayout {
    bool merged = false;      // ffn_gate_up_exps rather than ffn_gate_exps + ffn_up_exps
    bool down_scale = false;  // ffn_down_exps.scale
    bool biases = false;      // the family requires a bias on every expert projection
};

template <class W>
void declare_experts(Declare<W>& d, int64_t n_embd, int64_t n_ff, int64_t n_expert, ExpertLayout layout,
                     Experts<W>& e) {
    using R = TensorRole;
    const int64_t E = n_embd, F = n_ff, X = n_expert;
    e.merged = d.optional(e.gate_up, "ffn_gate_up_exps.weight", {E, 2 * F, X}, R::Matrix, layout.merged);
    if (!e.merged) {
        d.tensor(e.gate, "ffn_gate_exps.weight", {E, F, X}, R::Matrix);
        d.tensor(e.up, "ffn_up_exps.weight", {E, F, X}, R::Matrix);
        e.has_gate_scale = d.optional(e.gate_scale, "ffn_gate_exps.scale", {X}, R::Scale, false);
    }
    e.has_up_scale = d.optional(e.up_scale, "ffn_up_exps.scale", {X}, R::Scale, false);
    d.tensor(e.down, "ffn_down_exps.weight", {F, E, X}, R::Matrix);
    e.has_down_scale = d.optional(e.down_scale, "ffn_down_exps.scale", {X}, R::Scale, layout.down_scale);
    e.biased = layout.biases;
    if (!e.biased) return;
    if (e.merged) {
        d.tensor(e.gate_up_bias, "ffn_gate_up_exps.bias", {2 * F, X}, R::Bias);
    } else {
        d.tensor(e.gate_bias, "ffn_gate_exps.bias", {F, X}, R::Bias);
        d.tensor(e.up_bias, "ffn_up_exps.bias", {F, X}, R::Bias);
    }
    d.tensor(e.down_bias, "ffn_down_exps.bias", {E, X}, R::Bias);
}

}  // namespace zinc::model
