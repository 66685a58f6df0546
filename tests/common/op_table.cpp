#include "op_table.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "random_weights.h"

namespace zinc::test {

using backend::Act;
using backend::Backend;
using backend::KvLayer;
using backend::Weight;
using gguf::TensorType;

namespace {

// The shapes of real models: a decoder's projections and heads, a hybrid's delta-net and experts.
struct Projection {
    const char* model;
    const char* tensor;
    int64_t cols, n_out;
};
constexpr Projection kProjections[] = {
    {"qwen3-0.6b", "attn_q", 1024, 2048},   {"qwen3-0.6b", "ffn_up", 1024, 3072},
    {"qwen3-0.6b", "ffn_down", 3072, 1024}, {"qwen3-8b", "attn_q", 4096, 4096},
    {"qwen3-8b", "attn_k", 4096, 1024},     {"qwen3-8b", "ffn_up", 4096, 12288},
    {"qwen3-8b", "ffn_down", 12288, 4096},  {"gpt-oss-20b", "attn_q", 2880, 4096},
};

constexpr int kPageRows = 16;
constexpr int kConvKernel = 4;
constexpr int kDeltaNetChunk = 64;

bool is_float(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }

// The largest error the comparison allows: quantized weights are multiplied with quantized activations on some
// paths and f32 ones on others, and caches of f16 or q8_0 round what they store.
double limit_of(const OpCase& c) {
    if (c.op == "attend" || c.op == "attend_prompt") return c.cache == backend::KvType::f32 ? 1e-7 : 5e-4;
    if (c.op == "delta_net_step" || c.op == "delta_net_prompt") return 1e-7;
    if (c.op == "rms_norm") return 1e-10;
    // BF16 weights: one backend may round the activations to bf16 (8 bits of mantissa) and the other not.
    if (c.type == TensorType::BF16) return 5e-5;
    return is_float(c.type) ? 1e-6 : 5e-4;
}

struct Nmse {
    double err2 = 0, ref2 = 0;
    bool finite = true;
    void add(const std::vector<float>& got, const std::vector<float>& want) {
        for (size_t i = 0; i < want.size(); ++i) {
            if (!std::isfinite(got[i])) finite = false;
            const double d = double(got[i]) - want[i];
            err2 += d * d;
            ref2 += double(want[i]) * want[i];
        }
    }
    // A reference of zeros compares nothing: a failure too.
    double value() const {
        return finite && ref2 > 0 ? err2 / ref2 : std::numeric_limits<double>::infinity();
    }
};

std::vector<float> get(Backend& be, const Act& a) {
    std::vector<float> v(size_t(a.size()));
    be.download(a, v);
    return v;
}

Act put(Backend& be, const std::vector<float>& v, int64_t rows, int64_t cols) {
    Act a = be.alloc(rows, cols);
    be.upload(a, v);
    return a;
}

// Everything one backend holds for a case, freed with it.
struct Held {
    Backend& be;
    std::vector<Act> acts;
    std::vector<KvLayer> kvs;
    std::vector<backend::IdAct> ids;
    explicit Held(Backend& b) : be(b) {}
    ~Held() {
        for (Act& a : acts) be.free(a);
        for (KvLayer& k : kvs) be.free(k);
        for (backend::IdAct& i : ids) be.free(i);
    }
    Act act(const std::vector<float>& v, int64_t rows, int64_t cols) {
        return acts.emplace_back(put(be, v, rows, cols));
    }
    Act zeros(int64_t rows, int64_t cols) { return acts.emplace_back(be.alloc(rows, cols)); }
};

// A case's inputs, made once and given to both backends: the host tensors and activations.
struct Inputs {
    std::vector<std::unique_ptr<HostTensor>> tensors;
    std::vector<std::vector<float>> values;
};

// One backend's run of a case: sets up what it needs (alone: every row or sequence in an op of its own) and returns
// a function that queues the op(s), and the outputs to compare after it ran.
struct Run {
    std::function<void()> op;
    std::vector<Act> outputs;
};

Run setup_matmul(const OpCase& c, const Inputs& in, Held& h, bool alone) {
    const Weight w = h.be.load_weight(in.tensors[0]->info);
    const Act x = h.act(in.values[0], c.rows, c.cols), out = h.zeros(c.rows, c.n_out);
    Backend& be = h.be;
    if (!alone) return {[&be, w, x, out] { Act o = out; be.matmul(w, x, o); }, {out}};
    return {[&be, w, x, out, rows = c.rows] {
                for (int r = 0; r < rows; ++r) {
                    Act o = Backend::rows_of(out, r, 1);
                    be.matmul(w, Backend::rows_of(x, r, 1), o);
                }
            },
            {out}};
}

Run setup_ffn_gated(const OpCase& c, const Inputs& in, Held& h, bool alone) {
    const Weight gate = h.be.load_weight(in.tensors[0]->info), up = h.be.load_weight(in.tensors[1]->info);
    const Act x = h.act(in.values[0], c.rows, c.cols), out = h.zeros(c.rows, c.n_out), tmp = h.zeros(c.rows, c.n_out);
    Backend& be = h.be;
    return {[&be, gate, up, x, out, tmp, rows = c.rows, alone] {
                for (int r = 0; r < (alone ? rows : 1); ++r) {
                    const int n = alone ? 1 : rows;
                    Act o = Backend::rows_of(out, r, n), t = Backend::rows_of(tmp, r, n);
                    be.ffn_gated(gate, up, Backend::rows_of(x, r, n), backend::GatedActivation::swiglu, t, o);
                }
            },
            {out}};
}

// Sequence s holds depth + 7 s positions before its decode row, in pages taken from one pool in a shuffled order.
std::vector<int> seq_depths(const OpCase& c) {
    std::vector<int> d;
    for (int s = 0; s < c.rows; ++s) d.push_back(c.depth + 7 * s);
    return d;
}

struct PageTables {
    std::vector<std::vector<int32_t>> tables;
    int64_t n_pages = 0;
};

PageTables page_tables(const std::vector<int>& depths) {
    PageTables p;
    for (int d : depths) p.n_pages += (d + 1 + kPageRows - 1) / kPageRows;
    std::vector<int32_t> order(size_t(p.n_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng_engine());
    size_t next = 0;
    for (int d : depths) {
        std::vector<int32_t>& t = p.tables.emplace_back();
        for (int i = 0; i < (d + 1 + kPageRows - 1) / kPageRows; ++i) t.push_back(order[next++]);
    }
    return p;
}

Run setup_attend(const OpCase& c, const Inputs& in, Held& h, bool alone, const PageTables& pt) {
    Backend& be = h.be;
    const int hd = c.head_dim;
    const int64_t width = int64_t{c.n_head_kv} * hd, q_width = int64_t{c.n_head} * hd;
    const std::vector<int> depths = seq_depths(c);
    KvLayer pool = h.kvs.emplace_back(be.alloc_kv(KvLayer{nullptr, nullptr, width, pt.n_pages * kPageRows,
                                                          c.cache, c.cache}));
    auto views = std::make_shared<std::vector<KvLayer>>();
    for (int s = 0; s < c.rows; ++s) {
        KvLayer v = pool;
        v.page_rows = kPageRows;
        v.pages = pt.tables[size_t(s)].data();
        v.n_pages = int64_t(pt.tables[size_t(s)].size());
        views->push_back(v);
    }
    // The positions before the step: random keys and values, as a prompt would have left them.
    for (int s = 0; s < c.rows; ++s) {
        const Act k = h.act(in.values[size_t(3 + 2 * s)], depths[size_t(s)], width);
        const Act v = h.act(in.values[size_t(4 + 2 * s)], depths[size_t(s)], width);
        be.kv_write((*views)[size_t(s)], k, v, 0);
    }
    // Qwen3's per-head norms of q and k before RoPE.
    auto weights = std::make_shared<std::pair<Weight, Weight>>(be.load_weight(in.tensors[0]->info),
                                                               be.load_weight(in.tensors[1]->info));
    const backend::HeadNorms hn{true, true, false, &weights->first, &weights->second, 1e-6f};
    const Act q = h.act(in.values[0], c.rows, q_width), k = h.act(in.values[1], c.rows, width),
              v = h.act(in.values[2], c.rows, width), out = h.zeros(c.rows, q_width);
    backend::RopeParams rope{hd, true, 1e6f, 1.0f};
    backend::AttentionParams ap{c.n_head, c.n_head_kv, hd, 1.0f / std::sqrt(float(hd))};
    auto pos = std::make_shared<std::vector<int32_t>>(depths.begin(), depths.end());
    return {[&be, views, weights, hn, q, k, v, out, rope, ap, pos, alone, rows = c.rows] {
                std::vector<backend::AttentionRange> ranges;
                for (int s = 0; s < rows; ++s) ranges.push_back({s, 1, (*pos)[size_t(s)], &(*views)[size_t(s)]});
                Act qq = q, kk = k, vv = v, oo = out;
                if (!alone) {
                    be.rope_kv_write(qq, kk, vv, hn, ap.head_dim, *pos, rope, ranges);
                    be.attention(qq, ranges, ap, oo);
                    return;
                }
                for (int s = 0; s < rows; ++s) {
                    Act qs = Backend::rows_of(q, s, 1), ks = Backend::rows_of(k, s, 1), vs = Backend::rows_of(v, s, 1),
                        os = Backend::rows_of(out, s, 1);
                    const int64_t p0 = (*pos)[size_t(s)];
                    be.rope_kv_write(qs, ks, vs, hn, ap.head_dim, std::span(*pos).subspan(size_t(s), 1), rope,
                                     (*views)[size_t(s)], p0);
                    be.attention(qs, (*views)[size_t(s)], p0, ap, os);
                }
            },
            {out, q}};
}

Run setup_delta_net(const OpCase& c, const Inputs& in, Held& h, bool alone) {
    Backend& be = h.be;
    backend::DeltaNetParams p;
    p.n_k = c.n_head_kv;
    p.n_v = c.n_head;
    p.d_k = p.d_v = c.head_dim;
    p.scale = 1.0f / std::sqrt(float(c.head_dim));
    const int64_t key = int64_t{p.n_k} * p.d_k, value = int64_t{p.n_v} * p.d_v, conv_dim = 2 * key + value;
    auto w = std::make_shared<std::vector<Weight>>();
    for (const auto& t : in.tensors) w->push_back(be.load_weight(t->info));
    const Act qkv = h.act(in.values[0], c.rows, conv_dim), z = h.act(in.values[1], c.rows, value),
              a = h.act(in.values[2], c.rows, p.n_v), b = h.act(in.values[3], c.rows, p.n_v);
    auto conv_states = std::make_shared<std::vector<Act>>(), states = std::make_shared<std::vector<Act>>();
    for (int s = 0; s < c.rows; ++s) {
        conv_states->push_back(h.act(in.values[size_t(4 + 2 * s)], kConvKernel - 1, conv_dim));
        states->push_back(h.act(in.values[size_t(5 + 2 * s)], p.n_v, int64_t{p.d_k} * p.d_v));
    }
    const Act conv = h.zeros(c.rows, conv_dim), g = h.zeros(c.rows, p.n_v), beta = h.zeros(c.rows, p.n_v),
              out = h.zeros(c.rows, value);
    Run r{[&be, w, qkv, z, a, b, conv_states, states, conv, g, beta, out, p, alone, rows = c.rows] {
              const backend::DeltaNetWeights dw{&(*w)[0], &(*w)[1], &(*w)[2], &(*w)[3]};
              if (!alone) {
                  std::vector<Act*> cs, ss;
                  for (int s = 0; s < rows; ++s) {
                      cs.push_back(&(*conv_states)[size_t(s)]);
                      ss.push_back(&(*states)[size_t(s)]);
                  }
                  Act cv = conv, gg = g, bb = beta, oo = out;
                  be.delta_net_step(qkv, z, a, b, dw, 1e-6f, cs, ss, p, cv, gg, bb, oo);
                  return;
              }
              for (int s = 0; s < rows; ++s) {
                  auto row = [s](const Act& x) { return Backend::rows_of(x, s, 1); };
                  Act cv = row(conv), gg = row(g), bb = row(beta), oo = row(out);
                  be.delta_net_step(row(qkv), row(z), row(a), row(b), dw, 1e-6f, (*conv_states)[size_t(s)],
                                    (*states)[size_t(s)], p, cv, gg, bb, oo);
              }
          },
          {out}};
    for (int s = 0; s < c.rows; ++s) {
        r.outputs.push_back((*conv_states)[size_t(s)]);
        r.outputs.push_back((*states)[size_t(s)]);
    }
    return r;
}

// A prompt of c.rows tokens of one sequence on a paged cache: its rows rotated and written, then attended to in one
// call (alone: each row written and attended to at its own position, as decode steps would).
Run setup_attend_prompt(const OpCase& c, const Inputs& in, Held& h, bool alone, const PageTables& pt) {
    Backend& be = h.be;
    const int hd = c.head_dim;
    const int64_t width = int64_t{c.n_head_kv} * hd, q_width = int64_t{c.n_head} * hd;
    KvLayer pool = h.kvs.emplace_back(be.alloc_kv(KvLayer{nullptr, nullptr, width, pt.n_pages * kPageRows,
                                                          c.cache, c.cache}));
    auto view = std::make_shared<KvLayer>(pool);
    view->page_rows = kPageRows;
    view->pages = pt.tables[0].data();
    view->n_pages = int64_t(pt.tables[0].size());
    auto weights = std::make_shared<std::pair<Weight, Weight>>(be.load_weight(in.tensors[0]->info),
                                                               be.load_weight(in.tensors[1]->info));
    const backend::HeadNorms hn{true, true, false, &weights->first, &weights->second, 1e-6f};
    const Act q = h.act(in.values[0], c.rows, q_width), k = h.act(in.values[1], c.rows, width),
              v = h.act(in.values[2], c.rows, width), out = h.zeros(c.rows, q_width);
    const backend::RopeParams rope{hd, true, 1e6f, 1.0f};
    backend::AttentionParams ap{c.n_head, c.n_head_kv, hd, 1.0f / std::sqrt(float(hd))};
    ap.window = c.window;
    auto pos = std::make_shared<std::vector<int32_t>>(size_t(c.rows));
    std::iota(pos->begin(), pos->end(), 0);
    return {[&be, view, weights, hn, q, k, v, out, rope, ap, pos, alone, rows = c.rows] {
                if (!alone) {
                    const backend::AttentionRange all{0, rows, 0, view.get()};
                    Act qq = q, kk = k, vv = v, oo = out;
                    be.rope_kv_write(qq, kk, vv, hn, ap.head_dim, *pos, rope, {&all, 1});
                    be.attention(qq, {&all, 1}, ap, oo);
                    return;
                }
                for (int t = 0; t < rows; ++t) {
                    Act qs = Backend::rows_of(q, t, 1), ks = Backend::rows_of(k, t, 1), vs = Backend::rows_of(v, t, 1),
                        os = Backend::rows_of(out, t, 1);
                    be.rope_kv_write(qs, ks, vs, hn, ap.head_dim, std::span(*pos).subspan(size_t(t), 1), rope, *view,
                                     t);
                    be.attention(qs, *view, t, ap, os);
                }
            },
            {out, q}};
}

// A prompt through the delta-net recurrence: in its chunked form (alone: the recurrence token by token).
Run setup_delta_net_prompt(const OpCase& c, const Inputs& in, Held& h, bool alone) {
    backend::DeltaNetParams p;
    p.n_k = c.n_head_kv;
    p.n_v = c.n_head;
    p.d_k = p.d_v = c.head_dim;
    p.scale = 1.0f / std::sqrt(float(c.head_dim));
    const int64_t key = int64_t{p.n_k} * p.d_k, value = int64_t{p.n_v} * p.d_v;
    const Act q = h.act(in.values[0], c.rows, key), k = h.act(in.values[1], c.rows, key),
              v = h.act(in.values[2], c.rows, value), g = h.act(in.values[3], c.rows, p.n_v),
              beta = h.act(in.values[4], c.rows, p.n_v), state = h.act(in.values[5], p.n_v, int64_t{p.d_k} * p.d_v),
              out = h.zeros(c.rows, value);
    return {[&be = h.be, q, k, v, g, beta, state, out, p, alone] {
                Act st = state, oo = out;
                if (alone) be.delta_net(q, k, v, g, beta, st, p, oo);
                else be.delta_net_chunked(q, k, v, g, beta, st, p, kDeltaNetChunk, oo);
            },
            {out, state}};
}

Run setup_rms_norm(const OpCase& c, const Inputs& in, Held& h, bool alone) {
    const Act x = h.act(in.values[0], c.rows, c.cols), out = h.zeros(c.rows, c.cols);
    return {[&be = h.be, x, out, alone, rows = c.rows, cols = c.cols] {
                for (int r = 0; r < (alone ? rows : 1); ++r) {
                    const int n = alone ? 1 : rows;
                    Act o = Backend::rows_of(out, r, n);
                    be.rms_norm(Backend::rows_of(x, r, n), nullptr, 1e-6f, cols, o);
                }
            },
            {out}};
}

Run setup_moe(const OpCase& c, const Inputs& in, Held& h, bool alone) {
    Backend& be = h.be;
    auto w = std::make_shared<std::vector<Weight>>();
    for (const auto& t : in.tensors) w->push_back(be.load_weight(t->info));
    const Act x = h.act(in.values[0], c.rows, c.cols), logits = h.act(in.values[1], c.rows, c.n_expert);
    const Act weights = h.zeros(c.rows, c.k), out = h.zeros(c.rows, c.cols);
    const backend::IdAct ids = h.ids.emplace_back(be.alloc_ids(c.rows, c.k));
    {
        backend::IdAct i = ids;
        Act wt = weights;
        be.moe_route(logits, c.k, true, i, wt);
    }
    const bool oai = c.type == TensorType::MXFP4;
    return {[&be, w, x, ids, weights, out, alone, oai, rows = c.rows] {
                backend::MoeWeights mw;
                mw.gate = &(*w)[0];
                mw.up = &(*w)[1];
                mw.down = &(*w)[2];
                mw.act = oai ? backend::MoeActivation::swiglu_oai : backend::MoeActivation::swiglu;
                for (int r = 0; r < (alone ? rows : 1); ++r) {
                    const int n = alone ? 1 : rows;
                    const backend::IdAct ir{ids.data + int64_t{r} * ids.cols, n, ids.cols};
                    Act o = Backend::rows_of(out, r, n);
                    be.moe_ffn(Backend::rows_of(x, r, n), ir, Backend::rows_of(weights, r, n), mw, o);
                }
            },
            {out}};
}

Inputs make_inputs(const OpCase& c) {
    Inputs in;
    auto floats = [&](int64_t n, float lo = -1.0f, float hi = 1.0f) {
        in.values.push_back(random_floats(size_t(n), lo, hi));
    };
    if (c.op == "matmul") {
        in.tensors.push_back(random_tensor(c.type, c.cols, c.n_out, "blk.0." + c.tensor + ".weight"));
        floats(c.rows * c.cols);
    } else if (c.op == "ffn_gated") {
        in.tensors.push_back(random_tensor(c.type, c.cols, c.n_out, "blk.0.ffn_gate.weight"));
        in.tensors.push_back(random_tensor(c.type, c.cols, c.n_out, "blk.0.ffn_up.weight"));
        floats(c.rows * c.cols);
    } else if (c.op == "attend" || c.op == "attend_prompt") {
        const int64_t width = int64_t{c.n_head_kv} * c.head_dim;
        in.tensors.push_back(random_tensor(TensorType::F32, c.head_dim, 1, "blk.0.attn_q_norm.weight"));
        in.tensors.push_back(random_tensor(TensorType::F32, c.head_dim, 1, "blk.0.attn_k_norm.weight"));
        floats(int64_t{c.rows} * c.n_head * c.head_dim);
        floats(c.rows * width);
        floats(c.rows * width);
        if (c.op == "attend")  // the keys and values each decode row's sequence holds before it
            for (int d : seq_depths(c)) {
                floats(d * width);
                floats(d * width);
            }
    } else if (c.op == "delta_net_step") {
        const int64_t key = int64_t{c.n_head_kv} * c.head_dim, value = int64_t{c.n_head} * c.head_dim;
        const int64_t conv_dim = 2 * key + value;
        in.tensors.push_back(random_tensor(TensorType::F32, kConvKernel, conv_dim, "blk.0.ssm_conv1d.weight"));
        in.tensors.push_back(random_tensor(TensorType::F32, c.n_head, 1, "blk.0.ssm_dt.bias"));
        auto a = random_tensor(TensorType::F32, c.n_head, 1, "blk.0.ssm_a");
        for (size_t i = 0; i < a->bytes.size(); i += 4) {  // -exp(A_log) < 0: every head decays
            float f;
            std::memcpy(&f, a->bytes.data() + i, 4);
            f = -0.1f - std::fabs(f);
            std::memcpy(a->bytes.data() + i, &f, 4);
        }
        in.tensors.push_back(std::move(a));
        in.tensors.push_back(random_tensor(TensorType::F32, c.head_dim, 1, "blk.0.ssm_norm.weight"));
        floats(c.rows * conv_dim);
        floats(c.rows * value);
        floats(int64_t{c.rows} * c.n_head);
        floats(int64_t{c.rows} * c.n_head);
        for (int s = 0; s < c.rows; ++s) {
            floats((kConvKernel - 1) * conv_dim);
            floats(int64_t{c.n_head} * c.head_dim * c.head_dim, -0.05f, 0.05f);
        }
    } else if (c.op == "delta_net_prompt") {
        // Keys and queries of about unit length, decays exp(g) near 0.9, as a model's are.
        const int64_t key = int64_t{c.n_head_kv} * c.head_dim, value = int64_t{c.n_head} * c.head_dim;
        const float unit = 1.7f / std::sqrt(float(c.head_dim));
        floats(c.rows * key, -unit, unit);
        floats(c.rows * key, -unit, unit);
        floats(c.rows * value);
        floats(int64_t{c.rows} * c.n_head, -0.2f, -0.01f);
        floats(int64_t{c.rows} * c.n_head, 0.1f, 0.9f);
        floats(int64_t{c.n_head} * c.head_dim * c.head_dim, -0.1f, 0.1f);
    } else if (c.op == "rms_norm") {
        floats(c.rows * c.cols, -4.0f, 4.0f);
    } else if (c.op == "moe_ffn") {
        const int64_t ne = c.n_expert;
        in.tensors.push_back(random_tensor(c.type, c.cols, c.n_out * ne, "blk.0.ffn_gate_exps.weight", ne));
        in.tensors.push_back(random_tensor(c.type, c.cols, c.n_out * ne, "blk.0.ffn_up_exps.weight", ne));
        in.tensors.push_back(random_tensor(c.type, c.n_out, c.cols * ne, "blk.0.ffn_down_exps.weight", ne));
        floats(c.rows * c.cols);
        floats(int64_t{c.rows} * c.n_expert, -4.0f, 4.0f);
    } else {
        throw std::invalid_argument("no op " + c.op);
    }
    return in;
}

Run setup(const OpCase& c, const Inputs& in, Held& h, bool alone, const PageTables& pt) {
    if (c.op == "matmul") return setup_matmul(c, in, h, alone);
    if (c.op == "ffn_gated") return setup_ffn_gated(c, in, h, alone);
    if (c.op == "attend") return setup_attend(c, in, h, alone, pt);
    if (c.op == "delta_net_step") return setup_delta_net(c, in, h, alone);
    if (c.op == "attend_prompt") return setup_attend_prompt(c, in, h, alone, pt);
    if (c.op == "delta_net_prompt") return setup_delta_net_prompt(c, in, h, alone);
    if (c.op == "rms_norm") return setup_rms_norm(c, in, h, alone);
    return setup_moe(c, in, h, alone);
}

// What a case's i-th output (Run::outputs) holds.
std::string output_name(const OpCase& c, size_t i) {
    if (i == 0) return "the output";
    if (c.op == "attend" || c.op == "attend_prompt") return "the rotated queries";
    if (c.op == "delta_net_prompt") return "the delta-rule state";
    const std::string seq = "sequence " + std::to_string((i - 1) / 2);
    return seq + ((i - 1) % 2 ? "'s delta-rule state" : "'s conv window");
}

std::string lower_type(TensorType t) { return std::string(gguf::type_name(t)); }

}  // namespace

std::string OpCase::name() const {
    std::string s = op + " " + model;
    if (!tensor.empty()) s += " " + tensor;
    if (op == "attend") s += std::string(" cache ") + backend::kv_type_name(cache) + " depth " + std::to_string(depth);
    if (op == "attend_prompt") s += std::string(" cache ") + backend::kv_type_name(cache);
    if (window > 0) s += " window " + std::to_string(window);
    if (op == "matmul" || op == "ffn_gated" || op == "moe_ffn") s += " " + lower_type(type);
    if (op == "rms_norm") s += " cols " + std::to_string(cols);
    return s + (op == "attend_prompt" || op == "delta_net_prompt" ? " tokens " : " rows ") + std::to_string(rows);
}

std::string OpCase::id() const {
    std::string s = name();
    for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
}

double OpCase::bytes() const {
    if (op == "matmul") return double(gguf::row_bytes(type, size_t(cols))) * double(n_out);
    if (op == "ffn_gated") return 2.0 * double(gguf::row_bytes(type, size_t(cols))) * double(n_out);
    if (op == "moe_ffn") {
        // Each expert that some row picks is read once: at most n_expert, at most rows * k.
        const double used = std::min<double>(n_expert, double(rows) * k);
        return used * 3.0 * double(gguf::row_bytes(type, size_t(cols))) * double(n_out);
    }
    if (op == "attend") {
        double positions = 0;
        for (int s = 0; s < rows; ++s) positions += depth + 7 * s + 1;
        return 2.0 * double(backend::kv_plane_bytes(cache, int64_t{n_head_kv} * head_dim, int64_t(positions)));
    }
    if (op == "attend_prompt")
        return 2.0 * double(backend::kv_plane_bytes(cache, int64_t{n_head_kv} * head_dim, int64_t{rows}));
    if (op == "rms_norm") return 2.0 * 4.0 * double(rows) * double(cols);
    // delta_net_step: each sequence's state, read and written; delta_net_prompt: the one state, and its tokens' q, k,
    // v and output
    const double state = 2.0 * 4.0 * double(n_head) * head_dim * head_dim;
    if (op == "delta_net_prompt") return state + 4.0 * double(rows) * (2.0 * n_head_kv + 2.0 * n_head) * head_dim;
    return double(rows) * state;
}

bool OpCase::prompt() const { return op == "attend_prompt" || op == "delta_net_prompt" || rows > 64; }

double OpCase::flops() const {
    if (op == "matmul") return 2.0 * rows * double(cols) * double(n_out);
    if (op == "ffn_gated") return 4.0 * rows * double(cols) * double(n_out);
    if (op == "moe_ffn") return 6.0 * rows * double(k) * double(cols) * double(n_out);
    if (op == "attend_prompt") {
        // 2 n_head head_dim for each of Q K^T and P V per visible (query, key) pair
        double pairs = 0;
        for (int64_t t = 0; t < rows; ++t) pairs += double(window > 0 ? std::min(t + 1, window) : t + 1);
        return 4.0 * n_head * double(head_dim) * pairs;
    }
    if (op == "delta_net_prompt") {
        // Per token and value head: S0^T k and S0^T q, T r, B delta, the state update; per token and key head the
        // chunk's two Gram matrices.
        const double per_token = double(n_head) * (6.0 * head_dim * head_dim + 4.0 * kDeltaNetChunk * head_dim) +
                                 double(n_head_kv) * 4.0 * kDeltaNetChunk * head_dim;
        return per_token * rows;
    }
    return 0;
}

std::vector<OpCase> op_table(bool full) {
    std::vector<OpCase> cases;
    const std::vector<int> all_rows = {1, 2, 4, 8, 16, 32, 64};
    const std::vector<int> ci_rows = {1, 3, 8};
    const std::vector<int>& rows = full ? all_rows : ci_rows;
    const std::vector<TensorType> full_types = {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K,
                                                TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_XS,
                                                TensorType::MXFP4, TensorType::F16,  TensorType::BF16};
    const std::vector<TensorType> ci_types = {TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K};
    // A prompt's rows: the prefill products of Qwen3-8B's projections.
    std::vector<int> prompt_rows = rows;
    prompt_rows.push_back(512);
    for (const Projection& p : kProjections) {
        if (!full && std::string(p.model) != "qwen3-0.6b") continue;
        const bool prefill = full && std::string(p.model) == "qwen3-8b";
        for (TensorType t : full ? full_types : ci_types) {
            if (p.cols % gguf::traits(t).block_elems != 0) continue;
            for (int r : prefill ? prompt_rows : rows) {
                OpCase c;
                c.op = "matmul";
                c.model = p.model;
                c.tensor = p.tensor;
                c.type = t;
                c.rows = r;
                c.cols = p.cols;
                c.n_out = p.n_out;
                cases.push_back(c);
                if (std::string(p.tensor) == "ffn_up" && r <= 64) {
                    c.op = "ffn_gated";
                    c.tensor = "ffn_gate+up";
                    cases.push_back(c);
                }
            }
        }
    }
    struct Heads {
        const char* model;
        int n_head, n_head_kv, head_dim;
    };
    const std::vector<Heads> heads = full ? std::vector<Heads>{{"qwen3-8b", 32, 8, 128}, {"gpt-oss-20b", 64, 8, 64},
                                                               {"qwen3.6-35b-a3b", 16, 2, 256}}
                                          : std::vector<Heads>{{"qwen3-0.6b", 16, 8, 128}};
    for (const Heads& hd : heads)
        for (backend::KvType kt : {backend::KvType::f16, backend::KvType::q8_0, backend::KvType::f32})
            for (int depth : full ? std::vector<int>{100, 2000} : std::vector<int>{40})
                for (int r : rows) {
                    OpCase c;
                    c.op = "attend";
                    c.model = hd.model;
                    c.cache = kt;
                    c.rows = r;
                    c.n_head = hd.n_head;
                    c.n_head_kv = hd.n_head_kv;
                    c.head_dim = hd.head_dim;
                    c.depth = depth;
                    cases.push_back(c);
                }
    // Prompts' attention over an f16 cache: the attention layers' shapes, sliding windows where a model has them.
    struct PromptHeads {
        const char* model;
        int n_head, n_head_kv, head_dim;
        int64_t window;
    };
    const std::vector<PromptHeads> prompt_heads =
        full ? std::vector<PromptHeads>{{"qwen3-8b", 32, 8, 128, 0},          {"qwen3.6-35b-a3b", 16, 2, 256, 0},
                                        {"gpt-oss-20b", 64, 8, 64, 0},        {"gpt-oss-20b", 64, 8, 64, 128},
                                        {"gemma-4-26b-a4b", 16, 2, 512, 0},   {"gemma-4-26b-a4b", 16, 8, 256, 1024}}
             : std::vector<PromptHeads>{{"qwen3-0.6b", 16, 8, 128, 0}, {"qwen3-0.6b", 16, 8, 128, 16}};
    for (const PromptHeads& ph : prompt_heads)
        for (int n : full ? std::vector<int>{512, 2048} : std::vector<int>{40}) {
            OpCase c;
            c.op = "attend_prompt";
            c.model = ph.model;
            c.rows = n;
            c.n_head = ph.n_head;
            c.n_head_kv = ph.n_head_kv;
            c.head_dim = ph.head_dim;
            c.window = ph.window;
            cases.push_back(c);
        }
    // Prompts through the chunked delta-net: Qwen3.6-35B-A3B's 16 key and 32 value heads, Qwen3.5's 48 value heads; on
    // the CPU a whole chunk and part of the next.
    for (int n_v : full ? std::vector<int>{32, 48} : std::vector<int>{32})
        for (int n : full ? std::vector<int>{512, 2048} : std::vector<int>{70}) {
            OpCase c;
            c.op = "delta_net_prompt";
            c.model = n_v == 32 ? "qwen3.6-35b-a3b" : "qwen3.5";
            c.rows = n;
            c.n_head = n_v;
            c.n_head_kv = 16;
            c.head_dim = 128;
            cases.push_back(c);
        }
    for (int r : rows) {  // the hidden state of Qwen3-8B (Qwen3-0.6B on the CPU)
        OpCase c;
        c.op = "rms_norm";
        c.model = full ? "qwen3-8b" : "qwen3-0.6b";
        c.rows = r;
        c.cols = full ? 4096 : 1024;
        cases.push_back(c);
    }
    for (int r : rows) {  // Qwen3.6-35B-A3B's delta-net: 16 key and 32 value heads of 128
        OpCase c;
        c.op = "delta_net_step";
        c.model = "qwen3.6-35b-a3b";
        c.rows = r;
        c.n_head = 32;
        c.n_head_kv = 16;
        c.head_dim = 128;
        cases.push_back(c);
    }
    struct Experts {
        const char* model;
        int64_t n_embd, n_ff;
        int n_expert, k;
        TensorType type;
    };
    const std::vector<Experts> experts =
        full ? std::vector<Experts>{{"qwen3.6-35b-a3b", 2048, 512, 256, 8, TensorType::Q4_K},
                                    {"qwen3.6-35b-a3b", 2048, 512, 256, 8, TensorType::Q8_0},
                                    {"gpt-oss-20b", 2880, 2880, 32, 4, TensorType::MXFP4}}
             : std::vector<Experts>{{"qwen3.6-35b-a3b", 2048, 512, 32, 8, TensorType::Q4_K}};
    for (const Experts& e : experts)
        for (int r : full ? prompt_rows : rows) {
            OpCase c;
            c.op = "moe_ffn";
            c.model = e.model;
            c.tensor = std::to_string(e.n_expert) + " experts";
            c.type = e.type;
            c.rows = r;
            c.cols = e.n_embd;
            c.n_out = e.n_ff;
            c.n_expert = e.n_expert;
            c.k = e.k;
            cases.push_back(c);
        }
    return cases;
}

// The page tables of a case's sequences: each decode row's sequence (attend), the prompt's (attend_prompt).
PageTables case_pages(const OpCase& c) {
    if (c.op == "attend") return page_tables(seq_depths(c));
    if (c.op == "attend_prompt") return page_tables({c.rows - 1});
    return {};
}

CaseResult run_case(const OpCase& c, Backend& test, Backend& ref, bool ref_alone) {
    const Inputs in = make_inputs(c);
    const PageTables pt = case_pages(c);
    Held ht(test), hr(ref);
    const Run rt = setup(c, in, ht, false, pt), rr = setup(c, in, hr, ref_alone, pt);
    rt.op();
    rr.op();
    CaseResult res;
    res.limit = limit_of(c);
    for (size_t i = 0; i < rt.outputs.size(); ++i) {
        Nmse n;
        n.add(get(test, rt.outputs[i]), get(ref, rr.outputs[i]));
        if (i == 0 || n.value() > res.nmse) {
            res.nmse = n.value();
            res.what = output_name(c, i);
        }
    }
    return res;
}

int copies_for(const OpCase& c, double cold_bytes) {
    return cold_bytes > 0 ? int(std::clamp(std::ceil(cold_bytes / c.bytes()), 1.0, double(kMostCopies))) : 1;
}

double time_case(const OpCase& c, Backend& be, int reps, double cold_bytes) {
    const Inputs in = make_inputs(c);
    const PageTables pt = case_pages(c);
    const int copies = copies_for(c, cold_bytes);
    std::vector<std::unique_ptr<Held>> held;
    std::vector<Run> runs;
    for (int i = 0; i < copies; ++i) {
        held.push_back(std::make_unique<Held>(be));
        runs.push_back(setup(c, in, *held.back(), false, pt));
    }
    // The calls as one step that a backend may record and replay (a CUDA graph), so that launch gaps do not count:
    // the first round runs eagerly, the second records, the others replay; the median of five of them. A prompt's
    // ops run eagerly, as a model's prefill does (a MoE layer's reads back how its rows fall to experts).
    const uint64_t shape = c.prompt() ? Backend::kEagerStep : 1;
    const int32_t id = 0;
    const auto round = [&] {
        be.run_step(held.front().get(), shape, {&id, 1}, {&id, 1}, [&] {
            for (int i = 0; i < reps; ++i) runs[size_t(i % copies)].op();
            return Act{};
        });
    };
    round();
    round();
    be.synchronize();
    std::vector<double> us;
    for (int k = 0; k < 5; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        round();
        be.synchronize();
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps);
    }
    be.forget_steps(held.front().get());
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

}  // namespace zinc::test
