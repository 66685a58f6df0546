// The public ops of Backend: each checks its arguments once for every backend, then calls the backend's do_<op>.
// A message names the op and, where there is one, the weight ("matmul blk.0.attn_q.weight: shape mismatch").
#include "backend/backend.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <utility>
#include <stdexcept>
#include <string>

namespace zinc::backend {
namespace {

using gguf::TensorType;

// "<op>" or "<op> <weight name>": how a message names the op.
std::string op_of(const char* op, const Weight* w) {
    return w && !w->name.empty() ? std::string(op) + " " + w->name : std::string(op);
}

[[noreturn]] void fail(const std::string& op, const std::string& what) {
    throw std::invalid_argument(op + ": " + what);
}

void check_same_shape(const Act& a, const Act& b, const std::string& op) {
    if (a.rows != b.rows || a.cols != b.cols) fail(op, "shape mismatch");
}

void check_shape(const Act& a, int64_t rows, int64_t cols, const char* op, const char* what) {
    if (a.rows != rows || a.cols != cols)
        fail(op, std::string(what) + " has shape " + std::to_string(a.rows) + "x" + std::to_string(a.cols) +
                     ", expected " + std::to_string(rows) + "x" + std::to_string(cols));
}

void check_group(const Act& x, int64_t group, const char* op) {
    if (group <= 0 || x.cols % group != 0) fail(op, "bad group");
}

// w holds exactly n f32 values; `what` says what it is for ("sinks", "gate bias"), or is empty.
void check_f32_vector(const Weight& w, int64_t n, const char* op, const std::string& what = {}) {
    if (w.type != TensorType::F32 || w.cols * w.rows != n)
        fail(op, (what.empty() ? "" : what + " ") + w.name + " must be f32 with " + std::to_string(n) + " values");
}

// Whether the n_a floats at a and the n_b floats at b share memory.
bool overlap(const float* a, int64_t na, const float* b, int64_t nb) {
    const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return na > 0 && nb > 0 && pa < pb + uintptr_t(nb) * sizeof(float) && pb < pa + uintptr_t(na) * sizeof(float);
}

void check_size(int64_t rows, int64_t cols, const char* op) {
    if (rows < 0 || cols < 0 || (cols > 0 && rows > std::numeric_limits<int64_t>::max() / 16 / cols))
        fail(op, "bad size " + std::to_string(rows) + "x" + std::to_string(cols));
}

void check_delta_net(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, const Act& state,
                     const DeltaNetParams& p, const Act& out, const char* op) {
    if (p.n_k <= 0 || p.n_v <= 0 || p.d_k <= 0 || p.d_v <= 0 || p.n_v % p.n_k != 0) fail(op, "bad head counts");
    const int64_t T = q.rows;
    check_shape(q, T, int64_t(p.n_k) * p.d_k, op, "q");
    check_shape(k, T, int64_t(p.n_k) * p.d_k, op, "k");
    check_shape(v, T, int64_t(p.n_v) * p.d_v, op, "v");
    check_shape(g, T, p.n_v, op, "g");
    check_shape(beta, T, p.n_v, op, "beta");
    check_shape(state, p.n_v, int64_t(p.d_k) * p.d_v, op, "state");
    check_shape(out, T, int64_t(p.n_v) * p.d_v, op, "out");
}

void check_delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, const Act& g,
                           const Act& beta, const char* op) {
    const int64_t n = a.cols;
    check_shape(b, a.rows, n, op, "b");
    check_shape(g, a.rows, n, op, "g");
    check_shape(beta, a.rows, n, op, "beta");
    check_f32_vector(dt_bias, n, op);
    check_f32_vector(ssm_a, n, op);
}

void check_conv1d_causal(const Act& x, const Act& state, const Weight& w, const Act& out, const char* op) {
    const int64_t C = x.cols, T = x.rows;
    if (w.type != TensorType::F32 || w.rows != C || w.cols < 1) fail(op, w.name + " must be f32 {K, channels}");
    check_shape(state, w.cols - 1, C, op, "state");
    check_shape(out, T, C, op, "out");
    // Each channel reads its whole input column before writing its outputs, so out may be x itself, but a shifted
    // view of x would read values another channel has already overwritten.
    if (out.data != x.data && overlap(out.data, out.size(), x.data, x.size()))
        fail(op, "out overlaps x without being x");
    if (overlap(state.data, state.size(), x.data, x.size()) || overlap(state.data, state.size(), out.data, out.size()))
        fail(op, "state overlaps x or out");
}

void check_gated_rms_norm(const Act& x, const Weight& w, const Act& z, int64_t group, const Act& out,
                          const char* op) {
    check_shape(out, x.rows, x.cols, op, "out");
    check_shape(z, x.rows, x.cols, op, "z");
    check_group(x, group, op);
    check_f32_vector(w, group, op);
}

void check_shared_expert_add(const Act& a, const Act& b, const Act& gate, const Act& out, const char* op) {
    check_same_shape(a, out, op);
    check_same_shape(b, out, op);
    if (gate.rows != b.rows || (gate.cols != b.cols && gate.cols != 1))
        fail(op, "gate must have b's shape or one column");
    if (overlap(out.data, out.size(), a.data, a.size()) || overlap(out.data, out.size(), b.data, b.size()))
        fail(op, "out must overlap neither a nor b");
}

// One 3-D expert projection {in, out, n_expert} of a MoE layer.
struct Experts {
    int64_t in = 0, out = 0, n = 0;
};

Experts check_experts(const Weight* w, const char* what) {
    if (!w) fail("moe_ffn", std::string("missing ") + what + " weight");
    const Experts e{w->ne[0], w->ne[1], w->ne[2]};
    if (w->ne[3] != 1 || e.in != w->cols || e.out * e.n != w->rows || e.in <= 0 || e.out <= 0 || e.n <= 0)
        fail("moe_ffn", w->name + " is not a 3-D expert tensor");
    return e;
}

void check_extra(const Weight* w, int64_t n, const char* what) {
    if (w) check_f32_vector(*w, n, "moe_ffn", what);
}

// The weight set is consistent: either gate and up or gate_up, expert tensors of matching shapes, extras of the
// right sizes and only those the layout uses; and the activations match it.
void check_moe(const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& mw, const Act& out) {
    const bool merged = mw.gate_up != nullptr;
    if (merged == (mw.gate != nullptr || mw.up != nullptr)) fail("moe_ffn", "give either gate and up, or gate_up");
    const Experts down = check_experts(mw.down, "down");
    const Weight* first_w = merged ? mw.gate_up : mw.gate;
    const Experts first = check_experts(first_w, merged ? "gate_up" : "gate");
    const int64_t n_exp = first.n, n_ff = merged ? first.out / 2 : first.out;
    bool consistent = !(merged && first.out % 2 != 0) && down.in == n_ff && down.n == n_exp;
    if (!merged) {
        const Experts up = check_experts(mw.up, "up");
        consistent = consistent && up.in == first.in && up.out == n_ff && up.n == n_exp;
    }
    if (!consistent)
        fail("moe_ffn", "expert tensors " + first_w->name + ", " + mw.down->name + " have inconsistent shapes");
    const int64_t T = x.rows, K = ids.cols;
    if (x.cols != first.in || ids.rows != T || weights.rows != T || weights.cols != K || out.rows != T ||
        out.cols != down.out)
        fail("moe_ffn", "activation shapes do not match " + first_w->name);
    if (K < 1 || K > n_exp) fail("moe_ffn", "the slots per token must be in [1, n_expert]");
    check_extra(mw.gate_scale, n_exp, "gate scale");
    check_extra(mw.up_scale, n_exp, "up scale");
    check_extra(mw.down_scale, n_exp, "down scale");
    check_extra(mw.gate_bias, n_ff * n_exp, "gate bias");
    check_extra(mw.up_bias, n_ff * n_exp, "up bias");
    check_extra(mw.gate_up_bias, 2 * n_ff * n_exp, "gate_up bias");
    check_extra(mw.down_bias, down.out * n_exp, "down bias");
    if (merged && (mw.gate_scale || mw.gate_bias || mw.up_bias))
        fail("moe_ffn", "gate_up takes up_scale, gate_up_bias");
    if (!merged && mw.gate_up_bias) fail("moe_ffn", "gate_up_bias needs gate_up");
    if (mw.act != MoeActivation::swiglu && mw.act != MoeActivation::geglu && mw.act != MoeActivation::swiglu_oai)
        fail("moe_ffn", "unknown activation");
}

// ---- profiling ----

// The label an op is timed under: its name, and for a product with a weight the weight's type and shape.
std::string profile_label(const char* op, const Weight* w) {
    if (!w) return op;
    return std::string(op) + " " + std::string(gguf::type_name(w->type)) + " " + std::to_string(w->cols) + "x" +
           std::to_string(w->rows);
}

const Weight* mw_first(const MoeWeights& w) { return w.gate_up ? w.gate_up : w.gate; }

}  // namespace

