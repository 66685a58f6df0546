// The Backend interface itself, on the backends that run here (the CPU and the sizing backend): the op checks are
// made once for every backend, with the same messages; free() releases memory (and the sizing backend keeps the peak);
// the capability queries say what each backend is; a weight misaligned in its file is copied aligned.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/sizing_backend.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "quant/quantize.h"

namespace {

using zinc::backend::Act;
using zinc::backend::AttentionParams;
using zinc::backend::Backend;
using zinc::backend::GatedActivation;
using zinc::backend::IdAct;
using zinc::backend::MemoryUse;
using zinc::backend::MoeWeights;
using zinc::backend::Weight;
using zinc::gguf::TensorType;

// An f32 weight {ne0, ne1, ne2} over host data (never read by the sizing backend).
Weight f32_weight(const std::vector<float>& v, const std::string& name, int64_t ne0, int64_t ne1 = 1,
                  int64_t ne2 = 1) {
    Weight w;
    w.type = TensorType::F32;
    w.cols = ne0;
    w.rows = ne1 * ne2;
    w.data = v.data();
    w.name = name;
    w.ne[0] = ne0;
    w.ne[1] = ne1;
    w.ne[2] = ne2;
    return w;
}

// What `f` threw: "invalid_argument: <message>", "out_of_range: <message>", or "" when it returned.
std::string thrown_by(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::out_of_range& e) {
        return std::string("out_of_range: ") + e.what();
    } catch (const std::invalid_argument& e) {
        return std::string("invalid_argument: ") + e.what();
    }
    return "";
}

