// The gated delta-net and MoE ops of the CPU backend on random data: the chunked delta rule against the sequential
// one and both against a double-precision transcription of the recurrence; the causal conv over a prompt against
// token by token; MoE routing and the expert FFN (split and merged gate/up, the three activations, biases, scales)
// against a direct computation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace {

using zinc::backend::Act;
using zinc::backend::Backend;
using zinc::backend::DeltaNetParams;
using zinc::backend::IdAct;
using zinc::backend::MoeActivation;
using zinc::backend::MoeWeights;
using zinc::backend::Weight;

std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

Act make(Backend& be, int64_t rows, int64_t cols, const std::vector<float>& v) {
    Act a = be.alloc(rows, cols);
    be.upload(a, v);
    return a;
}

std::vector<float> get(Backend& be, const Act& a) {
    std::vector<float> v(static_cast<size_t>(a.size()));
    be.download(a, v);
    return v;
}

// An f32 weight over host data {ne0, ne1, ne2}.
Weight f32_weight(const std::vector<float>& v, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
    Weight w;
    w.type = zinc::gguf::TensorType::F32;
    w.cols = ne0;
    w.rows = ne1 * ne2;
    w.data = v.data();
    w.name = "test";
    w.ne[0] = ne0;
    w.ne[1] = ne1;
    w.ne[2] = ne2;
    return w;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, std::abs(double(a[i]) - b[i]));
        den = std::max(den, std::abs(double(b[i])));
    }
    return num / den;
}

struct DeltaNetCase {
    DeltaNetParams p;
    int64_t T;
    std::vector<float> q, k, v, g, beta, s0;
};

DeltaNetCase make_case(bool tiled, int64_t T, std::mt19937& rng) {
    DeltaNetCase c;
    c.p.n_k = 2;
    c.p.n_v = 6;
    c.p.d_k = 16;
    c.p.d_v = 8;
    c.p.tiled = tiled;
    c.p.scale = 0.25f;
    c.T = T;
    c.q = randn(T * 32, rng);
    c.k = randn(T * 32, rng);
    for (int64_t i = 0; i < T * 2; ++i) {  // unit-length keys and queries, as after the L2 norm
        float *kv = c.k.data() + i * 16, *qv = c.q.data() + i * 16;
        float nk = 0, nq = 0;
        for (int j = 0; j < 16; ++j) nk += kv[j] * kv[j], nq += qv[j] * qv[j];
        for (int j = 0; j < 16; ++j) kv[j] /= std::sqrt(nk), qv[j] /= std::sqrt(nq);
    }
    c.v = randn(T * 48, rng);
    std::uniform_real_distribution<float> ug(-3.0f, 0.0f), ub(0.0f, 1.0f);
    for (int64_t i = 0; i < T * 6; ++i) c.g.push_back(i % 13 == 0 ? -30.0f : ug(rng) * ug(rng) / 3.0f);
    for (int64_t i = 0; i < T * 6; ++i) c.beta.push_back(ub(rng));
    c.s0 = randn(6 * 16 * 8, rng, 0.5f);
    return c;
}

// The recurrence as docs/models.md §4.4.2 states it, in double.
void reference(const DeltaNetCase& c, std::vector<float>& out, std::vector<float>& state) {
    const auto& p = c.p;
    std::vector<double> S(c.s0.begin(), c.s0.end());
    out.assign(c.T * p.n_v * p.d_v, 0.0f);
    for (int64_t t = 0; t < c.T; ++t)
        for (int h = 0; h < p.n_v; ++h) {
            const int kh = p.tiled ? h % p.n_k : h / (p.n_v / p.n_k);
            double* Sh = S.data() + h * p.d_k * p.d_v;
            const float* k = c.k.data() + (t * p.n_k + kh) * p.d_k;
            const float* q = c.q.data() + (t * p.n_k + kh) * p.d_k;
            const float* v = c.v.data() + (t * p.n_v + h) * p.d_v;
            const double decay = std::exp(double(c.g[t * p.n_v + h])), b = c.beta[t * p.n_v + h];
            for (int i = 0; i < p.d_k * p.d_v; ++i) Sh[i] *= decay;
            for (int j = 0; j < p.d_v; ++j) {
                double m = 0;
                for (int i = 0; i < p.d_k; ++i) m += Sh[i * p.d_v + j] * k[i];
                const double d = b * (v[j] - m);
                for (int i = 0; i < p.d_k; ++i) Sh[i * p.d_v + j] += k[i] * d;
                double o = 0;
                for (int i = 0; i < p.d_k; ++i) o += Sh[i * p.d_v + j] * q[i];
                out[(t * p.n_v + h) * p.d_v + j] = float(o * p.scale);
            }
        }
    state.assign(S.begin(), S.end());
}