// Times the op it is declared in while profiling is on; nested ops (the parts of a composed default) are not timed
// on their own.
class OpScope {
public:
    OpScope(Backend& be, const char* op, const Weight* w = nullptr) : be_(be) {
        ++be.ops_begun_;
        if (!be.profiling_) return;
        active_ = true;
        if (be.op_depth_++ == 0) be.op_started(profile_label(op, w));
    }
    ~OpScope() {
        if (active_ && --be_.op_depth_ == 0) be_.op_finished();
    }
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;

private:
    Backend& be_;
    bool active_ = false;
};

void Backend::set_profiling(bool on) {
    if (on == profiling_) return;
    profiling_ = on;
    profiling_changed();
}

Act Backend::run_step(const void* owner, uint64_t shape, std::span<const int32_t> ids, std::span<const int32_t> pos,
                      const std::function<Act()>& step, std::span<const int32_t> layout, StepPages pages) {
    (void)owner, (void)shape, (void)ids, (void)pos, (void)layout, (void)pages;
    Act out;
    try {
        out = step();
    } catch (...) {
        clear_side();
        throw;
    }
    if (!clear_side()) throw std::logic_error("run_step: the step left side work unjoined");
    return out;
}

bool Backend::clear_side() {
    const bool none = side_ == Side::none;
    side_ = Side::none;
    return none;
}

void Backend::begin_side() {
    if (side_ != Side::none) throw std::logic_error("begin_side: the side work before is not joined yet");
    side_ = Side::open;
    side_begun();
}

void Backend::end_side() {
    if (side_ != Side::open) throw std::logic_error("end_side: no side work begun");
    side_ = Side::closed;
    side_ended();
}

void Backend::join_side() {
    if (side_ != Side::closed) throw std::logic_error("join_side: no side work ended");
    side_ = Side::none;
    side_joined();
}

std::vector<Backend::OpTime> Backend::take_profile() {
    std::vector<OpTime> out;
    for (const auto& [label, us] : timed_ops()) {
        auto it = std::find_if(out.begin(), out.end(), [&](const OpTime& t) { return t.label == label; });
        if (it == out.end()) it = out.insert(out.end(), OpTime{label, 0, 0});
        ++it->calls;
        it->us += us;
    }
    return out;
}

void Backend::op_started(const std::string& label) {
    host_label_ = label;
    host_start_ = std::chrono::steady_clock::now();
}

void Backend::op_finished() {
    const auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_start_).count();
    host_times_.emplace_back(host_label_, us);
}

std::vector<std::pair<std::string, double>> Backend::timed_ops() { return std::exchange(host_times_, {}); }

// ---- memory ----