// Bad calls of several ops on `be`, each with what it threw.
std::vector<std::string> bad_calls(Backend& be) {
    const std::vector<float> host(4096, 0.5f);
    const Weight w = f32_weight(host, "blk.0.attn_q.weight", 64, 32);
    const Weight norm = f32_weight(host, "blk.0.attn_norm.weight", 64);
    const Weight sinks = f32_weight(host, "blk.0.attn_sinks.weight", 3);
    const Weight table = f32_weight(host, "token_embd.weight", 64, 10);
    Act x = be.alloc(2, 64), x48 = be.alloc(2, 48), out = be.alloc(2, 32), out64 = be.alloc(2, 64);
    zinc::backend::KvLayer kv = be.alloc_kv(64, 4);
    std::vector<std::string> r;
    r.push_back(thrown_by([&] { be.matmul(w, x48, out); }));
    r.push_back(thrown_by([&] { be.matmul(w, x, out64); }));
    r.push_back(thrown_by([&] { be.rms_norm(x, &norm, 1e-6f, 64, out); }));
    r.push_back(thrown_by([&] { be.rms_norm(x, &norm, 1e-6f, 32, out64); }));
    r.push_back(thrown_by([&] { be.add(x, x48, out64); }));
    r.push_back(thrown_by([&] { be.kv_write(kv, x, x, 3); }));
    AttentionParams ap{2, 2, 32, 1.0f};
    ap.sinks = &sinks;
    r.push_back(thrown_by([&] { be.attention(x, kv, 0, ap, out64); }));
    r.push_back(thrown_by([&] { be.attention(x, kv, 3, AttentionParams{2, 2, 32, 1.0f}, out64); }));
    const std::vector<int32_t> ids{1, 10};
    r.push_back(thrown_by([&] { be.get_rows(table, ids, out64); }));
    r.push_back(thrown_by([&] { be.slice_groups(x, 64, 0, x); }));
    r.push_back(thrown_by([&] { be.softcap(x, 0.0f); }));
    // A MoE layer whose up experts do not match its gate experts.
    const Weight gate = f32_weight(host, "blk.0.ffn_gate_exps.weight", 64, 8, 4);
    const Weight up = f32_weight(host, "blk.0.ffn_up_exps.weight", 64, 16, 4);
    const Weight down = f32_weight(host, "blk.0.ffn_down_exps.weight", 8, 64, 4);
    MoeWeights mw;
    mw.gate = &gate;
    mw.up = &up;
    mw.down = &down;
    IdAct route_ids = be.alloc_ids(2, 2);
    Act route_w = be.alloc(2, 2);
    r.push_back(thrown_by([&] { be.moe_ffn(x, route_ids, route_w, mw, out64); }));
    Act logits = be.alloc(2, 4);
    r.push_back(thrown_by([&] { be.moe_route(logits, 5, true, route_ids, route_w); }));
    // Fused ops: a width that does not match, an output over the input or over another output, gate and up of
    // different shapes, scratch of the wrong shape.
    const Weight square = f32_weight(host, "blk.0.attn_output.weight", 64, 64);
    const Weight ffn_gate = f32_weight(host, "blk.0.ffn_gate.weight", 64, 32);
    const Weight ffn_up = f32_weight(host, "blk.0.ffn_up.weight", 64, 16);
    const Weight* qk[] = {&w, &w};
    Act* q_and_out64[] = {&out, &out64};
    Act* out_twice[] = {&out, &out};
    Act* into_x[] = {&x};
    const Weight* sq[] = {&square};
    r.push_back(thrown_by([&] { be.matmuls(qk, x, q_and_out64); }));
    r.push_back(thrown_by([&] { be.matmuls(qk, x, out_twice); }));
    r.push_back(thrown_by([&] { be.matmuls(sq, x, into_x); }));
    r.push_back(thrown_by([&] { be.matmuls(qk, x, into_x); }));
    r.push_back(thrown_by([&] { be.ffn_gated(ffn_gate, ffn_up, x, GatedActivation::swiglu, out, out); }));
    r.push_back(thrown_by([&] { be.ffn_gated(square, square, x, GatedActivation::geglu, out64, x); }));
    r.push_back(thrown_by([&] { be.ffn_gated(ffn_gate, ffn_gate, x, GatedActivation::swiglu, out, out); }));
    r.push_back(thrown_by([&] { be.matmul_add(w, x48, out64, out); }));
    r.push_back(thrown_by([&] { be.matmul_add(w, x, out64, out); }));
    r.push_back(thrown_by([&] { be.matmul_add(square, x, out64, x); }));
    r.push_back(thrown_by([&] { be.matmul_add(square, x, x, out64); }));
    // Biases: not one per weight, and one of the wrong length (as add_bias would refuse it).
    const Weight q_bias = f32_weight(host, "blk.0.attn_q.bias", 32);
    const Weight o_bias = f32_weight(host, "blk.0.attn_output.bias", 32);
    Act out2 = be.alloc(2, 32), tmp64 = be.alloc(2, 64);
    Act* q_and_k[] = {&out, &out2};
    Act* just_out64[] = {&out64};
    const Weight* one_bias[] = {&q_bias};
    const Weight* q_bias_only[] = {&q_bias, nullptr};
    EXPECT_NO_THROW(be.matmuls(qk, x, q_and_k, q_bias_only));  // biases of the right length, a null one: none
    EXPECT_NO_THROW(be.matmul_add(w, x, out2, out, &q_bias));
    r.push_back(thrown_by([&] { be.matmuls(qk, x, q_and_k, one_bias); }));
    r.push_back(thrown_by([&] { be.matmuls(sq, x, just_out64, one_bias); }));
    r.push_back(thrown_by([&] { be.matmul_add(square, x, tmp64, out64, &o_bias); }));
    // norm_add: out of another shape, a weight of the wrong length, out over x.
    r.push_back(thrown_by([&] { be.norm_add(x, &norm, 1e-6f, out); }));
    r.push_back(thrown_by([&] { be.norm_add(x, &sinks, 1e-6f, out64); }));
    r.push_back(thrown_by([&] { be.norm_add(x, &norm, 1e-6f, x, 0.5f); }));
    Act x2 = be.alloc(2, 64);
    // rms_norms: no outputs, scales not one per output, a weight of the wrong length, an output over x, two outputs
    // over each other.
    const Weight* two_norms[] = {&norm, &norm};
    const Weight* norm_and_sinks[] = {&norm, &sinks};
    const float one_scale[] = {0.5f};
    Act x3 = be.alloc(2, 64);
    Act* outs_x2_x3[] = {&x2, &x3};
    Act* outs_x2_x[] = {&x2, &x};
    Act* outs_x2_x2[] = {&x2, &x2};
    r.push_back(thrown_by([&] { be.rms_norms(x, {}, 1e-6f, {}); }));
    r.push_back(thrown_by([&] { be.rms_norms(x, two_norms, 1e-6f, outs_x2_x3, one_scale); }));
    r.push_back(thrown_by([&] { be.rms_norms(x, norm_and_sinks, 1e-6f, outs_x2_x3); }));
    r.push_back(thrown_by([&] { be.rms_norms(x, two_norms, 1e-6f, outs_x2_x); }));
    r.push_back(thrown_by([&] { be.rms_norms(x, two_norms, 1e-6f, outs_x2_x2); }));
    // shared_expert_add: a gate of neither b's shape nor one column, out over b.
    Act gate3 = be.alloc(2, 3);
    r.push_back(thrown_by([&] { be.shared_expert_add(x, x2, gate3, out64); }));
    r.push_back(thrown_by([&] { be.shared_expert_add(x, x2, tmp64, x2); }));
    // delta_net_step (1 key head and 2 value heads of 16, a conv of 4 taps): two rows, a missing weight, a projection
    // of the wrong width, a norm weight of the wrong length, the conv's output over the projection.
    zinc::backend::DeltaNetParams dp;
    dp.n_k = 1;
    dp.n_v = 2;
    dp.d_k = dp.d_v = 16;
    const Weight conv_w = f32_weight(host, "blk.0.ssm_conv1d.weight", 4, 64);
    const Weight dt = f32_weight(host, "blk.0.ssm_dt.bias", 2), ssm_a = f32_weight(host, "blk.0.ssm_a", 2);
    const Weight ssm_norm = f32_weight(host, "blk.0.ssm_norm.weight", 16);
    const zinc::backend::DeltaNetWeights dw{&conv_w, &dt, &ssm_a, &ssm_norm}, no_norm{&conv_w, &dt, &ssm_a, nullptr};
    const zinc::backend::DeltaNetWeights wide_norm{&conv_w, &dt, &ssm_a, &norm};
    Act qkv = be.alloc(1, 64), qkv2 = be.alloc(2, 64), qkv48 = be.alloc(1, 48), z = be.alloc(1, 32);
    Act da = be.alloc(1, 2), db = be.alloc(1, 2), dg = be.alloc(1, 2), dbeta = be.alloc(1, 2);
    Act conv_state = be.alloc(3, 64), state = be.alloc(2, 256), conv = be.alloc(1, 64), o = be.alloc(1, 32);
    const auto step = [&](const Act& in, const zinc::backend::DeltaNetWeights& w, Act& c) {
        return thrown_by([&] { be.delta_net_step(in, z, da, db, w, 1e-6f, conv_state, state, dp, c, dg, dbeta, o); });
    };
    r.push_back(step(qkv2, dw, conv));
    r.push_back(step(qkv, no_norm, conv));
    r.push_back(step(qkv48, dw, conv));
    r.push_back(step(qkv, wide_norm, conv));
    r.push_back(step(qkv, dw, qkv));
    // shared_expert_add_norm: h of another shape, a norm weight of the wrong length, h over the residual.
    Act h = be.alloc(2, 64), h32 = be.alloc(2, 32), gate1 = be.alloc(2, 1);
    r.push_back(thrown_by([&] { be.shared_expert_add_norm(x, x2, gate1, out64, &norm, 1e-6f, h32); }));
    r.push_back(thrown_by([&] { be.shared_expert_add_norm(x, x2, gate1, out64, &sinks, 1e-6f, h); }));
    r.push_back(thrown_by([&] { be.shared_expert_add_norm(x, x2, gate1, out64, &norm, 1e-6f, out64); }));
    return r;
}