// Runs the op on the case, in calls of `step` tokens (state carried); chunk 0 = sequential.
void run(Backend& be, const DeltaNetCase& c, int chunk, int64_t step, std::vector<float>& out,
         std::vector<float>& state) {
    const auto& p = c.p;
    Act S = make(be, p.n_v, p.d_k * p.d_v, c.s0);
    out.assign(c.T * p.n_v * p.d_v, 0.0f);
    for (int64_t t0 = 0; t0 < c.T; t0 += step) {
        const int64_t n = std::min(step, c.T - t0);
        const auto sub = [&](const std::vector<float>& v, int64_t w) {
            return std::vector<float>(v.begin() + t0 * w, v.begin() + (t0 + n) * w);
        };
        Act q = make(be, n, 32, sub(c.q, 32)), k = make(be, n, 32, sub(c.k, 32)), v = make(be, n, 48, sub(c.v, 48)),
            g = make(be, n, 6, sub(c.g, 6)), b = make(be, n, 6, sub(c.beta, 6)), o = be.alloc(n, 48);
        if (chunk > 0)
            be.delta_net_chunked(q, k, v, g, b, S, p, chunk, o);
        else
            be.delta_net(q, k, v, g, b, S, p, o);
        const auto ov = get(be, o);
        std::copy(ov.begin(), ov.end(), out.begin() + t0 * 48);
    }
    state = get(be, S);
}

TEST(CpuDeltaNet, ChunkedEqualsSequentialEqualsReference) {
    auto be = zinc::backend::make_cpu_backend(2);
    std::mt19937 rng(7);
    for (bool tiled : {true, false}) {
        const DeltaNetCase c = make_case(tiled, 150, rng);
        std::vector<float> ref_o, ref_s, seq_o, seq_s;
        reference(c, ref_o, ref_s);
        run(*be, c, 0, c.T, seq_o, seq_s);
        EXPECT_LE(max_rel(seq_o, ref_o), 1e-5);
        EXPECT_LE(max_rel(seq_s, ref_s), 1e-5);
        for (int chunk : {1, 7, 64, 200}) {
            std::vector<float> o, s;
            run(*be, c, chunk, c.T, o, s);
            EXPECT_LE(max_rel(o, seq_o), 2e-5) << "chunk " << chunk << " tiled " << tiled;
            EXPECT_LE(max_rel(s, seq_s), 2e-5) << "chunk " << chunk << " tiled " << tiled;
        }
        // Calls of 10 tokens: the state carries between calls in both forms.
        std::vector<float> o, s;
        run(*be, c, 64, 10, o, s);
        EXPECT_LE(max_rel(o, seq_o), 2e-5);
        run(*be, c, 0, 1, o, s);
        EXPECT_LE(max_rel(o, seq_o), 1e-6);
    }
}

TEST(CpuDeltaNet, ConvPromptEqualsTokenByToken) {
    auto be = zinc::backend::make_cpu_backend(2);
    std::mt19937 rng(3);
    const int64_t C = 24, K = 4, T = 11;
    const auto x = randn(T * C, rng), wv = randn(C * K, rng, 0.5f);
    const Weight w = f32_weight(wv, K, C);
    Act state = be->alloc(K - 1, C);
    be->fill(state, 0.0f);
    Act xa = make(*be, T, C, x), out = be->alloc(T, C);
    be->conv1d_causal(xa, state, w, true, out);
    const auto whole = get(*be, out), whole_state = get(*be, state);
    // Direct formula with zeros before the sequence.
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) {
            double s = 0;
            for (int64_t j = 0; j < K; ++j) {
                const int64_t tt = t - (K - 1) + j;
                if (tt >= 0) s += double(wv[c * K + j]) * x[tt * C + c];
            }
            EXPECT_NEAR(whole[t * C + c], s / (1 + std::exp(-s)), 1e-5);
        }
    be->fill(state, 0.0f);
    for (int64_t t = 0; t < T; ++t) {
        Act xt = make(*be, 1, C, std::vector<float>(x.begin() + t * C, x.begin() + (t + 1) * C)), ot = be->alloc(1, C);
        be->conv1d_causal(xt, state, w, true, ot);
        const auto o = get(*be, ot);
        for (int64_t c = 0; c < C; ++c) EXPECT_FLOAT_EQ(o[c], whole[t * C + c]);
    }
    EXPECT_EQ(get(*be, state), whole_state);
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(whole_state[2 * C + c], x[(T - 1) * C + c]);  // newest input last
}

float act_ref(MoeActivation a, double g, double u) {
    switch (a) {
        case MoeActivation::swiglu: return float(g / (1 + std::exp(-g)) * u);
        case MoeActivation::geglu: return float(0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * u);
        case MoeActivation::swiglu_oai: {
            const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
            return float(x / (1 + std::exp(-1.702 * x)) * (y + 1));
        }
    }
    return 0;
}