Weight Backend::load_weight(const gguf::TensorInfo& t) {
    if (t.nbytes > 0 && !t.data) throw std::runtime_error("tensor " + t.name + ": no data in the file");
    Weight w;
    w.type = t.type;
    w.cols = t.ne[0];
    w.rows = t.ne[1] * t.ne[2] * t.ne[3];
    w.name = t.name;
    for (int i = 0; i < 4; ++i) w.ne[i] = t.ne[i];
    w.data = do_load_weight(t);
    return w;
}

Act Backend::alloc(int64_t rows, int64_t cols) {
    check_size(rows, cols, "alloc");
    ++ops_begun_;
    return do_alloc(rows, cols);
}

const char* kv_type_name(KvType t) {
    switch (t) {
    case KvType::f32: return "f32";
    case KvType::f16: return "f16";
    case KvType::q8_0: return "q8_0";
    }
    return "?";
}

bool parse_kv_type(std::string_view name, KvType& t) {
    for (const KvType c : {KvType::f32, KvType::f16, KvType::q8_0})
        if (name == kv_type_name(c)) {
            t = c;
            return true;
        }
    return false;
}

KvLayer Backend::alloc_kv(const KvLayer& spec) {
    check_size(spec.capacity, spec.width, "alloc_kv");
    for (const KvType t : {spec.type_k, spec.type_v})
        if (t == KvType::q8_0 && spec.width % kKvBlock != 0)
            fail("alloc_kv", "a q8_0 cache needs a width that is a multiple of 32, not " + std::to_string(spec.width));
    KvLayer shape = spec;
    shape.k = shape.v = nullptr;
    ++ops_begun_;
    return do_alloc_kv(shape);
}

IdAct Backend::alloc_ids(int64_t rows, int64_t cols) {
    check_size(rows, cols, "alloc_ids");
    ++ops_begun_;
    return do_alloc_ids(rows, cols);
}

void Backend::free(Act& a) {
    if (!a.data) return;
    ++ops_begun_;
    if (!do_free(a.data)) fail("free", "the activation was not allocated by the " + name() + " backend");
    a = {};
}

void Backend::free(KvLayer& kv) {
    ++ops_begun_;
    for (const void* p : {kv.k, kv.v})
        if (p && !do_free(p)) fail("free", "the KV cache was not allocated by the " + name() + " backend");
    kv = {};
}

void Backend::free(IdAct& ids) {
    if (!ids.data) return;
    ++ops_begun_;
    if (!do_free(ids.data)) fail("free", "the ids were not allocated by the " + name() + " backend");
    ids = {};
}

void Backend::upload(Act& dst, std::span<const float> src) {
    if (static_cast<int64_t>(src.size()) != dst.size()) fail("upload", "size mismatch");
    ++ops_begun_;
    do_upload(dst, src);
}

void Backend::download(const Act& src, std::span<float> dst) {
    if (static_cast<int64_t>(dst.size()) != src.size()) fail("download", "size mismatch");
    do_download(src, dst);
}

// ---- dense layers ----

void Backend::get_rows(const Weight& table, std::span<const int32_t> ids, Act& out) {
    const OpScope scope(*this, "get_rows", &table);
    if (out.cols != table.cols || out.rows != static_cast<int64_t>(ids.size()))
        fail(op_of("get_rows", &table), "shape mismatch");
    for (int32_t id : ids)
        if (id < 0 || id >= table.rows)
            throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary");
    do_get_rows(table, ids, out);
}

void Backend::rms_norm(const Act& x, const Weight* w, float eps, int64_t group, Act& out) {
    const OpScope scope(*this, "rms_norm");
    check_same_shape(x, out, op_of("rms_norm", w));
    check_group(x, group, "rms_norm");
    if (w) check_f32_vector(*w, group, "rms_norm", "weight");
    do_rms_norm(x, w, eps, group, out);
}

void Backend::matmul(const Weight& w, const Act& x, Act& out) {
    const OpScope scope(*this, "matmul", &w);
    if (x.cols != w.cols || out.rows != x.rows || out.cols != w.rows) fail(op_of("matmul", &w), "shape mismatch");
    do_matmul(w, x, out);
}

void Backend::add(const Act& a, const Act& b, Act& out) {
    const OpScope scope(*this, "add");
    check_same_shape(a, b, "add");
    check_same_shape(a, out, "add");
    do_add(a, b, out);
}

void Backend::swiglu(const Act& gate, const Act& up, Act& out) {
    const OpScope scope(*this, "swiglu");
    check_same_shape(gate, up, "swiglu");
    check_same_shape(gate, out, "swiglu");
    do_swiglu(gate, up, out);
}

// ---- attention ----

void Backend::rope(Act& x, int head_dim, std::span<const int32_t> pos, const RopeParams& p) {
    const OpScope scope(*this, "rope");
    if (head_dim <= 0 || x.cols % head_dim != 0 || static_cast<int64_t>(pos.size()) != x.rows ||
        p.n_rot > head_dim || p.n_rot <= 0 || p.n_rot % 2 != 0)
        fail("rope", "bad shape");
    if (p.freq_factors) check_f32_vector(*p.freq_factors, p.n_rot / 2, "rope", "frequency factors");
    do_rope(x, head_dim, pos, p);
}