TEST(BackendChecks, EveryBackendRejectsTheSameCallsWithTheSameMessages) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    MemoryUse use;
    auto sizing = zinc::backend::make_sizing_backend(use);
    const auto on_cpu = bad_calls(*cpu), on_sizing = bad_calls(*sizing);
    ASSERT_EQ(on_cpu.size(), on_sizing.size());
    for (size_t i = 0; i < on_cpu.size(); ++i) {
        EXPECT_FALSE(on_cpu[i].empty()) << "call " << i << " was accepted";
        EXPECT_EQ(on_cpu[i], on_sizing[i]) << "call " << i;
    }
    // What the messages say: the op, the weight where there is one, and what is wrong.
    const std::vector<std::string> want = {
        "invalid_argument: matmul blk.0.attn_q.weight: shape mismatch",
        "invalid_argument: matmul blk.0.attn_q.weight: shape mismatch",
        "invalid_argument: rms_norm blk.0.attn_norm.weight: shape mismatch",
        "invalid_argument: rms_norm: weight blk.0.attn_norm.weight must be f32 with 32 values",
        "invalid_argument: add: shape mismatch",
        "out_of_range: kv_write: past the cache",
        "invalid_argument: attention: sinks blk.0.attn_sinks.weight must be f32 with 2 values",
        "out_of_range: attention: past the cache",
        "out_of_range: token id 10 is outside the vocabulary",
        "invalid_argument: slice_groups: out must not alias src",
        "invalid_argument: softcap: the cap must be positive",
        "invalid_argument: moe_ffn: expert tensors blk.0.ffn_gate_exps.weight, blk.0.ffn_down_exps.weight have "
        "inconsistent shapes",
        "invalid_argument: moe_route: k must be in [1, n_expert]",
        "invalid_argument: matmuls blk.0.attn_q.weight: shape mismatch",
        "invalid_argument: matmuls blk.0.attn_q.weight: out overlaps the output of blk.0.attn_q.weight",
        "invalid_argument: matmuls blk.0.attn_output.weight: out must not overlap x",
        "invalid_argument: matmuls: give one output for each weight, at least one",
        "invalid_argument: ffn_gated blk.0.ffn_gate.weight: shape mismatch with blk.0.ffn_up.weight",
        "invalid_argument: ffn_gated blk.0.attn_output.weight: out and up_tmp must overlap neither x nor each other",
        "invalid_argument: ffn_gated blk.0.ffn_gate.weight: out and up_tmp must overlap neither x nor each other",
        "invalid_argument: matmul_add blk.0.attn_q.weight: shape mismatch",
        "invalid_argument: matmul_add: tmp has shape 2x64, expected 2x32",
        "invalid_argument: matmul_add blk.0.attn_output.weight: out must not overlap x",
        "invalid_argument: matmul_add blk.0.attn_output.weight: tmp must overlap neither x nor out",
        "invalid_argument: matmuls: give no biases or one for each weight (null for none)",
        "invalid_argument: matmuls blk.0.attn_output.weight: bias blk.0.attn_q.bias must be f32 with 64 values",
        "invalid_argument: matmul_add blk.0.attn_output.weight: bias blk.0.attn_output.bias must be f32 with 64 values",
        "invalid_argument: norm_add blk.0.attn_norm.weight: shape mismatch",
        "invalid_argument: norm_add: weight blk.0.attn_sinks.weight must be f32 with 64 values",
        "invalid_argument: norm_add blk.0.attn_norm.weight: out must not overlap x",
        "invalid_argument: rms_norms: give one output for each weight, at least one",
        "invalid_argument: rms_norms: give no scales or one for each output",
        "invalid_argument: rms_norms: weight blk.0.attn_sinks.weight must be f32 with 64 values",
        "invalid_argument: rms_norms blk.0.attn_norm.weight: out must not overlap x",
        "invalid_argument: rms_norms blk.0.attn_norm.weight: the outputs must not overlap each other",
        "invalid_argument: shared_expert_add: gate must have b's shape or one column",
        "invalid_argument: shared_expert_add: out must overlap neither a nor b",
        "invalid_argument: delta_net_step: one token only",
        "invalid_argument: delta_net_step: missing weight",
        "invalid_argument: delta_net_step: qkv has shape 1x48, expected 1x64",
        "invalid_argument: delta_net_step: blk.0.attn_norm.weight must be f32 with 16 values",
        "invalid_argument: delta_net_step: the outputs and states must overlap neither the inputs nor each other",
        "invalid_argument: shared_expert_add_norm blk.0.attn_norm.weight: shape mismatch",
        "invalid_argument: shared_expert_add_norm: weight blk.0.attn_sinks.weight must be f32 with 64 values",
        "invalid_argument: shared_expert_add_norm blk.0.attn_norm.weight: h must overlap none of a, b, gate and out",
    };
    EXPECT_EQ(on_cpu, want);
}

