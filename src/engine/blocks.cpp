// The blocks of blocks.h over a step's rows: each one's ops in the order its comment in blocks.h gives.
#include "engine/blocks.h"

#include <algorithm>

#include "engine/family.h"

namespace zinc::engine {

using backend::Act;
using backend::Weight;

namespace {

// Micro-batches of more than one token run the delta rule in chunks of this many tokens (the WY form).
constexpr int kDeltaNetChunk = 64;

}  // namespace

const Weight* input_norm(const Block& b) {
    return std::visit([](const auto& block) { return block.norm; }, b);
}

backend::RopeParams rope_params(int n_rot, bool neox, float base, const model::RopeScaling& s) {
    backend::RopeParams r{n_rot, neox, base, s.freq_scale};
    r.ext_factor = s.ext_factor;
    r.yarn_low = s.yarn_low;
    r.yarn_high = s.yarn_high;
    r.mscale = s.mscale;
    return r;
}

AttentionBlock attention_block(const Weight& norm, float eps, const Weight& wq, const Weight& wk, const Weight* wv,
                               const Weight& wo) {
    AttentionBlock a;
    a.norm = &norm;
    a.eps = eps;
    a.wq = &wq;
    a.wk = &wk;
    a.wv = wv;
    a.wo = &wo;
    return a;
}

FfnBlock ffn_block(const Weight& norm, float eps, const Weight& gate, const Weight& up, const Weight& down,
                   backend::GatedActivation act) {
    FfnBlock f;
    f.norm = &norm;
    f.eps = eps;
    f.gate = &gate;
    f.up = &up;
    f.down = &down;
    f.act = act;
    return f;
}

MoeBlock moe_block(const Weight& norm, float eps, const Weight& router, int n_expert, int k,
                   const backend::MoeWeights& experts) {
    MoeBlock m;
    m.norm = &norm;
    m.eps = eps;
    m.router = &router;
    m.n_expert = n_expert;
    m.k = k;
    m.experts = experts;
    return m;
}

void Family::alloc_scratch(int64_t n_embd) {
    n_embd_ = n_embd;
    Scratch w;  // the widths, in the cols of empty buffers
    auto widen = [](Act& a, int64_t cols) { a.cols = std::max(a.cols, cols); };
    w.x.cols = w.h.cols = w.y.cols = n_embd;
    for (const std::vector<Block>& layer : layers_)
        for (const Block& block : layer) {
            if (const auto* a = std::get_if<AttentionBlock>(&block)) {
                const int64_t d = a->ap.head_dim, nq = a->ap.n_head * d, nkv = a->ap.n_head_kv * d;
                for (Act* b : {&w.q, &w.attn}) widen(*b, nq);
                for (Act* b : {&w.k, &w.v}) widen(*b, nkv);
                if (a->q_gate) {
                    widen(w.qg, 2 * nq);
                    widen(w.gate, nq);
                }
            } else if (const auto* f = std::get_if<FfnBlock>(&block)) {
                for (Act* b : {&w.ff_gate, &w.ff_up}) widen(*b, f->gate->rows);
                if (f->beside) {
                    widen(w.router, f->beside->n_expert);
                    widen(w.route_w, f->beside->k);
                    w.route_ids.cols = std::max<int64_t>(w.route_ids.cols, f->beside->k);
                    for (Act* b : {&w.moe_out, &w.router_in, &w.experts_in}) widen(*b, n_embd);
                }
            } else if (const auto* m = std::get_if<MoeBlock>(&block)) {
                widen(w.router, m->n_expert);
                widen(w.route_w, m->k);
                w.route_ids.cols = std::max<int64_t>(w.route_ids.cols, m->k);
                widen(w.moe_out, n_embd);
                if (m->shared_gate) {
                    for (Act* b : {&w.ff_gate, &w.ff_up}) widen(*b, m->shared_gate->rows);
                    widen(w.sh_gate, 1);
                }
            } else {
                const auto& d = std::get<DeltaNetBlock>(block);
                const int64_t key = int64_t{d.p.n_k} * d.p.d_k, value = int64_t{d.p.n_v} * d.p.d_v;
                for (Act* b : {&w.qkv, &w.conv}) widen(*b, d.qkv->rows);
                for (Act* b : {&w.z, &w.dv, &w.o}) widen(*b, value);
                for (Act* b : {&w.a, &w.b, &w.g, &w.beta}) widen(*b, d.p.n_v);
                for (Act* b : {&w.dq, &w.dk}) widen(*b, key);
            }
        }
    auto alloc = [&](Act& to, const Act& width) {
        if (width.cols > 0) to = scratch(width.cols);
    };
    for (auto [to, width] : {std::pair{&s_.x, &w.x}, {&s_.h, &w.h}, {&s_.y, &w.y}, {&s_.qg, &w.qg}, {&s_.q, &w.q},
                             {&s_.gate, &w.gate}, {&s_.k, &w.k}, {&s_.v, &w.v}, {&s_.attn, &w.attn},
                             {&s_.ff_gate, &w.ff_gate}, {&s_.ff_up, &w.ff_up}, {&s_.router, &w.router},
                             {&s_.route_w, &w.route_w}, {&s_.moe_out, &w.moe_out}, {&s_.sh_gate, &w.sh_gate},
                             {&s_.router_in, &w.router_in}, {&s_.experts_in, &w.experts_in}, {&s_.qkv, &w.qkv},
                             {&s_.conv, &w.conv}, {&s_.z, &w.z}, {&s_.a, &w.a}, {&s_.b, &w.b}, {&s_.g, &w.g},
                             {&s_.beta, &w.beta}, {&s_.dq, &w.dq}, {&s_.dk, &w.dk}, {&s_.dv, &w.dv}, {&s_.o, &w.o}})
        alloc(*to, *width);
    if (w.route_ids.cols > 0) s_.route_ids = be_.alloc_ids(n_ubatch(), w.route_ids.cols);
}

void Family::run_layers(Act& x, Act& h) {
    for (const Range& r : ranges())
        if (r.pos0 == 0)
            for (std::vector<Block>& layer : layers_)
                for (Block& b : layer)
                    if (auto* d = std::get_if<DeltaNetBlock>(&b)) {
                        be_.fill(d->conv_state[size_t(r.seq)], 0.0f);
                        be_.fill(d->state[size_t(r.seq)], 0.0f);
                    }
    bool h_ready = false;
    for (size_t l = 0; l < layers_.size(); ++l) {
        std::vector<Block>& layer = layers_[l];
        for (size_t i = 0; i < layer.size(); ++i) {
            const Weight* next = i + 1 < layer.size()       ? input_norm(layer[i + 1])
                                 : l + 1 < layers_.size() ? input_norm(layers_[l + 1].front())
                                                          : nullptr;
            h_ready = std::visit([&](auto& b) { return run_block(b, x, h, h_ready, next); }, layer[i]);
        }
        residual(int(l), x);
    }
}

void Family::attend(AttentionBlock& a, Act& q, Act& k, Act& v, Act& out) {
    attention_ranges_.clear();
    for (size_t i = 0; i < ranges_.size(); ++i) {
        const Range& r = ranges_[i];
        backend::KvLayer& cache = a.kv[size_t(r.seq)];
        if (cache.page_rows > 0) {
            cache.pages = tables_.data() + int64_t(i) * table_stride_;
            cache.n_pages = table_pages_[i];
        }
        attention_ranges_.push_back({r.first, r.rows, r.pos0, &cache});
    }
    // Each sequence's rows are one range, so writing every range before reading any changes nothing it reads.
    be_.rope_kv_write(q, k, v, a.norms, a.ap.head_dim, pos_, a.rope, attention_ranges_);
    be_.attention(q, attention_ranges_, a.ap, out);
}

bool Family::run_block(AttentionBlock& a, Act& x, Act& h, bool h_ready, const Weight* /*next_norm*/) {
    if (!h_ready) be_.rms_norm(x, a.norm, a.eps, x.cols, h);
    const int d = a.ap.head_dim;
    const int64_t nq = int64_t{a.ap.n_head} * d, nkv = int64_t{a.ap.n_head_kv} * d;
    Act q = rows(s_.q, nq), k = rows(s_.k, nkv), v = rows(s_.v, nkv), attn = rows(s_.attn, nq), y = rows(s_.y);
    Act qg = a.q_gate ? rows(s_.qg, 2 * nq) : q, gate = a.q_gate ? rows(s_.gate, nq) : Act{};
    const Weight* w[] = {a.wq, a.wk, a.wv};
    const Weight* bias[] = {a.bq, a.bk, a.bv};
    Act* out[] = {&qg, &k, &v};
    const size_t n = a.wv ? 3 : 2;
    const bool biased = a.bq || a.bk || a.bv;
    be_.matmuls(std::span(w, n), h, std::span(out, n), biased ? std::span(bias, n) : std::span<const Weight*>());
    if (!a.wv) be_.rms_norm(k, nullptr, a.eps, d, v);
    if (a.q_gate) {
        be_.slice_groups(qg, 2 * d, 0, q);
        be_.slice_groups(qg, 2 * d, d, gate);
    }
    attend(a, q, k, v, attn);
    if (a.q_gate) be_.sigmoid_mul(attn, gate, attn);
    if (a.post_norm) {
        be_.matmul(*a.wo, attn, y);
        be_.norm_add(y, a.post_norm, a.eps, x);
    } else {
        be_.matmul_add(*a.wo, attn, y, x, a.bo);
    }
    return false;
}

bool Family::run_block(FfnBlock& f, Act& x, Act& h, bool h_ready, const Weight* /*next_norm*/) {
    Act gate = rows(s_.ff_gate, f.gate->rows), up = rows(s_.ff_up, f.gate->rows), y = rows(s_.y);
    if (!f.beside) {
        if (!h_ready) be_.rms_norm(x, f.norm, f.eps, x.cols, h);
        be_.ffn_gated(*f.gate, *f.up, h, f.act, up, gate);
        if (!f.post_norm) {
            be_.matmul_add(*f.down, gate, y, x);
            return false;
        }
        be_.matmul(*f.down, gate, y);
        be_.norm_add(y, f.post_norm, f.eps, x, f.out_scale);
        return false;
    }
    // The residual stream normed three ways at once, for the dense FFN (h), the router and the experts; the dense FFN
    // (y) runs beside the router and the routed experts (m).
    const ExpertsBeside& e = *f.beside;
    Act router_in = rows(s_.router_in), experts_in = rows(s_.experts_in);
    const Weight* norm_w[] = {f.norm, e.router_norm, e.norm};
    Act* normed[] = {&h, &router_in, &experts_in};
    const float norm_s[] = {1.0f, e.router_scale, 1.0f};
    be_.rms_norms(x, norm_w, f.eps, normed, norm_s);
    be_.begin_side();
    be_.ffn_gated(*f.gate, *f.up, h, f.act, up, gate);
    be_.matmul(*f.down, gate, y);
    be_.rms_norm(y, e.dense_post_norm, f.eps, y.cols, y);
    be_.end_side();
    Act logits = rows(s_.router, e.n_expert), weights = rows(s_.route_w, e.k), m = rows(s_.moe_out);
    backend::IdAct ids = rows(s_.route_ids, e.k);
    be_.matmul(*e.router, router_in, logits);
    be_.moe_route(logits, e.k, true, ids, weights);
    be_.moe_ffn(experts_in, ids, weights, e.experts, m);
    be_.join_side();
    be_.norm_add(m, e.post_norm, f.eps, y);             // y += post_norm(m)
    be_.norm_add(y, f.post_norm, f.eps, x, f.out_scale);  // x = (x + post_norm(y)) · out_scale
    return false;
}

bool Family::run_block(MoeBlock& m, Act& x, Act& h, bool h_ready, const Weight* next_norm) {
    if (!h_ready) be_.rms_norm(x, m.norm, m.eps, x.cols, h);
    Act logits = rows(s_.router, m.n_expert), weights = rows(s_.route_w, m.k), moe = rows(s_.moe_out), y = rows(s_.y);
    backend::IdAct ids = rows(s_.route_ids, m.k);
    Act sg = m.shared_gate ? rows(s_.sh_gate, 1) : Act{};
    if (m.shared_gate) {
        // The shared expert (y) beside the router and the routed experts, which read h too.
        Act gate = rows(s_.ff_gate, m.shared_gate->rows), up = rows(s_.ff_up, m.shared_gate->rows);
        be_.begin_side();
        be_.ffn_gated(*m.shared_gate, *m.shared_up, h, backend::GatedActivation::swiglu, up, gate);
        be_.matmul(*m.shared_down, gate, y);
        be_.end_side();
        const Weight* gates_w[] = {m.router, m.shared_input_gate};
        Act* gates[] = {&logits, &sg};
        be_.matmuls(gates_w, h, gates);
    } else if (m.router_bias) {
        const Weight* router_w[] = {m.router};
        const Weight* router_b[] = {m.router_bias};
        Act* router[] = {&logits};
        be_.matmuls(router_w, h, router, router_b);
    } else {
        be_.matmul(*m.router, h, logits);
    }
    be_.moe_route(logits, m.k, true, ids, weights);
    be_.moe_ffn(h, ids, weights, m.experts, moe);
    if (!m.shared_gate) {
        be_.add(x, moe, x);
        return false;
    }
    be_.join_side();
    if (next_norm) {  // x += moe + y · σ(sg), and the next block's input h = rms_norm(x) · next_norm
        be_.shared_expert_add_norm(moe, y, sg, x, next_norm, m.eps, h);
        return true;
    }
    be_.shared_expert_add(moe, y, sg, x);
    return false;
}

bool Family::run_block(DeltaNetBlock& d, Act& x, Act& h, bool h_ready, const Weight* /*next_norm*/) {
    if (!h_ready) be_.rms_norm(x, d.norm, d.eps, x.cols, h);
    const int64_t key = int64_t{d.p.n_k} * d.p.d_k, conv_dim = d.qkv->rows;
    Act y = rows(s_.y), qkv = rows(s_.qkv, conv_dim), conv = rows(s_.conv, conv_dim), z = rows(s_.z, d.z->rows);
    Act a = rows(s_.a, d.p.n_v), b = rows(s_.b, d.p.n_v), g = rows(s_.g, d.p.n_v), beta = rows(s_.beta, d.p.n_v);
    Act q = rows(s_.dq, key), k = rows(s_.dk, key), v = rows(s_.dv, d.z->rows), o = rows(s_.o, d.z->rows);
    const Weight* in_w[] = {d.qkv, d.z, d.beta, d.alpha};
    Act* in[] = {&qkv, &z, &b, &a};
    be_.matmuls(in_w, h, in);
    if (ranges().size() > 1 && int64_t(ranges().size()) == qkv.rows) {
        // One token of each of several sequences (decode): one step over all of them, each row on its own state.
        std::vector<Act*> conv_states, states;
        for (const Range& r : ranges()) {
            conv_states.push_back(&d.conv_state[size_t(r.seq)]);
            states.push_back(&d.state[size_t(r.seq)]);
        }
        be_.delta_net_step(qkv, z, a, b, d.w, d.eps, conv_states, states, d.p, conv, g, beta, o);
        be_.matmul_add(*d.out, o, y, x);
        return false;
    }
    // Otherwise the recurrence runs a sequence at a time, each on its own state.
    for (const Range& r : ranges()) {
        const auto part = [&](const Act& buf) { return backend::Backend::rows_of(buf, r.first, r.rows); };
        Act rqkv = part(qkv), rz = part(z), ra = part(a), rb = part(b), rg = part(g), rbeta = part(beta);
        Act rconv = part(conv), rq = part(q), rk = part(k), rv = part(v), ro = part(o);
        Act &conv_state = d.conv_state[size_t(r.seq)], &state = d.state[size_t(r.seq)];
        if (r.rows == 1) {
            // One token (decode): the gates, the conv, the q/k norms, the recurrence and the gated norm as one op,
            // whose q, k and v are consecutive pieces of the conv's row, used in place.
            be_.delta_net_step(rqkv, rz, ra, rb, d.w, d.eps, conv_state, state, d.p, rconv, rg, rbeta, ro);
        } else {
            be_.delta_net_gates(ra, rb, *d.w.dt_bias, *d.w.ssm_a, rg, rbeta);
            be_.conv1d_causal(rqkv, conv_state, *d.w.conv, true, rconv);
            be_.slice_groups(rconv, conv_dim, 0, rq);
            be_.slice_groups(rconv, conv_dim, key, rk);
            be_.slice_groups(rconv, conv_dim, 2 * key, rv);
            be_.l2_norm(rq, d.eps, d.p.d_k, rq);
            be_.l2_norm(rk, d.eps, d.p.d_k, rk);
            be_.delta_net_chunked(rq, rk, rv, rg, rbeta, state, d.p, kDeltaNetChunk, ro);
            be_.gated_rms_norm(ro, *d.w.norm, rz, d.eps, d.p.d_v, ro);
        }
    }
    be_.matmul_add(*d.out, o, y, x);
    return false;
}

}  // namespace zinc::engine