namespace {

// Positions [from, to) of a cache exist: within its rows, or for a paged one within its page table, whose pages are
// pages of its pool.
void check_positions(const KvLayer& kv, int64_t from, int64_t to, bool pages_ok, const char* op) {
    if (from < 0) throw std::out_of_range(std::string(op) + ": past the cache");
    if (kv.page_rows <= 0) {
        if ((kv.ring ? to - from : to) > kv.capacity) throw std::out_of_range(std::string(op) + ": past the cache");
        return;
    }
    if (!pages_ok) fail(op, "this backend's caches are not paged");
    if (kv.ring || kv.capacity % kv.page_rows != 0 || kv.n_pages < 0 || (kv.n_pages > 0 && !kv.pages))
        fail(op, "a bad paged cache");
    if (to > kv_positions(kv)) throw std::out_of_range(std::string(op) + ": past the sequence's pages");
    const int64_t pool_pages = kv.capacity / kv.page_rows;
    for (int64_t i = from / kv.page_rows; i < (to + kv.page_rows - 1) / kv.page_rows; ++i)
        if (kv.pages[i] < 0 || kv.pages[i] >= pool_pages) fail(op, "a page outside the pool");
}

// The ranges of a step of `rows` rows: each with a cache and inside the rows, no row in two of them, and with `cover`
// every row in one.
void check_ranges(std::span<const AttentionRange> ranges, int64_t rows, bool cover, const char* op) {
    std::vector<bool> taken(static_cast<size_t>(rows), false);
    for (const AttentionRange& r : ranges) {
        if (!r.kv || r.rows <= 0 || r.first < 0 || r.first + r.rows > rows) fail(op, "bad range");
        for (int64_t t = r.first; t < r.first + r.rows; ++t) {
            if (taken[static_cast<size_t>(t)]) fail(op, "ranges overlap");
            taken[static_cast<size_t>(t)] = true;
        }
    }
    if (cover && std::find(taken.begin(), taken.end(), false) != taken.end()) fail(op, "a row in no range");
}

}  // namespace

void Backend::kv_write(KvLayer& kv, const Act& k, const Act& v, int64_t pos0) {
    const OpScope scope(*this, "kv_write");
    if (k.cols != kv.width || v.cols != kv.width || k.rows != v.rows) fail("kv_write", "shape mismatch");
    check_positions(kv, pos0, pos0 + k.rows, pages_kv(), "kv_write");
    do_kv_write(kv, k, v, pos0);
}

void Backend::kv_copy_rows(const KvLayer& src, int64_t src_row, KvLayer& dst, int64_t dst_row, int64_t rows) {
    const OpScope scope(*this, "kv_copy_rows");
    if (src.width != dst.width || src.type_k != dst.type_k || src.type_v != dst.type_v)
        fail("kv_copy_rows", "the layers differ in width or types");
    if (rows < 0 || src_row < 0 || dst_row < 0 || src_row + rows > src.capacity || dst_row + rows > dst.capacity)
        throw std::out_of_range("kv_copy_rows: past the cache");
    if (src.k == dst.k && src_row != dst_row && src_row < dst_row + rows && dst_row < src_row + rows)
        fail("kv_copy_rows", "overlapping rows");
    if (rows > 0 && !(src.k == dst.k && src_row == dst_row)) do_kv_copy_rows(src, src_row, dst, dst_row, rows);
}

void Backend::do_kv_copy_rows(const KvLayer&, int64_t, KvLayer&, int64_t, int64_t) {
    fail("kv_copy_rows", "the " + name() + " backend does not copy cache rows");
}

namespace {

void check_attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, const Act& out,
                     bool pages_ok) {
    const int d = p.head_dim;
    if (d <= 0 || p.n_head_kv <= 0 || q.cols != int64_t(p.n_head) * d || out.cols != q.cols || out.rows != q.rows ||
        kv.width != int64_t(p.n_head_kv) * d || p.n_head % p.n_head_kv != 0 || p.window < 0)
        fail("attention", "shape mismatch");
    if (pos0 < 0) throw std::out_of_range("attention: past the cache");
    if (!kv.ring) check_positions(kv, 0, pos0 + q.rows, pages_ok, "attention");
    // A ring holds the last `capacity` positions written: the first row's window and the rows after it must fit.
    if (kv.ring && (p.window <= 0 || p.window + q.rows - 1 > kv.capacity))
        throw std::out_of_range("attention: a window of " + std::to_string(p.window) + " and " +
                                std::to_string(q.rows) + " rows do not fit in a ring cache of " +
                                std::to_string(kv.capacity) + " rows");
    if ((kv.type_k == KvType::q8_0 || kv.type_v == KvType::q8_0) && d % kKvBlock != 0)
        fail("attention", "a q8_0 cache needs a head_dim that is a multiple of 32");
    if (p.sinks) check_f32_vector(*p.sinks, p.n_head, "attention", "sinks");
}

}  // namespace

void Backend::attention(const Act& q, const KvLayer& kv, int64_t pos0, const AttentionParams& p, Act& out) {
    const OpScope scope(*this, "attention");
    check_attention(q, kv, pos0, p, out, pages_kv());
    do_attention(q, kv, pos0, p, out);
}

void Backend::attention(const Act& q, std::span<const AttentionRange> ranges, const AttentionParams& p, Act& out) {
    const OpScope scope(*this, "attention");
    if (out.rows != q.rows) fail("attention", "shape mismatch");
    check_ranges(ranges, q.rows, false, "attention");
    for (const AttentionRange& r : ranges)
        check_attention(rows_of(q, r.first, r.rows), *r.kv, r.pos0, p, rows_of(out, r.first, r.rows), pages_kv());
    do_attention_ranges(q, ranges, p, out);
}

void Backend::do_attention_ranges(const Act& q, std::span<const AttentionRange> ranges, const AttentionParams& p,
                                  Act& out) {
    for (const AttentionRange& r : ranges) {
        Act out_rows = rows_of(out, r.first, r.rows);
        do_attention(rows_of(q, r.first, r.rows), *r.kv, r.pos0, p, out_rows);
    }
}

// ---- recurrent (gated delta-net) layers ----

void Backend::sigmoid_mul(const Act& x, const Act& gate, Act& out) {
    const OpScope scope(*this, "sigmoid_mul");
    check_shape(out, x.rows, x.cols, "sigmoid_mul", "out");
    if (gate.rows != x.rows || (gate.cols != x.cols && gate.cols != 1))
        fail("sigmoid_mul", "gate must have x's shape or one column");
    do_sigmoid_mul(x, gate, out);
}

void Backend::fill(Act& a, float value) {
    const OpScope scope(*this, "fill");
    do_fill(a, value);
}