TEST(BackendChecks, SizingBackendChecksShapesOfViews) {
    MemoryUse use;
    auto be = zinc::backend::make_sizing_backend(use);
    // Views of one buffer overlap as they would on a real backend; separate buffers do not.
    Act x = be->alloc(4, 16), other = be->alloc(4, 16), state = be->alloc(2, 16);
    const std::vector<float> host(48, 0.0f);
    const Weight w = f32_weight(host, "blk.0.ssm_conv1d.weight", 3, 16);
    EXPECT_NO_THROW(be->conv1d_causal(x, state, w, true, x));
    EXPECT_NO_THROW(be->conv1d_causal(x, state, w, true, other));
    Act shifted = Backend::rows_of(x, 1, 3), x3 = Backend::rows_of(x, 0, 3);
    EXPECT_NE(thrown_by([&] { be->conv1d_causal(x3, state, w, true, shifted); }).find("out overlaps x"),
              std::string::npos);
    Act state_in_x = Backend::rows_of(x, 2, 2);
    EXPECT_NE(thrown_by([&] { be->conv1d_causal(x, state_in_x, w, true, other); }).find("state overlaps"),
              std::string::npos);
}

// free() on a backend releases what it allocated and resets the handle; an empty handle is a no-op; a view that does
// not start an allocation, memory already freed, or another backend's memory is refused.
void check_free(Backend& be, Backend& other) {
    Act a = be.alloc(3, 5);
    const Act copy = a;
    const Act view = Backend::rows_of(a, 1, 2);
    Act v = view;
    EXPECT_NE(thrown_by([&] { be.free(v); }).find("free: the activation was not allocated by the " + be.name()),
              std::string::npos);
    be.free(a);
    EXPECT_EQ(a.data, nullptr);
    EXPECT_EQ(a.size(), 0);
    EXPECT_NO_THROW(be.free(a));  // empty
    Act again = copy;
    EXPECT_FALSE(thrown_by([&] { be.free(again); }).empty()) << "freed twice";
    Act foreign = other.alloc(1, 4);
    Act foreign_copy = foreign;
    EXPECT_FALSE(thrown_by([&] { be.free(foreign_copy); }).empty()) << "freed another backend's memory";
    other.free(foreign);

    zinc::backend::KvLayer kv = be.alloc_kv(8, 16);
    be.free(kv);
    EXPECT_EQ(kv.k, nullptr);
    EXPECT_EQ(kv.v, nullptr);
    EXPECT_EQ(kv.capacity, 0);
    EXPECT_NO_THROW(be.free(kv));
    IdAct ids = be.alloc_ids(2, 4);
    be.free(ids);
    EXPECT_EQ(ids.data, nullptr);
    EXPECT_NO_THROW(be.free(ids));
}

TEST(BackendFree, CpuReleasesWhatItAllocated) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    MemoryUse use;
    auto sizing = zinc::backend::make_sizing_backend(use);
    check_free(*cpu, *sizing);
    // Memory freed and allocated again works as new memory.
    Act a = cpu->alloc(4, 1000);
    cpu->free(a);
    Act b = cpu->alloc(2, 3);
    const std::vector<float> v{1, 2, 3, 4, 5, 6};
    cpu->upload(b, v);
    std::vector<float> back(6);
    cpu->download(b, back);
    EXPECT_EQ(back, v);
}

TEST(BackendFree, SizingBackendKeepsThePeak) {
    MemoryUse use;
    auto sizing = zinc::backend::make_sizing_backend(use);
    auto cpu = zinc::backend::make_cpu_backend(1);
    check_free(*sizing, *cpu);
    EXPECT_EQ(use.activations, 0u);
    EXPECT_EQ(use.cache, 0u);

    MemoryUse u;
    auto be = zinc::backend::make_sizing_backend(u);
    Act small = be->alloc(2, 100);  // 800 bytes
    Act large = be->alloc(10, 100);  // 4000 bytes
    IdAct ids = be->alloc_ids(2, 8);  // 64 bytes
    zinc::backend::KvLayer kv = be->alloc_kv(16, 32);  // 2 x 2048 bytes
    EXPECT_EQ(u.activations, 4864u);
    EXPECT_EQ(u.peak_activations, 4864u);
    EXPECT_EQ(u.cache, 4096u);
    be->free(large);
    be->free(ids);
    EXPECT_EQ(u.activations, 800u);      // what is held now drops
    EXPECT_EQ(u.peak_activations, 4864u);  // the most ever held stays
    EXPECT_EQ(u.total(), 4096u + 4864u);   // and is what must fit
    Act replacement = be->alloc(5, 100);  // 2000 bytes: less than the peak
    EXPECT_EQ(u.activations, 2800u);
    EXPECT_EQ(u.peak_activations, 4864u);
    be->free(kv);
    EXPECT_EQ(u.cache, 0u);
    be->free(small);
    be->free(replacement);
    EXPECT_EQ(u.activations, 0u);
    EXPECT_EQ(u.total(), 4864u);
}