TEST(CpuMoe, RouteAndExpertFfn) {
    auto be = zinc::backend::make_cpu_backend(2);
    std::mt19937 rng(11);
    const int64_t T = 9, in = 32, ff = 16, out = 24, E = 5;
    const int k = 2;
    const auto x = randn(T * in, rng), logits = randn(T * E, rng, 2.0f);
    const auto wg = randn(E * ff * in, rng, 0.3f), wu = randn(E * ff * in, rng, 0.3f),
               wd = randn(E * out * ff, rng, 0.3f);
    const auto bg = randn(E * ff, rng), bu = randn(E * ff, rng), bd = randn(E * out, rng), sg = randn(E, rng),
               su = randn(E, rng), sd = randn(E, rng);
    // Merged gate_up: per expert ff gate rows then ff up rows.
    std::vector<float> wgu, bgu;
    for (int64_t e = 0; e < E; ++e) {
        wgu.insert(wgu.end(), wg.begin() + e * ff * in, wg.begin() + (e + 1) * ff * in);
        wgu.insert(wgu.end(), wu.begin() + e * ff * in, wu.begin() + (e + 1) * ff * in);
        bgu.insert(bgu.end(), bg.begin() + e * ff, bg.begin() + (e + 1) * ff);
        bgu.insert(bgu.end(), bu.begin() + e * ff, bu.begin() + (e + 1) * ff);
    }
    const Weight Wg = f32_weight(wg, in, ff, E), Wu = f32_weight(wu, in, ff, E), Wd = f32_weight(wd, ff, out, E),
                 Wgu = f32_weight(wgu, in, 2 * ff, E), Bg = f32_weight(bg, ff, E), Bu = f32_weight(bu, ff, E),
                 Bgu = f32_weight(bgu, 2 * ff, E), Bd = f32_weight(bd, out, E), Sg = f32_weight(sg, E),
                 Su = f32_weight(su, E), Sd = f32_weight(sd, E);

    Act xa = make(*be, T, in, x), la = make(*be, T, E, logits), wa = be->alloc(T, k), oa = be->alloc(T, out);
    IdAct ids = be->alloc_ids(T, k);
    for (bool renorm : {true, false}) {
        be->moe_route(la, k, renorm, ids, wa);
        const auto w = get(*be, wa);
        for (int64_t t = 0; t < T; ++t) {
            const float* l = logits.data() + t * E;
            std::vector<int> order(E);
            std::iota(order.begin(), order.end(), 0);
            std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
            double z = 0, zk = 0;
            for (int64_t e = 0; e < E; ++e) z += std::exp(double(l[e]));
            for (int s = 0; s < k; ++s) zk += std::exp(double(l[order[s]]));
            for (int s = 0; s < k; ++s) {
                EXPECT_EQ(ids.data[t * k + s], order[s]);
                EXPECT_NEAR(w[t * k + s], std::exp(double(l[order[s]])) / (renorm ? zk : z), 1e-6);
            }
        }
    }
    const auto w = get(*be, wa);  // not renormalized: the weights need not sum to 1
    for (MoeActivation act : {MoeActivation::swiglu, MoeActivation::geglu, MoeActivation::swiglu_oai})
        for (bool merged : {false, true})
            for (bool extras : {false, true}) {
                MoeWeights mw;
                mw.act = act;
                mw.down = &Wd;
                if (merged) {
                    mw.gate_up = &Wgu;
                    if (extras) mw.gate_up_bias = &Bgu;
                } else {
                    mw.gate = &Wg;
                    mw.up = &Wu;
                    if (extras) mw.gate_bias = &Bg, mw.up_bias = &Bu, mw.gate_scale = &Sg, mw.up_scale = &Su;
                }
                if (extras) mw.down_bias = &Bd, mw.down_scale = &Sd;
                be->moe_ffn(xa, ids, wa, mw, oa);
                const auto got = get(*be, oa);
                std::vector<float> want(T * out, 0.0f);
                for (int64_t t = 0; t < T; ++t)
                    for (int s = 0; s < k; ++s) {
                        const int e = ids.data[t * k + s];
                        std::vector<double> a(ff);
                        for (int64_t i = 0; i < ff; ++i) {
                            double g = 0, u = 0;
                            for (int64_t j = 0; j < in; ++j) {
                                g += double(wg[(e * ff + i) * in + j]) * x[t * in + j];
                                u += double(wu[(e * ff + i) * in + j]) * x[t * in + j];
                            }
                            if (extras && !merged) g = g * sg[e] + bg[e * ff + i], u = u * su[e] + bu[e * ff + i];
                            if (extras && merged) g += bg[e * ff + i], u += bu[e * ff + i];
                            a[i] = act_ref(act, g, u);
                        }
                        for (int64_t o = 0; o < out; ++o) {
                            double y = 0;
                            for (int64_t i = 0; i < ff; ++i) y += double(wd[(e * out + o) * ff + i]) * a[i];
                            if (extras) y = y * sd[e] + bd[e * out + o];
                            want[t * out + o] += float(w[t * k + s] * y);
                        }
                    }
                EXPECT_LE(max_rel(got, want), 1e-5)
                    << "act " << int(act) << " merged " << merged << " extras " << extras;
            }
}