void Backend::slice_groups(const Act& src, int64_t group, int64_t offset, Act& out) {
    const OpScope scope(*this, "slice_groups");
    if (group <= 0 || src.cols % group != 0 || out.rows != src.rows) fail("slice_groups", "bad group or rows");
    const int64_t n_groups = src.cols / group;
    if (n_groups == 0 || out.cols % n_groups != 0) fail("slice_groups", "out width is not a whole per group");
    const int64_t width = out.cols / n_groups;
    if (offset < 0 || offset + width > group) fail("slice_groups", "slice outside the group");
    if (src.data == out.data) fail("slice_groups", "out must not alias src");
    do_slice_groups(src, group, offset, out);
}

void Backend::l2_norm(const Act& x, float eps, int64_t group, Act& out) {
    const OpScope scope(*this, "l2_norm");
    check_shape(out, x.rows, x.cols, "l2_norm", "out");
    check_group(x, group, "l2_norm");
    do_l2_norm(x, eps, group, out);
}

void Backend::gated_rms_norm(const Act& x, const Weight& w, const Act& z, float eps, int64_t group, Act& out) {
    const OpScope scope(*this, "gated_rms_norm");
    check_gated_rms_norm(x, w, z, group, out, "gated_rms_norm");
    do_gated_rms_norm(x, w, z, eps, group, out);
}

void Backend::delta_net_gates(const Act& a, const Act& b, const Weight& dt_bias, const Weight& ssm_a, Act& g,
                              Act& beta_out) {
    const OpScope scope(*this, "delta_net_gates");
    check_delta_net_gates(a, b, dt_bias, ssm_a, g, beta_out, "delta_net_gates");
    do_delta_net_gates(a, b, dt_bias, ssm_a, g, beta_out);
}

void Backend::conv1d_causal(const Act& x, Act& state, const Weight& w, bool silu, Act& out) {
    const OpScope scope(*this, "conv1d_causal");
    check_conv1d_causal(x, state, w, out, "conv1d_causal");
    do_conv1d_causal(x, state, w, silu, out);
}

void Backend::delta_net(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                        const DeltaNetParams& p, Act& out) {
    const OpScope scope(*this, "delta_net");
    check_delta_net(q, k, v, g, beta, state, p, out, "delta_net");
    do_delta_net(q, k, v, g, beta, state, p, out);
}

void Backend::delta_net_chunked(const Act& q, const Act& k, const Act& v, const Act& g, const Act& beta, Act& state,
                                const DeltaNetParams& p, int chunk, Act& out) {
    const OpScope scope(*this, "delta_net_chunked");
    check_delta_net(q, k, v, g, beta, state, p, out, "delta_net_chunked");
    if (chunk <= 0) fail("delta_net_chunked", "chunk must be positive");
    do_delta_net_chunked(q, k, v, g, beta, state, p, chunk, out);
}

// ---- mixture of experts ----

void Backend::moe_route(const Act& logits, int k, bool renormalize, IdAct& ids, Act& weights) {
    const OpScope scope(*this, "moe_route");
    if (k <= 0 || k > logits.cols) fail("moe_route", "k must be in [1, n_expert]");
    if (ids.rows != logits.rows || ids.cols != k || weights.rows != logits.rows || weights.cols != k)
        fail("moe_route", "ids and weights must be rows x k");
    do_moe_route(logits, k, renormalize, ids, weights);
}

void Backend::moe_ffn(const Act& x, const IdAct& ids, const Act& weights, const MoeWeights& w, Act& out) {
    const OpScope scope(*this, "moe_ffn", mw_first(w));
    check_moe(x, ids, weights, w, out);
    do_moe_ffn(x, ids, weights, w, out);
}

// ---- activations of gemma4 / gpt-oss ----

void Backend::geglu(const Act& gate, const Act& up, Act& out) {
    const OpScope scope(*this, "geglu");
    check_same_shape(gate, up, "geglu");
    check_same_shape(gate, out, "geglu");
    do_geglu(gate, up, out);
}

void Backend::add_bias(Act& x, const Weight& b) {
    const OpScope scope(*this, "add_bias");
    check_f32_vector(b, x.cols, "add_bias");
    do_add_bias(x, b);
}

void Backend::scale(const Act& x, float s, Act& out) {
    const OpScope scope(*this, "scale");
    check_same_shape(x, out, "scale");
    do_scale(x, s, out);
}

void Backend::softcap(Act& x, float cap) {
    const OpScope scope(*this, "softcap");
    if (!(cap > 0.0f)) fail("softcap", "the cap must be positive");
    do_softcap(x, cap);
}

// ---- fused ops ----
// The checks hold for the sequence each op is defined as, plus the aliasing rules that make that sequence the same as
// computing every output from the inputs as they were on entry (which is what a fused kernel does).

void Backend::matmuls(std::span<const Weight* const> w, const Act& x, std::span<Act* const> out,
                      std::span<const Weight* const> bias) {
    const OpScope scope(*this, "matmuls", w.empty() ? nullptr : w[0]);
    if (w.empty() || w.size() != out.size()) fail("matmuls", "give one output for each weight, at least one");
    if (!bias.empty() && bias.size() != w.size())
        fail("matmuls", "give no biases or one for each weight (null for none)");
    for (size_t i = 0; i < w.size(); ++i) {
        if (!w[i] || !out[i]) fail("matmuls", "null weight or output");
        const Act& o = *out[i];
        const std::string op = op_of("matmuls", w[i]);
        if (x.cols != w[i]->cols || o.rows != x.rows || o.cols != w[i]->rows) fail(op, "shape mismatch");
        // add_bias's check of the bias against the output's width.
        if (!bias.empty() && bias[i]) check_f32_vector(*bias[i], o.cols, op.c_str(), "bias");
        if (overlap(o.data, o.size(), x.data, x.size())) fail(op, "out must not overlap x");
        for (size_t j = 0; j < i; ++j)
            if (overlap(o.data, o.size(), out[j]->data, out[j]->size()))
                fail(op, "out overlaps the output of " + w[j]->name);
    }
    do_matmuls(w, x, out, bias);
}