TEST(BackendCapabilities, CpuReportsTheMemoryLeft) {
    const uint64_t free_bytes = zinc::backend::make_cpu_backend(1)->free_memory();
    EXPECT_GT(free_bytes, 0u);
    // No more than the machine has.
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    EXPECT_LE(free_bytes, uint64_t(pages) * uint64_t(page_size));
}

TEST(BackendCapabilities, OnlyTheCpuMapsItsWeights) {
    EXPECT_TRUE(zinc::backend::make_cpu_backend(1)->weights_are_mapped());
    MemoryUse use;
    EXPECT_FALSE(zinc::backend::make_sizing_backend(use)->weights_are_mapped());
}

// general.alignment = 1 lets a tensor start at any byte. The CPU backend copies such a tensor into aligned memory
// (reading its block structs in place would be misaligned loads), and computes with it exactly as with the same bytes
// aligned. (12 rows: not whole tiles of 8, so the tensor is not repacked; PackedWeight below covers that.)
TEST(CpuBackend, MisalignedWeightIsCopiedAligned) {
    const int64_t cols = 512, rows = 12;  // Q6_K: two blocks of 256 per row
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> values(size_t(rows * cols));
    for (float& v : values) v = nd(rng);
    const size_t rb = zinc::gguf::row_bytes(TensorType::Q6_K, cols);
    std::vector<uint8_t> q6(rb * rows);
    for (int64_t r = 0; r < rows; ++r)
        zinc::quant::quantize_row(TensorType::Q6_K, values.data() + r * cols, q6.data() + r * rb, cols);

    zinc::gguf::Writer writer(1);
    writer.set("general.architecture", "test");
    writer.add_tensor("blk.0.ffn_down.weight", TensorType::Q6_K, {cols, rows}, q6);
    const std::vector<uint8_t> file = writer.to_bytes();
    const uint64_t at = zinc::gguf::File::from_memory(file).tensor("blk.0.ffn_down.weight").file_offset;
    // The file's bytes placed so that the tensor starts at an odd address.
    std::vector<uint8_t> memory(file.size() + 1);
    const size_t shift = (reinterpret_cast<uintptr_t>(memory.data()) + at) % 2 == 0 ? 1 : 0;
    std::copy(file.begin(), file.end(), memory.begin() + shift);
    const auto mapped = zinc::gguf::File::from_memory(std::span<const uint8_t>(memory.data() + shift, file.size()));
    const zinc::gguf::TensorInfo& t = mapped.tensor("blk.0.ffn_down.weight");
    ASSERT_EQ(mapped.alignment(), 1u);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(t.data) % 2, 1u);

    auto cpu = zinc::backend::make_cpu_backend(2);
    const Weight misaligned = cpu->load_weight(t);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(misaligned.data) % alignof(std::max_align_t), 0u);
    EXPECT_EQ(std::memcmp(misaligned.data, t.data, t.nbytes), 0);
    zinc::gguf::TensorInfo in_place = t;
    in_place.data = q6.data();
    const Weight aligned = cpu->load_weight(in_place);
    EXPECT_EQ(aligned.data, q6.data()) << "an aligned tensor is used in place";

    Act x = cpu->alloc(3, cols);
    std::vector<float> xv(size_t(3 * cols));
    for (float& v : xv) v = nd(rng);
    cpu->upload(x, xv);
    Act out_misaligned = cpu->alloc(3, rows), out_aligned = cpu->alloc(3, rows);
    cpu->matmul(misaligned, x, out_misaligned);
    cpu->matmul(aligned, x, out_aligned);
    std::vector<float> a(3 * rows), b(3 * rows);
    cpu->download(out_misaligned, a);
    cpu->download(out_aligned, b);
    EXPECT_EQ(a, b);
    // The rows decode to the same values too.
    const std::vector<int32_t> ids{0, 5, 7};
    Act ra = cpu->alloc(3, cols), rb_ = cpu->alloc(3, cols);
    cpu->get_rows(misaligned, ids, ra);
    cpu->get_rows(aligned, ids, rb_);
    std::vector<float> da(3 * cols), db(3 * cols);
    cpu->download(ra, da);
    cpu->download(rb_, db);
    EXPECT_EQ(da, db);
}

// A weight of `type` holding `values` (rows x cols, quantized with the reference quantizer), in `bytes`.
Weight typed_weight(TensorType type, const std::vector<float>& values, int64_t cols, int64_t rows,
                    const std::string& name, std::vector<uint8_t>& bytes) {
    const size_t rb = zinc::gguf::row_bytes(type, cols);
    bytes.assign(rb * size_t(rows), 0);
    for (int64_t r = 0; r < rows; ++r) {
        if (type == TensorType::F32)
            std::memcpy(bytes.data() + r * rb, values.data() + r * cols, rb);
        else
            zinc::quant::quantize_row(type, values.data() + r * cols, bytes.data() + r * rb, size_t(cols));
    }
    Weight w;
    w.type = type;
    w.cols = cols;
    w.rows = rows;
    w.data = bytes.data();
    w.name = name;
    w.ne[0] = cols;
    w.ne[1] = rows;
    return w;
}