TEST(CpuRecurrentOps, HelpersMatchFormulas) {
    auto be = zinc::backend::make_cpu_backend(1);
    std::mt19937 rng(5);
    const auto x = randn(3 * 8, rng), z = randn(3 * 8, rng), wv = randn(4, rng);
    Act xa = make(*be, 3, 8, x), za = make(*be, 3, 8, z), o = be->alloc(3, 8);
    // l2_norm over groups of 4
    be->l2_norm(xa, 1e-6f, 4, o);
    auto r = get(*be, o);
    for (int gi = 0; gi < 6; ++gi) {
        double s = 1e-6;
        for (int i = 0; i < 4; ++i) s += double(x[gi * 4 + i]) * x[gi * 4 + i];
        for (int i = 0; i < 4; ++i) EXPECT_NEAR(r[gi * 4 + i], x[gi * 4 + i] / std::sqrt(s), 1e-6);
    }
    // gated RMSNorm
    const Weight w = f32_weight(wv, 4);
    be->gated_rms_norm(xa, w, za, 1e-6f, 4, o);
    r = get(*be, o);
    for (int gi = 0; gi < 6; ++gi) {
        double s = 0;
        for (int i = 0; i < 4; ++i) s += double(x[gi * 4 + i]) * x[gi * 4 + i];
        for (int i = 0; i < 4; ++i) {
            const double zz = z[gi * 4 + i];
            EXPECT_NEAR(r[gi * 4 + i], x[gi * 4 + i] / std::sqrt(s / 4 + 1e-6) * wv[i] * zz / (1 + std::exp(-zz)),
                        1e-5);
        }
    }
    // per-head [q | gate] split and sigmoid gating (full and per-row gate)
    Act a = be->alloc(3, 4), b = be->alloc(3, 4);
    be->slice_groups(xa, 4, 0, a);
    be->slice_groups(xa, 4, 2, b);
    const auto av = get(*be, a), bv = get(*be, b);
    for (int t = 0; t < 3; ++t)
        for (int h = 0; h < 2; ++h)
            for (int i = 0; i < 2; ++i) {
                EXPECT_EQ(av[t * 4 + h * 2 + i], x[t * 8 + h * 4 + i]);
                EXPECT_EQ(bv[t * 4 + h * 2 + i], x[t * 8 + h * 4 + 2 + i]);
            }
    be->sigmoid_mul(a, b, a);
    const auto gv = get(*be, a);
    for (int i = 0; i < 12; ++i) EXPECT_NEAR(gv[i], av[i] / (1 + std::exp(-double(bv[i]))), 1e-6);
    Act col = make(*be, 3, 1, {0.5f, -1.0f, 2.0f});
    be->sigmoid_mul(xa, col, o);
    r = get(*be, o);
    for (int t = 0; t < 3; ++t)
        for (int i = 0; i < 8; ++i)
            EXPECT_NEAR(r[t * 8 + i], x[t * 8 + i] / (1 + std::exp(-double(col.data[t]))), 1e-6);
    // gates: softplus (threshold 20) and sigmoid
    const std::vector<float> av2{0.3f, 25.0f, -4.0f}, bv2{0.1f, -2.0f, 3.0f}, dt{0.2f, 1.0f, -0.5f},
        A{-0.5f, -2.0f, -1.0f};
    Act aa = make(*be, 1, 3, av2), ba = make(*be, 1, 3, bv2), g = be->alloc(1, 3), beta = be->alloc(1, 3);
    be->delta_net_gates(aa, ba, f32_weight(dt, 3), f32_weight(A, 3), g, beta);
    const auto gg = get(*be, g), bb = get(*be, beta);
    for (int i = 0; i < 3; ++i) {
        const double sp = av2[i] + dt[i] > 20 ? av2[i] + dt[i] : std::log1p(std::exp(double(av2[i] + dt[i])));
        EXPECT_NEAR(gg[i], sp * A[i], 1e-5);
        EXPECT_NEAR(bb[i], 1 / (1 + std::exp(-double(bv2[i]))), 1e-6);
    }
}

}  // namespace