void Backend::ffn_gated(const Weight& gate, const Weight& up, const Act& x, GatedActivation act, Act& up_tmp,
                        Act& out) {
    const OpScope scope(*this, "ffn_gated", &gate);
    const std::string op = op_of("ffn_gated", &gate);
    if (gate.cols != x.cols || up.cols != x.cols || up.rows != gate.rows)
        fail(op, "shape mismatch with " + up.name);
    check_shape(out, x.rows, gate.rows, "ffn_gated", "out");
    check_shape(up_tmp, x.rows, gate.rows, "ffn_gated", "up_tmp");
    if (act != GatedActivation::swiglu && act != GatedActivation::geglu) fail(op, "unknown activation");
    if (overlap(out.data, out.size(), x.data, x.size()) || overlap(up_tmp.data, up_tmp.size(), x.data, x.size()) ||
        overlap(out.data, out.size(), up_tmp.data, up_tmp.size()))
        fail(op, "out and up_tmp must overlap neither x nor each other");
    do_ffn_gated(gate, up, x, act, up_tmp, out);
}

void Backend::matmul_add(const Weight& w, const Act& x, Act& tmp, Act& out, const Weight* bias) {
    const OpScope scope(*this, "matmul_add", &w);
    const std::string op = op_of("matmul_add", &w);
    if (x.cols != w.cols || out.rows != x.rows || out.cols != w.rows) fail(op, "shape mismatch");
    if (bias) check_f32_vector(*bias, out.cols, op.c_str(), "bias");  // add_bias's check, against tmp's width
    check_shape(tmp, out.rows, out.cols, "matmul_add", "tmp");
    if (overlap(out.data, out.size(), x.data, x.size())) fail(op, "out must not overlap x");
    if (overlap(tmp.data, tmp.size(), x.data, x.size()) || overlap(tmp.data, tmp.size(), out.data, out.size()))
        fail(op, "tmp must overlap neither x nor out");
    do_matmul_add(w, x, tmp, out, bias);
}

void Backend::norm_add(Act& x, const Weight* w, float eps, Act& out, float s) {
    const OpScope scope(*this, "norm_add");
    const std::string op = op_of("norm_add", w);
    check_same_shape(x, out, op);
    check_group(x, x.cols, "norm_add");
    if (w) check_f32_vector(*w, x.cols, "norm_add", "weight");
    if (overlap(out.data, out.size(), x.data, x.size())) fail(op, "out must not overlap x");
    do_norm_add(x, w, eps, out, s);
}

void Backend::rms_norms(const Act& x, std::span<const Weight* const> w, float eps, std::span<Act* const> out,
                        std::span<const float> s) {
    const OpScope scope(*this, "rms_norms");
    if (w.empty() || w.size() != out.size()) fail("rms_norms", "give one output for each weight, at least one");
    if (!s.empty() && s.size() != w.size()) fail("rms_norms", "give no scales or one for each output");
    check_group(x, x.cols, "rms_norms");
    for (size_t i = 0; i < w.size(); ++i) {
        if (!out[i]) fail("rms_norms", "null output");
        const std::string op = op_of("rms_norms", w[i]);
        check_same_shape(x, *out[i], op);
        if (w[i]) check_f32_vector(*w[i], x.cols, "rms_norms", "weight");
        if (overlap(out[i]->data, out[i]->size(), x.data, x.size())) fail(op, "out must not overlap x");
        for (size_t j = 0; j < i; ++j)
            if (overlap(out[i]->data, out[i]->size(), out[j]->data, out[j]->size()))
                fail(op, "the outputs must not overlap each other");
    }
    do_rms_norms(x, w, eps, out, s);
}

void Backend::shared_expert_add(Act& a, Act& b, const Act& gate, Act& out) {
    const OpScope scope(*this, "shared_expert_add");
    check_shared_expert_add(a, b, gate, out, "shared_expert_add");
    do_shared_expert_add(a, b, gate, out);
}

void Backend::shared_expert_add_norm(Act& a, Act& b, const Act& gate, Act& out, const Weight* w, float eps, Act& h) {
    const OpScope scope(*this, "shared_expert_add_norm");
    const std::string op = op_of("shared_expert_add_norm", w);
    check_shared_expert_add(a, b, gate, out, "shared_expert_add_norm");
    check_same_shape(out, h, op);
    if (w) check_f32_vector(*w, out.cols, "shared_expert_add_norm", "weight");
    const Act* others[] = {&a, &b, &gate, &out};
    for (const Act* other : others)
        if (overlap(h.data, h.size(), other->data, other->size()))
            fail(op, "h must overlap none of a, b, gate and out");
    do_shared_expert_add_norm(a, b, gate, out, w, eps, h);
}

void Backend::do_matmuls(std::span<const Weight* const> w, const Act& x, std::span<Act* const> out,
                         std::span<const Weight* const> bias) {
    for (size_t i = 0; i < w.size(); ++i) {
        matmul(*w[i], x, *out[i]);
        if (!bias.empty() && bias[i]) add_bias(*out[i], *bias[i]);
    }
}

void Backend::do_ffn_gated(const Weight& gate, const Weight& up, const Act& x, GatedActivation act, Act& up_tmp,
                           Act& out) {
    matmul(gate, x, out);
    matmul(up, x, up_tmp);
    if (act == GatedActivation::swiglu)
        swiglu(out, up_tmp, out);
    else
        geglu(out, up_tmp, out);
}

void Backend::do_matmul_add(const Weight& w, const Act& x, Act& tmp, Act& out, const Weight* bias) {
    matmul(w, x, tmp);
    if (bias) add_bias(tmp, *bias);
    add(out, tmp, out);
}

void Backend::do_norm_add(Act& x, const Weight* w, float eps, Act& out, float s) {
    rms_norm(x, w, eps, x.cols, x);
    add(out, x, out);
    if (s != 1.0f) scale(out, s, out);
}