// The fused ops are defined as sequences of the other ops; the base class runs exactly those sequences, so on the
// CPU (which has no fused kernels) each equals its sequence bit for bit, for one row (decode) and several (prefill),
// with and without the biases of matmuls and matmul_add (gpt-oss's projections: matmul, add_bias, add), and norm_add
// with and without its weight and output scale.
TEST(BackendFusedOps, CpuEqualsTheSequenceOfOps) {
    auto cpu = zinc::backend::make_cpu_backend(2);
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto random = [&](size_t n) {
        std::vector<float> v(n);
        for (float& f : v) f = nd(rng);
        return v;
    };
    auto get = [&](const Act& a) {
        std::vector<float> v(size_t(a.size()));
        cpu->download(a, v);
        return v;
    };
    const int64_t cols = 512, n_q = 96, n_kv = 32, n_ff = 256;  // whole 256-value blocks for the K-quants
    for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K}) {
        SCOPED_TRACE(std::string(zinc::gguf::type_name(type)));
        std::vector<uint8_t> bq, bk, bv, bg, bu, bo;
        const Weight wq = typed_weight(type, random(size_t(n_q * cols)), cols, n_q, "q", bq);
        const Weight wk = typed_weight(type, random(size_t(n_kv * cols)), cols, n_kv, "k", bk);
        // V of another type, as Q4_K_M files have Q6_K V beside Q4_K Q and K.
        const Weight wv = typed_weight(type == TensorType::Q4_K ? TensorType::Q6_K : type,
                                       random(size_t(n_kv * cols)), cols, n_kv, "v", bv);
        const Weight wg = typed_weight(type, random(size_t(n_ff * cols)), cols, n_ff, "gate", bg);
        const Weight wu = typed_weight(type, random(size_t(n_ff * cols)), cols, n_ff, "up", bu);
        const Weight wo = typed_weight(type, random(size_t(cols * n_ff)), n_ff, cols, "down", bo);
        const auto bias_q = random(size_t(n_q)), bias_v = random(size_t(n_kv)), bias_o = random(size_t(cols));
        const Weight bq_w = f32_weight(bias_q, "q.bias", n_q), bv_w = f32_weight(bias_v, "v.bias", n_kv);
        const Weight bo_w = f32_weight(bias_o, "down.bias", cols);
        for (int64_t rows : {1, 3}) {
            SCOPED_TRACE("rows " + std::to_string(rows));
            Act x = cpu->alloc(rows, cols);
            cpu->upload(x, random(size_t(rows * cols)));

            Act q = cpu->alloc(rows, n_q), k = cpu->alloc(rows, n_kv), v = cpu->alloc(rows, n_kv);
            Act q1 = cpu->alloc(rows, n_q), k1 = cpu->alloc(rows, n_kv), v1 = cpu->alloc(rows, n_kv);
            const Weight* qkv_w[] = {&wq, &wk, &wv};
            Act* qkv[] = {&q, &k, &v};
            cpu->matmuls(qkv_w, x, qkv);
            cpu->matmul(wq, x, q1);
            cpu->matmul(wk, x, k1);
            cpu->matmul(wv, x, v1);
            EXPECT_EQ(get(q), get(q1));
            EXPECT_EQ(get(k), get(k1));
            EXPECT_EQ(get(v), get(v1));

            // With biases, K's null: matmul then add_bias for Q and V, matmul alone for K.
            const Weight* qkv_b[] = {&bq_w, nullptr, &bv_w};
            cpu->matmuls(qkv_w, x, qkv, qkv_b);
            cpu->matmul(wq, x, q1);
            cpu->add_bias(q1, bq_w);
            cpu->matmul(wk, x, k1);
            cpu->matmul(wv, x, v1);
            cpu->add_bias(v1, bv_w);
            EXPECT_EQ(get(q), get(q1)) << "biased";
            EXPECT_EQ(get(k), get(k1)) << "biased";
            EXPECT_EQ(get(v), get(v1)) << "biased";

            for (GatedActivation act : {GatedActivation::swiglu, GatedActivation::geglu}) {
                Act out = cpu->alloc(rows, n_ff), up = cpu->alloc(rows, n_ff);
                Act g1 = cpu->alloc(rows, n_ff), u1 = cpu->alloc(rows, n_ff);
                cpu->ffn_gated(wg, wu, x, act, up, out);
                cpu->matmul(wg, x, g1);
                cpu->matmul(wu, x, u1);
                if (act == GatedActivation::swiglu)
                    cpu->swiglu(g1, u1, g1);
                else
                    cpu->geglu(g1, u1, g1);
                EXPECT_EQ(get(out), get(g1)) << (act == GatedActivation::swiglu ? "swiglu" : "geglu");
            }

            Act h = cpu->alloc(rows, n_ff), res = cpu->alloc(rows, cols), res1 = cpu->alloc(rows, cols);
            Act tmp = cpu->alloc(rows, cols), tmp1 = cpu->alloc(rows, cols);
            cpu->upload(h, random(size_t(rows * n_ff)));
            const auto start = random(size_t(rows * cols));
            cpu->upload(res, start);
            cpu->upload(res1, start);
            cpu->matmul_add(wo, h, tmp, res);
            cpu->matmul(wo, h, tmp1);
            cpu->add(res1, tmp1, res1);
            EXPECT_EQ(get(res), get(res1));
            EXPECT_NE(get(res), start);

            // With a bias: matmul, add_bias, add.
            cpu->upload(res, start);
            cpu->upload(res1, start);
            cpu->matmul_add(wo, h, tmp, res, &bo_w);
            cpu->matmul(wo, h, tmp1);
            cpu->add_bias(tmp1, bo_w);
            cpu->add(res1, tmp1, res1);
            EXPECT_EQ(get(res), get(res1)) << "biased";

            // shared_expert_add_norm, one gate a row and one a value: shared_expert_add, then rms_norm into h.
            for (const int64_t gate_cols : {int64_t(1), cols}) {
                const auto av = random(size_t(rows * cols)), bv = random(size_t(rows * cols));
                const auto gv = random(size_t(rows * gate_cols));
                const auto wv = random(size_t(cols));
                const Weight nw = f32_weight(wv, "attn_norm", cols);
                Act a = cpu->alloc(rows, cols), b = cpu->alloc(rows, cols), a1 = cpu->alloc(rows, cols);
                Act b1 = cpu->alloc(rows, cols), g = cpu->alloc(rows, gate_cols);
                Act hn = cpu->alloc(rows, cols), hn1 = cpu->alloc(rows, cols);
                for (Act* t : {&a, &a1}) cpu->upload(*t, av);
                for (Act* t : {&b, &b1}) cpu->upload(*t, bv);
                cpu->upload(g, gv);
                cpu->upload(res, start);
                cpu->upload(res1, start);
                cpu->shared_expert_add_norm(a, b, g, res, &nw, 1e-6f, hn);
                cpu->shared_expert_add(a1, b1, g, res1);
                cpu->rms_norm(res1, &nw, 1e-6f, cols, hn1);
                EXPECT_EQ(get(res), get(res1)) << "shared_expert_add_norm's residual, gate cols " << gate_cols;
                EXPECT_EQ(get(hn), get(hn1)) << "shared_expert_add_norm's norm, gate cols " << gate_cols;
            }

            // norm_add, with and without a weight and an output scale: rms_norm in place, add, scale.
            const auto norm_values = random(size_t(cols));
            const Weight nw = f32_weight(norm_values, "post_norm", cols);
            for (const Weight* w : {&nw, static_cast<const Weight*>(nullptr)})
                for (const float s : {1.0f, 0.375f}) {
                    const auto d = random(size_t(rows * cols));
                    cpu->upload(tmp, d);
                    cpu->upload(tmp1, d);
                    cpu->upload(res, start);
                    cpu->upload(res1, start);
                    cpu->norm_add(tmp, w, 1e-6f, res, s);
                    cpu->rms_norm(tmp1, w, 1e-6f, cols, tmp1);
                    cpu->add(res1, tmp1, res1);
                    if (s != 1.0f) cpu->scale(res1, s, res1);
                    EXPECT_EQ(get(res), get(res1)) << "norm_add" << (w ? " with a weight" : "") << " scale " << s;
                }
        }
    }
}

