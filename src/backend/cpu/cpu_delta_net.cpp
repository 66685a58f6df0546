// CPU ops of the gated delta-net layers (Qwen3.5 / Qwen3.6, docs/models.md §4.4.2): the gates and gathers around the
// recurrence, the causal conv over a rolling state, and the gated delta rule token by token and in chunked form.
// All arithmetic is f32. (Their L2 norm and gated RMSNorm are in cpu_norm.cpp.)
#include "backend/cpu/cpu_delta_net.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_elementwise.h"
#include "backend/cpu/simd.h"

namespace zinc::backend::cpu {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }  // torch's threshold

int key_head(const DeltaNetParams& p, int h) { return p.tiled ? h % p.n_k : h / (p.n_v / p.n_k); }

}  // namespace

void sigmoid_mul(ThreadPool& pool, const Act& x, const Act& gate, Act& out) {
    const bool per_row = gate.cols == 1 && x.cols != 1;
    pool.parallel_for(x.rows, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            const float* xi = x.data + t * x.cols;
            float* o = out.data + t * x.cols;
            if (per_row) {
                const float s = sigmoid(gate.data[t]);
                for (int64_t i = 0; i < x.cols; ++i) o[i] = xi[i] * s;
            } else {
                const float* gi = gate.data + t * x.cols;
                for (int64_t i = 0; i < x.cols; ++i) o[i] = xi[i] * sigmoid(gi[i]);
            }
        }
    });
}

void fill(Act& a, float value) {
    for (int64_t i = 0; i < a.size(); ++i) a.data[i] = value;
}

void slice_groups(ThreadPool& pool, const Act& src, int64_t group, int64_t offset, Act& out) {
    const int64_t n_groups = src.cols / group;
    const int64_t width = out.cols / n_groups;
    const auto body = [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t)
            for (int64_t gi = 0; gi < n_groups; ++gi) {
                const float* s = src.data + t * src.cols + gi * group + offset;
                float* o = out.data + t * out.cols + gi * width;
                for (int64_t i = 0; i < width; ++i) o[i] = s[i];
            }
    };
    if (src.rows >= 16)
        pool.parallel_for(src.rows, body);
    else
        body(0, src.rows);
}

void delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g, Act& beta_out) {
    const int64_t n = a.cols;
    const float* dt = static_cast<const float*>(dt_bias.data);
    const float* A = static_cast<const float*>(ssm_a.data);
    for (int64_t t = 0; t < a.rows; ++t)
        for (int64_t h = 0; h < n; ++h) {
            const int64_t i = t * n + h;
            const float gv = softplus(a.data[i] + dt[h]) * A[h];
            beta_out.data[i] = sigmoid(b.data[i]);
            g.data[i] = gv;
        }
}

void conv1d_causal(ThreadPool& pool, const Act& x, Act& state, const Weight& w, bool silu_out, Act& out) {
    const int64_t C = x.cols, T = x.rows;
    const int64_t K = w.cols;
    const float* wd = static_cast<const float*>(w.data);
    // Channels are independent: each thread takes a range of them and goes through time with the K inputs of each
    // step in a window (the first K-1 from the state), vectorizing across its channels. A step's input is copied into
    // the window before its output is written, so out may alias x.
    pool.parallel_for(C, [&](int64_t cb, int64_t ce) {
        const int64_t n = ce - cb;
        std::vector<float> wt(static_cast<size_t>(K * n)), win(static_cast<size_t>(K * n));  // taps; window ring
        for (int64_t j = 0; j < K; ++j)
            for (int64_t c = 0; c < n; ++c) wt[j * n + c] = wd[(cb + c) * K + j];
        for (int64_t j = 0; j < K - 1; ++j)
            std::copy(state.data + j * C + cb, state.data + j * C + ce, win.begin() + j * n);
        std::vector<float> s(static_cast<size_t>(n));
        for (int64_t t = 0; t < T; ++t) {
            // Ring slot of input t - K + 1 + j: (t + j) mod K; the new input goes into slot (t + K - 1) mod K.
            std::copy(x.data + t * C + cb, x.data + t * C + ce, win.begin() + ((t + K - 1) % K) * n);
            std::fill(s.begin(), s.end(), 0.0f);
            for (int64_t j = 0; j < K; ++j) {
                const float* wj = wt.data() + j * n;
                const float* xj = win.data() + ((t + j) % K) * n;
                for (int64_t c = 0; c < n; ++c) s[c] += wj[c] * xj[c];
            }
            float* o = out.data + t * C + cb;
            for (int64_t c = 0; c < n; ++c) o[c] = silu_out ? silu(s[c]) : s[c];
        }
        for (int64_t j = 0; j < K - 1; ++j) {  // the last K - 1 inputs, oldest first
            const float* src = win.data() + ((T + j) % K) * n;
            std::copy(src, src + n, state.data + j * C + cb);
        }
    });
}

