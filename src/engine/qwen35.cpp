// Forward pass of qwen35 / qwen35moe; docs/models.md §4.4 and §5.4 give the op order.
#include "engine/qwen35.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/tensor_loader.h"

namespace zinc::engine {
namespace {

// Micro-batches of more than one token run the delta rule in chunks of this many tokens (the WY form).
constexpr int kDeltaNetChunk = 64;

}  // namespace

Qwen35::Qwen35(const gguf::Model& m, backend::Backend& be, ContextSize size)
    : Family(be, m, size), p_(model::read_qwen35_params(model::Metadata(m))) {
    TensorLoader loader(m, be);
    model::declare_tensors(loader, p_, w_);
    const int64_t E = p_.n_embd, q_dim = int64_t{p_.n_head} * p_.head_dim, kv_dim = int64_t{p_.n_head_kv} * p_.head_dim;
    bool any_recurrent = false, any_attention = false, any_moe = false;
    int64_t ff = 1;
    for (int l = 0; l < p_.n_layer; ++l) {
        const Layer& L = w_.layers[l];
        LayerState s;
        if (p_.recurrent[l]) {
            for (int q = 0; q < n_seq(); ++q) {
                s.conv.push_back(be.alloc(p_.ssm_conv_kernel - 1, p_.conv_dim()));
                s.recurrence.push_back(be.alloc(p_.ssm_n_v, int64_t{p_.ssm_d_state} * p_.ssm_d_state));
            }
            any_recurrent = true;
        } else {
            s.kv = kv_cache(kv_dim);
            any_attention = true;
        }
        state_.push_back(s);
        any_moe = any_moe || L.moe;
        ff = std::max(ff, L.moe ? (L.shared_expert ? L.gate_shexp.rows : 1) : L.ffn_gate.rows);
    }
    x_ = scratch(E);
    h_ = scratch(E);
    y_ = scratch(E);
    if (any_attention) {
        qg_ = scratch(2 * q_dim);
        q_ = scratch(q_dim);
        gate_ = scratch(q_dim);
        k_ = scratch(kv_dim);
        v_ = scratch(kv_dim);
        attn_ = scratch(q_dim);
    }
    if (any_recurrent) {
        qkv_ = scratch(p_.conv_dim());
        conv_ = scratch(p_.conv_dim());
        z_ = scratch(p_.value_dim());
        a_ = scratch(p_.ssm_n_v);
        b_ = scratch(p_.ssm_n_v);
        g_ = scratch(p_.ssm_n_v);
        beta_ = scratch(p_.ssm_n_v);
        dq_ = scratch(p_.key_dim());
        dk_ = scratch(p_.key_dim());
        dv_ = scratch(p_.value_dim());
        o_ = scratch(p_.value_dim());
    }
    ff_gate_ = scratch(ff);
    ff_up_ = scratch(ff);
    if (any_moe) {
        router_ = scratch(p_.n_expert);
        route_w_ = scratch(p_.n_expert_used);
        route_ids_ = scratch_ids(p_.n_expert_used);
        moe_out_ = scratch(E);
        sh_gate_ = scratch(1);
    }
}

// x += ssm_out · GatedRMSNorm(DeltaRule(L2Norm(q), L2Norm(k), v)) with q, k, v from the causal conv of attn_qkv·h.
void Qwen35::delta_net_layer(const Layer& L, int l) {
    auto h = rows(h_), y = rows(y_), x = rows(x_), qkv = rows(qkv_), conv = rows(conv_), z = rows(z_);
    auto a = rows(a_), b = rows(b_), g = rows(g_), beta = rows(beta_);
    auto q = rows(dq_), k = rows(dk_), v = rows(dv_), o = rows(o_);
    const int64_t key_dim = p_.key_dim(), conv_dim = p_.conv_dim();
    LayerState& s = state_[l];
    const backend::Weight* in_w[] = {&L.attn_qkv, &L.attn_gate, &L.ssm_beta, &L.ssm_alpha};
    backend::Act* in[] = {&qkv, &z, &b, &a};
    be_.matmuls(in_w, h, in);
    backend::DeltaNetParams dp;
    dp.n_k = p_.ssm_n_k;
    dp.n_v = p_.ssm_n_v;
    dp.d_k = dp.d_v = p_.ssm_d_state;
    dp.tiled = true;  // GGUF value-head order (docs/models.md §4.3)
    dp.scale = 1.0f / std::sqrt(float(p_.ssm_d_state));
    const backend::DeltaNetWeights dw{&L.ssm_conv1d, &L.ssm_dt, &L.ssm_a, &L.ssm_norm};
    if (ranges().size() > 1 && int64_t(ranges().size()) == qkv.rows) {
        // One token of each of several sequences (decode): one step over all of them, each row on its own state.
        std::vector<backend::Act*> conv_states, states;
        for (const Range& r : ranges()) {
            conv_states.push_back(&s.conv[size_t(r.seq)]);
            states.push_back(&s.recurrence[size_t(r.seq)]);
        }
        be_.delta_net_step(qkv, z, a, b, dw, p_.rms_eps, conv_states, states, dp, conv, g, beta, o);
        be_.matmul_add(L.ssm_out, o, y, x);
        return;
    }
    // Otherwise the recurrence runs a sequence at a time, each on its own state.
    for (const Range& r : ranges()) {
        const auto part = [&](const backend::Act& buf) { return backend::Backend::rows_of(buf, r.first, r.rows); };
        backend::Act rqkv = part(qkv), rz = part(z), ra = part(a), rb = part(b), rg = part(g), rbeta = part(beta);
        backend::Act rconv = part(conv), rq = part(q), rk = part(k), rv = part(v), ro = part(o);
        backend::Act &conv_state = s.conv[size_t(r.seq)], &state = s.recurrence[size_t(r.seq)];
        if (r.rows == 1) {
            // One token (decode): the gates, the conv, the q/k norms, the recurrence and the gated norm as one op,
            // whose q, k and v are consecutive pieces of the conv's row, used in place.
            be_.delta_net_step(rqkv, rz, ra, rb, dw, p_.rms_eps, conv_state, state, dp, rconv, rg, rbeta, ro);
        } else {
            be_.delta_net_gates(ra, rb, L.ssm_dt, L.ssm_a, rg, rbeta);
            be_.conv1d_causal(rqkv, conv_state, L.ssm_conv1d, true, rconv);
            be_.slice_groups(rconv, conv_dim, 0, rq);
            be_.slice_groups(rconv, conv_dim, key_dim, rk);
            be_.slice_groups(rconv, conv_dim, 2 * key_dim, rv);
            be_.l2_norm(rq, p_.rms_eps, p_.ssm_d_state, rq);
            be_.l2_norm(rk, p_.rms_eps, p_.ssm_d_state, rk);
            be_.delta_net_chunked(rq, rk, rv, rg, rbeta, state, dp, kDeltaNetChunk, ro);
            be_.gated_rms_norm(ro, L.ssm_norm, rz, p_.rms_eps, p_.ssm_d_state, ro);
        }
    }
    be_.matmul_add(L.ssm_out, o, y, x);
}

// x += attn_output · (Attention(RoPE(QNorm(q)), RoPE(KNorm(k)), v) ⊙ σ(gate)), q and gate packed per head in attn_q.
void Qwen35::attention_layer(const Layer& L, int l) {
    auto h = rows(h_), y = rows(y_), x = rows(x_);
    auto qg = rows(qg_), q = rows(q_), gate = rows(gate_), k = rows(k_), v = rows(v_), attn = rows(attn_);
    const int hd = p_.head_dim;
    const backend::Weight* qkv_w[] = {&L.attn_q, &L.attn_k, &L.attn_v};
    backend::Act* qkv[] = {&qg, &k, &v};
    be_.matmuls(qkv_w, h, qkv);
    be_.slice_groups(qg, 2 * hd, 0, q);
    be_.slice_groups(qg, 2 * hd, hd, gate);
    // IMRoPE on text = NeoX with position p on the first n_rot dims (checked when reading the sections).
    backend::RopeParams rope;
    rope.n_rot = p_.n_rot;
    rope.neox = true;
    rope.freq_base = p_.rope_base;
    const backend::HeadNorms norms{true, true, false, &L.attn_q_norm, &L.attn_k_norm, p_.rms_eps};
    backend::AttentionParams ap;
    ap.n_head = p_.n_head;
    ap.n_head_kv = p_.n_head_kv;
    ap.head_dim = hd;
    ap.scale = 1.0f / std::sqrt(float(hd));
    attend(state_[l].kv, q, k, v, norms, hd, rope, ap, attn);
    be_.sigmoid_mul(attn, gate, attn);
    be_.matmul_add(L.attn_output, attn, y, x);
}

void Qwen35::ffn(const Layer& L, const backend::Weight* next_norm) {
    auto h = rows(h_), y = rows(y_), x = rows(x_);
    be_.rms_norm(x, &L.post_attention_norm, p_.rms_eps, p_.n_embd, h);
    if (!L.moe) {
        auto gate = rows(ff_gate_, L.ffn_gate.rows), up = rows(ff_up_, L.ffn_gate.rows);
        be_.ffn_gated(L.ffn_gate, L.ffn_up, h, backend::GatedActivation::swiglu, up, gate);
        be_.matmul_add(L.ffn_down, gate, y, x);
    } else {
        auto router = rows(router_), rw = rows(route_w_), moe = rows(moe_out_), sg = rows(sh_gate_);
        auto ids = rows(route_ids_);
        if (L.shared_expert) {  // the shared expert (y) beside the router and the routed experts, which read h too
            auto gate = rows(ff_gate_, L.gate_shexp.rows), up = rows(ff_up_, L.gate_shexp.rows);
            be_.begin_side();
            be_.ffn_gated(L.gate_shexp, L.up_shexp, h, backend::GatedActivation::swiglu, up, gate);
            be_.matmul(L.down_shexp, gate, y);
            be_.end_side();
            const backend::Weight* gates_w[] = {&L.gate_inp, &L.gate_inp_shexp};  // the router and the shared gate
            backend::Act* gates[] = {&router, &sg};
            be_.matmuls(gates_w, h, gates);
        } else {
            be_.matmul(L.gate_inp, h, router);
        }
        be_.moe_route(router, p_.n_expert_used, true, ids, rw);
        be_.moe_ffn(h, ids, rw, moe_weights(L.experts, backend::MoeActivation::swiglu), moe);
        if (L.shared_expert) {
            be_.join_side();
            if (next_norm) {  // x += moe + y * sigmoid(sg), and the next layer's input h = rms_norm(x) * w
                be_.shared_expert_add_norm(moe, y, sg, x, next_norm, p_.rms_eps, h);
                return;
            }
            be_.shared_expert_add(moe, y, sg, x);
        } else {
            be_.add(x, moe, x);
        }
    }
    if (next_norm) be_.rms_norm(x, next_norm, p_.rms_eps, p_.n_embd, h);
}

// The conv window and the delta rule's state, copied exactly (x · 1).
void Qwen35::fork_state(int from, int to) {
    for (LayerState& s : state_)
        for (std::vector<backend::Act>* part : {&s.conv, &s.recurrence})
            if (!part->empty()) be_.scale((*part)[size_t(from)], 1.0f, (*part)[size_t(to)]);
}

backend::Act Qwen35::compute(std::span<const int32_t> ids) {
    // A sequence that starts afresh starts from zero states.
    for (const Range& r : ranges())
        if (r.pos0 == 0)
            for (int l = 0; l < p_.n_layer; ++l)
                if (p_.recurrent[l]) {
                    be_.fill(state_[l].conv[size_t(r.seq)], 0.0f);
                    be_.fill(state_[l].recurrence[size_t(r.seq)], 0.0f);
                }
    auto x = rows(x_), h = rows(h_);
    be_.get_rows(w_.token_embd, ids, x);
    residual(-1, x);
    be_.rms_norm(x, &w_.layers[0].attn_norm, p_.rms_eps, p_.n_embd, h);
    for (int l = 0; l < p_.n_layer; ++l) {
        const Layer& L = w_.layers[l];
        if (p_.recurrent[l])
            delta_net_layer(L, l);
        else
            attention_layer(L, l);
        // Each layer's FFN leaves the next layer's input norm in h.
        ffn(L, l + 1 < p_.n_layer ? &w_.layers[l + 1].attn_norm : nullptr);
        residual(l, x);
    }
    return head(x, h, w_, p_.rms_eps);
}

}  // namespace zinc::engine