// delta_net_step is its sequence of ops on the CPU too, bit for bit, over several tokens (the states carried over):
// gates, conv, the q/k L2 norms in place, the recurrence on the pieces of the conv's row, the gated norm in place.
TEST(BackendFusedOps, CpuDeltaNetStepEqualsTheSequenceOfOps) {
    auto cpu = zinc::backend::make_cpu_backend(2);
    std::mt19937 rng(12);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    auto random = [&](size_t n, float scale = 1.0f) {
        std::vector<float> v(n);
        for (float& f : v) f = scale * ud(rng);
        return v;
    };
    auto get = [&](const Act& a) {
        std::vector<float> v(size_t(a.size()));
        cpu->download(a, v);
        return v;
    };
    zinc::backend::DeltaNetParams p;
    p.n_k = 2;
    p.n_v = 4;
    p.d_k = 32;
    p.d_v = 24;
    p.scale = 0.125f;
    const int64_t kd = 2 * 32, vd = 4 * 24, C = 2 * kd + vd, K = 4;
    const auto conv_v = random(size_t(K * C)), dt_v = random(4), a_v = random(4, 4.0f), norm_v = random(24);
    std::vector<float> ssm_a_v(4);
    for (size_t i = 0; i < 4; ++i) ssm_a_v[i] = -std::exp(a_v[i]);
    const Weight conv_w = f32_weight(conv_v, "ssm_conv1d.weight", K, C), dt = f32_weight(dt_v, "ssm_dt.bias", 4);
    const Weight ssm_a = f32_weight(ssm_a_v, "ssm_a", 4), norm = f32_weight(norm_v, "ssm_norm.weight", 24);
    const zinc::backend::DeltaNetWeights dw{&conv_w, &dt, &ssm_a, &norm};
    // Two copies of the layer's states and scratch: one for the op, one for the sequence.
    struct Layer {
        Act conv_state, state, conv, g, beta, out;
    };
    const auto conv_state0 = random(size_t((K - 1) * C)), state0 = random(size_t(4 * 32 * 24), 0.3f);
    auto layer = [&] {
        Layer l{cpu->alloc(K - 1, C), cpu->alloc(4, 32 * 24), cpu->alloc(1, C),
                cpu->alloc(1, 4),     cpu->alloc(1, 4),       cpu->alloc(1, vd)};
        cpu->upload(l.conv_state, conv_state0);
        cpu->upload(l.state, state0);
        return l;
    };
    Layer f = layer(), s = layer();
    Act qkv = cpu->alloc(1, C), z = cpu->alloc(1, vd), a = cpu->alloc(1, 4), b = cpu->alloc(1, 4);
    for (int step = 0; step < 3; ++step) {
        cpu->upload(qkv, random(size_t(C), 2.0f));
        cpu->upload(z, random(size_t(vd), 4.0f));
        cpu->upload(a, random(4, 4.0f));
        cpu->upload(b, random(4, 4.0f));
        cpu->delta_net_step(qkv, z, a, b, dw, 1e-6f, f.conv_state, f.state, p, f.conv, f.g, f.beta, f.out);
        cpu->delta_net_gates(a, b, dt, ssm_a, s.g, s.beta);
        cpu->conv1d_causal(qkv, s.conv_state, conv_w, true, s.conv);
        Act qk{s.conv.data, 1, 2 * kd};
        cpu->l2_norm(qk, 1e-6f, p.d_k, qk);
        const Act q{s.conv.data, 1, kd}, k{s.conv.data + kd, 1, kd}, v{s.conv.data + 2 * kd, 1, vd};
        cpu->delta_net(q, k, v, s.g, s.beta, s.state, p, s.out);
        cpu->gated_rms_norm(s.out, norm, z, 1e-6f, p.d_v, s.out);
        EXPECT_EQ(get(f.out), get(s.out)) << "step " << step;
        EXPECT_EQ(get(f.conv), get(s.conv)) << "step " << step;
        EXPECT_EQ(get(f.g), get(s.g)) << "step " << step;
        EXPECT_EQ(get(f.beta), get(s.beta)) << "step " << step;
        EXPECT_EQ(get(f.conv_state), get(s.conv_state)) << "step " << step;
        EXPECT_EQ(get(f.state), get(s.state)) << "step " << step;
    }
    EXPECT_NE(get(f.state), state0);
}

}  // namespace