void delta_net(ThreadPool& pool, const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
               const DeltaNetParams& p, Act& out) {
    const int dk = p.d_k, dv = p.d_v;
    pool.parallel_for(p.n_v, [&](int64_t hb, int64_t he) {
        std::vector<float> m(static_cast<size_t>(dv));
        for (int64_t h = hb; h < he; ++h) {
            const int kh = key_head(p, static_cast<int>(h));
            float* S = state.data + h * dk * dv;
            for (int64_t t = 0; t < q.rows; ++t) {
                const float* kt = k.data + t * k.cols + int64_t(kh) * dk;
                const float* qt = q.data + t * q.cols + int64_t(kh) * dk;
                const float* vt = v.data + t * v.cols + h * dv;
                const float decay = std::exp(g.data[t * p.n_v + h]);
                const float b = beta.data[t * p.n_v + h];
                std::fill(m.begin(), m.end(), 0.0f);
                for (int i = 0; i < dk; ++i) {
                    float* Si = S + int64_t(i) * dv;
                    const float ki = kt[i];
                    for (int j = 0; j < dv; ++j) {
                        Si[j] *= decay;
                        m[j] += Si[j] * ki;
                    }
                }
                for (int j = 0; j < dv; ++j) m[j] = b * (vt[j] - m[j]);  // delta
                float* o = out.data + t * out.cols + h * dv;
                std::fill(o, o + dv, 0.0f);
                for (int i = 0; i < dk; ++i) {
                    float* Si = S + int64_t(i) * dv;
                    const float ki = kt[i], qi = qt[i];
                    for (int j = 0; j < dv; ++j) {
                        Si[j] += ki * m[j];
                        o[j] += Si[j] * qi;
                    }
                }
                for (int j = 0; j < dv; ++j) o[j] *= p.scale;
            }
        }
    });
}

