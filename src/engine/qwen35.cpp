// Forward pass of qwen35 / qwen35moe; MODELS.md §4.4 and §5.4 give the op order.
#include "engine/qwen35.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace zinc::engine {

using backend::Act;
using backend::Backend;

Qwen35::Qwen35(const gguf::Model& m, backend::Backend& be, int n_ctx)
    : Family(be), p_(model::read_qwen35_params(m)) {
    n_ctx_ = n_ctx > 0 ? n_ctx : p_.n_ctx_train;
    const model::Qwen35Tensors t = model::bind_qwen35_tensors(m, p_);
    token_embd_ = be.load_weight(*t.token_embd);
    output_norm_ = be.load_weight(*t.output_norm);
    // A tied head is the embedding table itself: one copy on the backend.
    output_ = t.output == t.token_embd ? token_embd_ : be.load_weight(*t.output);
    const auto load = [&](const gguf::TensorInfo* ti) { return ti ? be.load_weight(*ti) : backend::Weight{}; };
    layers_.resize(t.layers.size());
    for (size_t l = 0; l < t.layers.size(); ++l) {
        const model::Qwen35Layer& T = t.layers[l];
        Layer& L = layers_[l];
        L.recurrent = p_.recurrent[l];
        L.attn_norm = load(T.attn_norm);
        L.post_attention_norm = load(T.post_attention_norm);
        if (L.recurrent) {
            L.attn_qkv = load(T.attn_qkv);
            L.attn_gate = load(T.attn_gate);
            L.ssm_beta = load(T.ssm_beta);
            L.ssm_alpha = load(T.ssm_alpha);
            L.ssm_dt = load(T.ssm_dt);
            L.ssm_a = load(T.ssm_a);
            L.ssm_conv1d = load(T.ssm_conv1d);
            L.ssm_norm = load(T.ssm_norm);
            L.ssm_out = load(T.ssm_out);
            L.conv_state = be.alloc(p_.ssm_conv_kernel - 1, p_.conv_dim());
            L.ssm_state = be.alloc(p_.ssm_n_v, int64_t(p_.ssm_d_state) * p_.ssm_d_state);
        } else {
            L.attn_q = load(T.attn_q);
            L.attn_k = load(T.attn_k);
            L.attn_v = load(T.attn_v);
            L.attn_output = load(T.attn_output);
            L.attn_q_norm = load(T.attn_q_norm);
            L.attn_k_norm = load(T.attn_k_norm);
            L.kv = be.alloc_kv(int64_t(p_.n_head_kv) * p_.head_dim, n_ctx_);
        }
        L.moe = T.moe();
        if (L.moe) {
            L.gate_inp = load(T.ffn_gate_inp);
            L.gate_exps = load(T.ffn_gate_exps);
            L.up_exps = load(T.ffn_up_exps);
            L.gate_up_exps = load(T.ffn_gate_up_exps);
            L.down_exps = load(T.ffn_down_exps);
            L.gate_scale = load(T.ffn_gate_exps_scale);
            L.up_scale = load(T.ffn_up_exps_scale);
            L.down_scale = load(T.ffn_down_exps_scale);
            backend::MoeWeights& e = L.experts;
            e.act = backend::MoeActivation::swiglu;
            if (T.ffn_gate_up_exps) {
                e.gate_up = &L.gate_up_exps;
            } else {
                e.gate = &L.gate_exps;
                e.up = &L.up_exps;
            }
            e.down = &L.down_exps;
            if (T.ffn_gate_exps_scale) e.gate_scale = &L.gate_scale;
            if (T.ffn_up_exps_scale) e.up_scale = &L.up_scale;
            if (T.ffn_down_exps_scale) e.down_scale = &L.down_scale;
            L.shexp = T.ffn_gate_inp_shexp != nullptr;
            if (L.shexp) {
                L.gate_inp_shexp = load(T.ffn_gate_inp_shexp);
                L.gate_shexp = load(T.ffn_gate_shexp);
                L.up_shexp = load(T.ffn_up_shexp);
                L.down_shexp = load(T.ffn_down_shexp);
            }
        } else {
            L.ffn_gate = load(T.ffn_gate);
            L.ffn_up = load(T.ffn_up);
            L.ffn_down = load(T.ffn_down);
        }
    }
}