// Profiling counts each public op once under its label, a composed op as itself (not its parts), and only while on;
// take_profile hands over what was timed since the last call.
TEST(BackendProfile, CountsOutermostOpsByLabel) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    std::vector<uint8_t> bytes;
    const Weight w = typed_weight(TensorType::Q8_0, std::vector<float>(64 * 32, 0.5f), 64, 32, "w", bytes);
    Act x = cpu->alloc(1, 64), tmp = cpu->alloc(1, 32), out = cpu->alloc(1, 32), n = cpu->alloc(1, 64);
    cpu->upload(x, std::vector<float>(64, 1.0f));
    cpu->rms_norm(x, nullptr, 1e-6f, 64, n);  // not timed: profiling is off
    cpu->set_profiling(true);
    cpu->rms_norm(x, nullptr, 1e-6f, 64, n);
    cpu->rms_norm(x, nullptr, 1e-6f, 64, n);
    cpu->matmul_add(w, x, tmp, out);  // composed of matmul and add on the CPU
    const auto ops = cpu->take_profile();
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[0].label, "rms_norm");
    EXPECT_EQ(ops[0].calls, 2);
    EXPECT_EQ(ops[1].label, "matmul_add q8_0 64x32");
    EXPECT_EQ(ops[1].calls, 1);
    EXPECT_GE(ops[1].us, 0.0);
    EXPECT_TRUE(cpu->take_profile().empty());
    cpu->set_profiling(false);
    cpu->rms_norm(x, nullptr, 1e-6f, 64, n);
    EXPECT_TRUE(cpu->take_profile().empty());
}

// Side work comes as begin_side, end_side, join_side, once each; any other order is a logic error. A step that leaves
// side work unjoined is one too, and neither that nor a step that throws inside its side work keeps the next step
// from having its own.
TEST(BackendSideWork, CallsComeInOrder) {
    auto cpu = zinc::backend::make_cpu_backend(1);
    EXPECT_THROW(cpu->end_side(), std::logic_error);
    EXPECT_THROW(cpu->join_side(), std::logic_error);
    cpu->begin_side();
    EXPECT_THROW(cpu->begin_side(), std::logic_error);
    EXPECT_THROW(cpu->join_side(), std::logic_error);
    cpu->end_side();
    EXPECT_THROW(cpu->end_side(), std::logic_error);
    EXPECT_THROW(cpu->begin_side(), std::logic_error);
    cpu->join_side();

    Act x = cpu->alloc(1, 4), y = cpu->alloc(1, 4);
    cpu->upload(x, std::vector<float>{1, 2, 3, 4});
    const int32_t id = 0;
    auto step = [&](bool join) {
        return cpu->run_step(nullptr, 1, {&id, 1}, {&id, 1}, [&] {
            cpu->begin_side();
            cpu->add(x, x, y);
            cpu->end_side();
            if (join) cpu->join_side();
            return y;
        });
    };
    EXPECT_THROW(step(false), std::logic_error);
    EXPECT_THROW(cpu->run_step(nullptr, 1, {&id, 1}, {&id, 1}, [&]() -> Act {
        cpu->begin_side();
        throw std::runtime_error("inside the side work");
    }), std::runtime_error);
    step(true);
    std::vector<float> got(4);
    cpu->download(y, got);
    EXPECT_EQ(got, (std::vector<float>{2, 4, 6, 8}));
}