void Backend::do_rms_norms(const Act& x, std::span<const Weight* const> w, float eps, std::span<Act* const> out,
                           std::span<const float> s) {
    for (size_t i = 0; i < w.size(); ++i) {
        rms_norm(x, w[i], eps, x.cols, *out[i]);
        if (!s.empty() && s[i] != 1.0f) scale(*out[i], s[i], *out[i]);
    }
}

void Backend::do_shared_expert_add(Act& a, Act& b, const Act& gate, Act& out) {
    sigmoid_mul(b, gate, b);
    add(a, b, a);
    add(out, a, out);
}

void Backend::do_shared_expert_add_norm(Act& a, Act& b, const Act& gate, Act& out, const Weight* w, float eps,
                                        Act& h) {
    shared_expert_add(a, b, gate, out);
    rms_norm(out, w, eps, out.cols, h);
}

namespace {

// The checks of the ops rope_kv_write is made of, all but the cache's, so that an override sees what they would
// accept.
void check_rope_kv_write(const Act& q, const Act& k, const Act& v, const HeadNorms& norms, int head_dim,
                         std::span<const int32_t> pos, const RopeParams& rope, int64_t width) {
    check_group(q, head_dim, "rope_kv_write");
    if (static_cast<int64_t>(pos.size()) != q.rows || k.rows != q.rows || rope.n_rot > head_dim || rope.n_rot <= 0 ||
        rope.n_rot % 2 != 0)
        fail("rope_kv_write", "bad shape");
    if (k.cols != width || v.cols != width || v.rows != k.rows || width % head_dim != 0)
        fail("rope_kv_write", "shape mismatch");
    if (overlap(q.data, q.size(), k.data, k.size()) || overlap(q.data, q.size(), v.data, v.size()) ||
        overlap(k.data, k.size(), v.data, v.size()))
        fail("rope_kv_write", "q, k and v must not overlap");
    if (norms.q && norms.q_weight) check_f32_vector(*norms.q_weight, head_dim, "rope_kv_write", "q norm weight");
    if (norms.k && norms.k_weight) check_f32_vector(*norms.k_weight, head_dim, "rope_kv_write", "k norm weight");
    if (rope.freq_factors) check_f32_vector(*rope.freq_factors, rope.n_rot / 2, "rope_kv_write", "frequency factors");
}

// Rows [first, first + rows) are at positions pos0, pos0 + 1, ...
void check_run(std::span<const int32_t> pos, int64_t first, int64_t rows, int64_t pos0, const char* op) {
    for (int64_t t = 0; t < rows; ++t)
        if (pos[size_t(first + t)] != pos0 + t) fail(op, "positions are not pos0, pos0 + 1, ...");
}

}  // namespace

void Backend::rope_kv_write(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                            std::span<const int32_t> pos, const RopeParams& rope, KvLayer& kv, int64_t pos0) {
    const OpScope scope(*this, "rope_kv_write");
    check_rope_kv_write(q, k, v, norms, head_dim, pos, rope, kv.width);
    check_run(pos, 0, q.rows, pos0, "rope_kv_write");
    check_positions(kv, pos0, pos0 + k.rows, pages_kv(), "rope_kv_write");
    do_rope_kv_write(q, k, v, norms, head_dim, pos, rope, kv, pos0);
}

void Backend::rope_kv_write(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                            std::span<const int32_t> pos, const RopeParams& rope,
                            std::span<const AttentionRange> ranges) {
    const OpScope scope(*this, "rope_kv_write");
    check_ranges(ranges, q.rows, true, "rope_kv_write");
    if (ranges.empty()) return;
    for (const AttentionRange& r : ranges)
        if (r.kv->width != ranges.front().kv->width) fail("rope_kv_write", "caches of different widths");
    check_rope_kv_write(q, k, v, norms, head_dim, pos, rope, ranges.front().kv->width);
    for (const AttentionRange& r : ranges) {
        check_run(pos, r.first, r.rows, r.pos0, "rope_kv_write");
        check_positions(*r.kv, r.pos0, r.pos0 + r.rows, pages_kv(), "rope_kv_write");
    }
    do_rope_kv_write_ranges(q, k, v, norms, head_dim, pos, rope, ranges);
}

// The norms and RoPE are row by row, each row at its own position: one op each over all the rows, then each range's
// rows into its own cache.
void Backend::do_rope_kv_write_ranges(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                                      std::span<const int32_t> pos, const RopeParams& rope,
                                      std::span<const AttentionRange> ranges) {
    if (norms.q) rms_norm(q, norms.q_weight, norms.eps, head_dim, q);
    if (norms.k) rms_norm(k, norms.k_weight, norms.eps, head_dim, k);
    if (norms.v) rms_norm(v, nullptr, norms.eps, head_dim, v);
    this->rope(q, head_dim, pos, rope);
    this->rope(k, head_dim, pos, rope);
    for (const AttentionRange& r : ranges)
        kv_write(*r.kv, rows_of(k, r.first, r.rows), rows_of(v, r.first, r.rows), r.pos0);
}

void Backend::do_rope_kv_write(Act& q, Act& k, Act& v, const HeadNorms& norms, int head_dim,
                               std::span<const int32_t> pos, const RopeParams& rope, KvLayer& kv, int64_t pos0) {
    if (norms.q) rms_norm(q, norms.q_weight, norms.eps, head_dim, q);
    if (norms.k) rms_norm(k, norms.k_weight, norms.eps, head_dim, k);
    if (norms.v) rms_norm(v, nullptr, norms.eps, head_dim, v);
    this->rope(q, head_dim, pos, rope);
    this->rope(k, head_dim, pos, rope);
    kv_write(kv, k, v, pos0);
}