void Qwen35::reserve(int64_t T) {
    if (T <= scratch_rows_) return;
    const int64_t E = p_.n_embd;
    const int64_t q_dim = int64_t(p_.n_head) * p_.head_dim, kv_dim = int64_t(p_.n_head_kv) * p_.head_dim;
    x_ = be_.alloc(T, E);
    h_ = be_.alloc(T, E);
    y_ = be_.alloc(T, E);
    if (q_dim > 0) {
        qg_ = be_.alloc(T, 2 * q_dim);
        q_ = be_.alloc(T, q_dim);
        gate_ = be_.alloc(T, q_dim);
        k_ = be_.alloc(T, kv_dim);
        v_ = be_.alloc(T, kv_dim);
        attn_ = be_.alloc(T, q_dim);
    }
    qkv_ = be_.alloc(T, p_.conv_dim());
    conv_ = be_.alloc(T, p_.conv_dim());
    z_ = be_.alloc(T, p_.value_dim());
    a_ = be_.alloc(T, p_.ssm_n_v);
    b_ = be_.alloc(T, p_.ssm_n_v);
    g_ = be_.alloc(T, p_.ssm_n_v);
    beta_ = be_.alloc(T, p_.ssm_n_v);
    dq_ = be_.alloc(T, p_.key_dim());
    dk_ = be_.alloc(T, p_.key_dim());
    dv_ = be_.alloc(T, p_.value_dim());
    o_ = be_.alloc(T, p_.value_dim());
    int64_t ff = std::max(p_.n_ff_shexp, 1);
    for (int f : p_.n_ff) ff = std::max<int64_t>(ff, f);
    ff_gate_ = be_.alloc(T, ff);
    ff_up_ = be_.alloc(T, ff);
    if (p_.n_expert > 0) {
        router_ = be_.alloc(T, p_.n_expert);
        route_w_ = be_.alloc(T, p_.n_expert_used);
        route_ids_ = be_.alloc_ids(T, p_.n_expert_used);
        moe_out_ = be_.alloc(T, E);
        sh_gate_ = be_.alloc(T, 1);
    }
    logits_ = be_.alloc(T, p_.n_vocab);
    scratch_rows_ = T;
}

// x += ssm_out · GatedRMSNorm(DeltaRule(L2Norm(q), L2Norm(k), v)) with q, k, v from the causal conv of attn_qkv·h.
void Qwen35::delta_net_layer(Layer& L, int64_t T) {
    auto h = Backend::rows_of(h_, 0, T), y = Backend::rows_of(y_, 0, T), x = Backend::rows_of(x_, 0, T);
    auto qkv = Backend::rows_of(qkv_, 0, T), conv = Backend::rows_of(conv_, 0, T), z = Backend::rows_of(z_, 0, T);
    auto a = Backend::rows_of(a_, 0, T), b = Backend::rows_of(b_, 0, T), g = Backend::rows_of(g_, 0, T),
         beta = Backend::rows_of(beta_, 0, T);
    auto q = Backend::rows_of(dq_, 0, T), k = Backend::rows_of(dk_, 0, T), v = Backend::rows_of(dv_, 0, T),
         o = Backend::rows_of(o_, 0, T);
    const int64_t key_dim = p_.key_dim(), conv_dim = p_.conv_dim();
    be_.matmul(L.attn_qkv, h, qkv);
    be_.matmul(L.attn_gate, h, z);
    be_.matmul(L.ssm_beta, h, b);
    be_.matmul(L.ssm_alpha, h, a);
    be_.delta_net_gates(a, b, L.ssm_dt, L.ssm_a, g, beta);
    be_.conv1d_causal(qkv, L.conv_state, L.ssm_conv1d, true, conv);
    be_.slice_groups(conv, conv_dim, 0, q);
    be_.slice_groups(conv, conv_dim, key_dim, k);
    be_.slice_groups(conv, conv_dim, 2 * key_dim, v);
    be_.l2_norm(q, p_.rms_eps, p_.ssm_d_state, q);
    be_.l2_norm(k, p_.rms_eps, p_.ssm_d_state, k);
    backend::DeltaNetParams dp;
    dp.n_k = p_.ssm_n_k;
    dp.n_v = p_.ssm_n_v;
    dp.d_k = dp.d_v = p_.ssm_d_state;
    dp.tiled = true;  // GGUF value-head order (MODELS.md §4.3)
    dp.scale = 1.0f / std::sqrt(float(p_.ssm_d_state));
    if (T > 1 && chunk_ > 0)
        be_.delta_net_chunked(q, k, v, g, beta, L.ssm_state, dp, chunk_, o);
    else
        be_.delta_net(q, k, v, g, beta, L.ssm_state, dp, o);
    be_.gated_rms_norm(o, L.ssm_norm, z, p_.rms_eps, p_.ssm_d_state, o);
    be_.matmul(L.ssm_out, o, y);
    be_.add(x, y, x);
}