// Within a chunk of n tokens with cumulative log-decays G_t = g_1 + ... + g_t and the state S0 at its start:
//   delta_t = beta_t (v_t - e^{G_t} S0^T k_t - sum_{s<t} e^{G_t - G_s} (k_t.k_s) delta_s)     (forward substitution)
//   o_t     = scale (e^{G_t} S0^T q_t + sum_{s<=t} e^{G_t - G_s} (q_t.k_s) delta_s)
//   S_n     = e^{G_n} S0 + sum_s e^{G_n - G_s} k_s delta_s^T
// which is the token-by-token recurrence unrolled (the WY / UT-transform form of the chunked kernels).
void delta_net_chunked(ThreadPool& pool, const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta,
                       Act& state, const DeltaNetParams& p, int chunk, Act& out) {
    const int dk = p.d_k, dv = p.d_v;
    const int64_t T = q.rows;
    const simd::Kernels& simd = simd::kernels();
    pool.parallel_for(p.n_v, [&](int64_t hb, int64_t he) {
        const size_t C = static_cast<size_t>(chunk);
        std::vector<float> G(C), kk(C * C), qk(C * C), delta(C * dv), sk(C * dv), sq(C * dv);
        std::vector<const float*> keys(C);
        for (int64_t h = hb; h < he; ++h) {
            const int kh = key_head(p, static_cast<int>(h));
            float* S = state.data + h * dk * dv;
            for (int64_t t0 = 0; t0 < T; t0 += chunk) {
                const int n = static_cast<int>(std::min<int64_t>(chunk, T - t0));
                const auto K_ = [&](int t) { return k.data + (t0 + t) * k.cols + int64_t(kh) * dk; };
                const auto Q_ = [&](int t) { return q.data + (t0 + t) * q.cols + int64_t(kh) * dk; };
                float acc = 0;
                for (int t = 0; t < n; ++t) G[t] = acc += g.data[(t0 + t) * p.n_v + h];
                // Gram matrices of the chunk: k_t.k_s (s < t), q_t.k_s (s <= t), by the row kernels' dot products.
                for (int t = 0; t < n; ++t) keys[static_cast<size_t>(t)] = K_(t);
                for (int t = 0; t < n; ++t) {
                    simd.dots(K_(t), keys.data(), t + 1, dk, kk.data() + t * C);
                    simd.dots(Q_(t), keys.data(), t + 1, dk, qk.data() + t * C);
                }
                // S0^T k_t and S0^T q_t.
                std::fill(sk.begin(), sk.begin() + int64_t(n) * dv, 0.0f);
                std::fill(sq.begin(), sq.begin() + int64_t(n) * dv, 0.0f);
                for (int t = 0; t < n; ++t) {
                    const float *kt = K_(t), *qt = Q_(t);
                    float *skt = sk.data() + int64_t(t) * dv, *sqt = sq.data() + int64_t(t) * dv;
                    for (int i = 0; i < dk; ++i) {
                        const float* Si = S + int64_t(i) * dv;
                        const float ki = kt[i], qi = qt[i];
                        for (int j = 0; j < dv; ++j) {
                            skt[j] += Si[j] * ki;
                            sqt[j] += Si[j] * qi;
                        }
                    }
                }
                // delta by forward substitution, then the outputs.
                for (int t = 0; t < n; ++t) {
                    const float eg = std::exp(G[t]);
                    const float b = beta.data[(t0 + t) * p.n_v + h];
                    const float* vt = v.data + (t0 + t) * v.cols + h * dv;
                    float* dt = delta.data() + int64_t(t) * dv;
                    const float* skt = sk.data() + int64_t(t) * dv;
                    for (int j = 0; j < dv; ++j) dt[j] = eg * skt[j];
                    for (int s = 0; s < t; ++s) {
                        const float a = std::exp(G[t] - G[s]) * kk[t * C + s];
                        const float* ds = delta.data() + int64_t(s) * dv;
                        for (int j = 0; j < dv; ++j) dt[j] += a * ds[j];
                    }
                    for (int j = 0; j < dv; ++j) dt[j] = b * (vt[j] - dt[j]);
                    float* o = out.data + (t0 + t) * out.cols + h * dv;
                    const float* sqt = sq.data() + int64_t(t) * dv;
                    for (int j = 0; j < dv; ++j) o[j] = eg * sqt[j];
                    for (int s = 0; s <= t; ++s) {
                        const float a = std::exp(G[t] - G[s]) * qk[t * C + s];
                        const float* ds = delta.data() + int64_t(s) * dv;
                        for (int j = 0; j < dv; ++j) o[j] += a * ds[j];
                    }
                    for (int j = 0; j < dv; ++j) o[j] *= p.scale;
                }
                // The state at the end of the chunk.
                const float egn = std::exp(G[n - 1]);
                for (int i = 0; i < dk; ++i) {
                    float* Si = S + int64_t(i) * dv;
                    for (int j = 0; j < dv; ++j) Si[j] *= egn;
                }
                for (int s = 0; s < n; ++s) {
                    const float w = std::exp(G[n - 1] - G[s]);
                    const float* ks = K_(s);
                    const float* ds = delta.data() + int64_t(s) * dv;
                    for (int i = 0; i < dk; ++i) {
                        float* Si = S + int64_t(i) * dv;
                        const float c = w * ks[i];
                        for (int j = 0; j < dv; ++j) Si[j] += c * ds[j];
                    }
                }
            }
        }
    });
}

}  // namespace zinc::backend::cpu