DeltaNetPieces delta_net_pieces(const Act& conv, const DeltaNetParams& p) {
    const int64_t key_dim = int64_t(p.n_k) * p.d_k;
    return {{conv.data, 1, key_dim},
            {conv.data + key_dim, 1, key_dim},
            {conv.data + 2 * key_dim, 1, conv.cols - 2 * key_dim}};
}

void Backend::delta_net_step(const Act& qkv, const Act& z, const Act& a, const Act& b, const DeltaNetWeights& w,
                             float eps, Act& conv_state, Act& state, const DeltaNetParams& p, Act& conv, Act& g,
                             Act& beta, Act& out) {
    if (qkv.rows != 1) fail("delta_net_step", "one token only");
    Act* conv_states[] = {&conv_state};
    Act* states[] = {&state};
    delta_net_step(qkv, z, a, b, w, eps, conv_states, states, p, conv, g, beta, out);
}

void Backend::delta_net_step(const Act& qkv, const Act& z, const Act& a, const Act& b, const DeltaNetWeights& w,
                             float eps, std::span<Act* const> conv_states, std::span<Act* const> states,
                             const DeltaNetParams& p, Act& conv, Act& g, Act& beta, Act& out) {
    const OpScope scope(*this, "delta_net_step");
    const char* op = "delta_net_step";
    if (!w.conv || !w.dt_bias || !w.ssm_a || !w.norm) fail(op, "missing weight");
    const int64_t rows = qkv.rows;
    if (rows < 1 || int64_t(conv_states.size()) != rows || int64_t(states.size()) != rows)
        fail(op, "one state of each kind for each row");
    const int64_t key_dim = int64_t(p.n_k) * p.d_k;
    if (p.n_k <= 0 || p.n_v <= 0 || p.d_k <= 0 || p.d_v <= 0 || p.n_v % p.n_k != 0) fail(op, "bad head counts");
    check_shape(qkv, rows, 2 * key_dim + int64_t(p.n_v) * p.d_v, op, "qkv");
    for (const Act* x : std::initializer_list<const Act*>{&z, &a, &b, &conv, &g, &beta, &out})
        if (x->rows != rows) fail(op, "every input and output has a row for each sequence");
    // The checks of the ops it is made of, on the views each row passes them.
    for (int64_t t = 0; t < rows; ++t) {
        const Act r_qkv = rows_of(qkv, t, 1), r_z = rows_of(z, t, 1), r_a = rows_of(a, t, 1), r_b = rows_of(b, t, 1);
        Act r_conv = rows_of(conv, t, 1), r_g = rows_of(g, t, 1), r_beta = rows_of(beta, t, 1);
        Act r_out = rows_of(out, t, 1);
        if (!conv_states[size_t(t)] || !states[size_t(t)]) fail(op, "a missing state");
        check_delta_net_gates(r_a, r_b, *w.dt_bias, *w.ssm_a, r_g, r_beta, op);
        check_conv1d_causal(r_qkv, *conv_states[size_t(t)], *w.conv, r_conv, op);
        const DeltaNetPieces c = delta_net_pieces(r_conv, p);
        check_delta_net(c.q, c.k, c.v, r_g, r_beta, *states[size_t(t)], p, r_out, op);
        check_gated_rms_norm(r_out, *w.norm, r_z, p.d_v, r_out, op);
    }
    std::vector<const Act*> all = {&qkv, &z, &a, &b, &conv, &g, &beta, &out};  // the inputs, then the rest
    all.insert(all.end(), conv_states.begin(), conv_states.end());
    all.insert(all.end(), states.begin(), states.end());
    for (size_t i = 4; i < all.size(); ++i)
        for (size_t j = 0; j < all.size(); ++j)
            if (i != j && overlap(all[i]->data, all[i]->size(), all[j]->data, all[j]->size()))
                fail(op, "the outputs and states must overlap neither the inputs nor each other");
    do_delta_net_step(qkv, z, a, b, w, eps, conv_states, states, p, conv, g, beta, out);
}

void Backend::do_delta_net_step(const Act& qkv, const Act& z, const Act& a, const Act& b, const DeltaNetWeights& w,
                                float eps, std::span<Act* const> conv_states, std::span<Act* const> states,
                                const DeltaNetParams& p, Act& conv, Act& g, Act& beta, Act& out) {
    for (int64_t t = 0; t < qkv.rows; ++t) {
        Act r_conv = rows_of(conv, t, 1), r_g = rows_of(g, t, 1), r_beta = rows_of(beta, t, 1);
        Act r_out = rows_of(out, t, 1);
        delta_net_gates(rows_of(a, t, 1), rows_of(b, t, 1), *w.dt_bias, *w.ssm_a, r_g, r_beta);
        conv1d_causal(rows_of(qkv, t, 1), *conv_states[size_t(t)], *w.conv, true, r_conv);
        const DeltaNetPieces c = delta_net_pieces(r_conv, p);
        Act qk{c.q.data, 1, c.q.cols + c.k.cols};  // the query and key heads, normalized in one call
        l2_norm(qk, eps, p.d_k, qk);
        delta_net(c.q, c.k, c.v, r_g, r_beta, *states[size_t(t)], p, r_out);
        gated_rms_norm(r_out, *w.norm, rows_of(z, t, 1), eps, p.d_v, r_out);
    }
}

// ---- sampling ----

void Backend::argmax_rows(const Act& x, std::span<int32_t> out) {
    const OpScope scope(*this, "argmax_rows");
    if (static_cast<int64_t>(out.size()) != x.rows || x.cols <= 0) fail("argmax_rows", "shape mismatch");
    do_argmax_rows(x, out);
}

void Backend::top_k_last_row(const Act& x, int k, std::span<int32_t> ids, std::span<float> values) {
    const OpScope scope(*this, "top_k_last_row");
    if (k <= 0 || k > kMaxTopK || k > x.cols || x.rows <= 0 || ids.size() != size_t(k) || values.size() != size_t(k))
        fail("top_k_last_row", "bad k or shape");
    do_top_k_last_row(x, k, ids, values);
}

}  // namespace zinc::backend