// x += attn_output · (Attention(RoPE(QNorm(q)), RoPE(KNorm(k)), v) ⊙ σ(gate)), q and gate packed per head in attn_q.
void Qwen35::attention_layer(Layer& L, int64_t T, int64_t pos0, const std::vector<int32_t>& pos) {
    auto h = Backend::rows_of(h_, 0, T), y = Backend::rows_of(y_, 0, T), x = Backend::rows_of(x_, 0, T);
    auto qg = Backend::rows_of(qg_, 0, T), q = Backend::rows_of(q_, 0, T), gate = Backend::rows_of(gate_, 0, T),
         k = Backend::rows_of(k_, 0, T), v = Backend::rows_of(v_, 0, T), attn = Backend::rows_of(attn_, 0, T);
    const int hd = p_.head_dim;
    be_.matmul(L.attn_q, h, qg);
    be_.slice_groups(qg, 2 * hd, 0, q);
    be_.slice_groups(qg, 2 * hd, hd, gate);
    be_.matmul(L.attn_k, h, k);
    be_.matmul(L.attn_v, h, v);
    be_.rms_norm(q, &L.attn_q_norm, p_.rms_eps, hd, q);
    be_.rms_norm(k, &L.attn_k_norm, p_.rms_eps, hd, k);
    // IMRoPE on text = NeoX with position p on the first n_rot dims (checked when reading the sections).
    backend::RopeParams rope;
    rope.n_rot = p_.n_rot;
    rope.neox = true;
    rope.freq_base = p_.rope_base;
    be_.rope(q, hd, pos, rope);
    be_.rope(k, hd, pos, rope);
    be_.kv_write(L.kv, k, v, pos0);
    backend::AttentionParams ap;
    ap.n_head = p_.n_head;
    ap.n_head_kv = p_.n_head_kv;
    ap.head_dim = hd;
    ap.scale = 1.0f / std::sqrt(float(hd));
    be_.attention(q, L.kv, pos0, ap, attn);
    be_.sigmoid_mul(attn, gate, attn);
    be_.matmul(L.attn_output, attn, y);
    be_.add(x, y, x);
}

void Qwen35::ffn(Layer& L, int64_t T) {
    auto h = Backend::rows_of(h_, 0, T), y = Backend::rows_of(y_, 0, T), x = Backend::rows_of(x_, 0, T);
    be_.rms_norm(x, &L.post_attention_norm, p_.rms_eps, p_.n_embd, h);
    if (!L.moe) {
        const int64_t ff = L.ffn_gate.rows;
        Act gate{ff_gate_.data, T, ff}, up{ff_up_.data, T, ff};
        be_.matmul(L.ffn_gate, h, gate);
        be_.matmul(L.ffn_up, h, up);
        be_.swiglu(gate, up, gate);
        be_.matmul(L.ffn_down, gate, y);
        be_.add(x, y, x);
        return;
    }
    auto router = Backend::rows_of(router_, 0, T), rw = Backend::rows_of(route_w_, 0, T),
         moe = Backend::rows_of(moe_out_, 0, T);
    backend::IdAct ids{route_ids_.data, T, route_ids_.cols};
    be_.matmul(L.gate_inp, h, router);
    be_.moe_route(router, p_.n_expert_used, true, ids, rw);
    be_.moe_ffn(h, ids, rw, L.experts, moe);
    if (L.shexp) {
        const int64_t ff = L.gate_shexp.rows;
        Act gate{ff_gate_.data, T, ff}, up{ff_up_.data, T, ff};
        auto sg = Backend::rows_of(sh_gate_, 0, T);
        be_.matmul(L.gate_shexp, h, gate);
        be_.matmul(L.up_shexp, h, up);
        be_.swiglu(gate, up, gate);
        be_.matmul(L.down_shexp, gate, y);
        be_.matmul(L.gate_inp_shexp, h, sg);
        be_.sigmoid_mul(y, sg, y);
        be_.add(moe, y, moe);
    }
    be_.add(x, moe, x);
}

backend::Act Qwen35::compute(std::span<const int32_t> ids, int64_t pos0, bool all_logits) {
    const int64_t T = static_cast<int64_t>(ids.size());
    if (pos0 != 0 && pos0 != n_past_)
        throw std::invalid_argument(p_.arch + ": the recurrent state holds " + std::to_string(n_past_) +
                                    " tokens and cannot restart at position " + std::to_string(pos0));
    reserve(T);
    if (pos0 == 0) {
        for (Layer& L : layers_)
            if (L.recurrent) {
                be_.fill(L.conv_state, 0.0f);
                be_.fill(L.ssm_state, 0.0f);
            }
    }
    n_past_ = 0;  // until this batch completes, the state is not trustworthy
    std::vector<int32_t> pos(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(pos0 + t);

    auto x = Backend::rows_of(x_, 0, T), h = Backend::rows_of(h_, 0, T);
    be_.get_rows(token_embd_, ids, x);
    for (Layer& L : layers_) {
        be_.rms_norm(x, &L.attn_norm, p_.rms_eps, p_.n_embd, h);
        if (L.recurrent)
            delta_net_layer(L, T);
        else
            attention_layer(L, T, pos0, pos);
        ffn(L, T);
    }
    n_past_ = pos0 + T;
    const int64_t first = all_logits ? 0 : T - 1, n_out = T - first;
    auto xo = Backend::rows_of(x, first, n_out), ho = Backend::rows_of(h, first, n_out);
    auto lo = Backend::rows_of(logits_, 0, n_out);
    be_.rms_norm(xo, &output_norm_, p_.rms_eps, p_.n_embd, ho);
    be_.matmul(output_, ho, lo);
    return lo;
}

}  // namespace zinc::engine
