#include "model/gpt_oss.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "model/hparams_util.h"

namespace zinc::model {

using util::key_float_or;
using util::key_int;
using util::key_int_or;
using util::tensor;

bool is_gpt_oss(const std::string& arch) { return arch == "gpt-oss"; }

GptOssParams read_gpt_oss_params(const gguf::Model& m) {
    GptOssParams p;
    const std::string arch = m.get("general.architecture").get_string();
    if (!is_gpt_oss(arch)) throw gguf::Error("architecture " + arch + " is not gpt-oss");
    const std::string path = m.first().path();
    const std::string a = "gpt-oss.";
    p.n_layer = key_int(m, a + "block_count");
    p.n_embd = key_int(m, a + "embedding_length");
    p.n_head = key_int(m, a + "attention.head_count");
    p.n_head_kv = key_int_or(m, a + "attention.head_count_kv", p.n_head);
    // d_h is not n_embd / n_head (2880 / 64 = 45 for gpt-oss-20b, whose heads are 64 wide).
    p.head_dim = key_int(m, a + "attention.key_length");
    if (key_int_or(m, a + "attention.value_length", p.head_dim) != p.head_dim)
        throw gguf::Error(path + ": gpt-oss needs equal key and value head sizes");
    if (p.n_layer <= 0 || p.n_embd <= 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv ||
        p.head_dim <= 0 || p.head_dim % 2)
        throw gguf::Error(path + ": inconsistent gpt-oss attention hyper-parameters");
    p.n_rot = key_int_or(m, a + "rope.dimension_count", p.head_dim);
    if (p.n_rot <= 0 || p.n_rot > p.head_dim || p.n_rot % 2) throw gguf::Error(path + ": bad rope.dimension_count");
    p.n_expert = key_int(m, a + "expert_count");
    p.n_expert_used = key_int(m, a + "expert_used_count");
    p.n_ff_exp = key_int(m, a + "expert_feed_forward_length");
    if (p.n_expert <= 0 || p.n_expert_used <= 0 || p.n_expert_used > p.n_expert || p.n_ff_exp <= 0)
        throw gguf::Error(path + ": bad gpt-oss expert hyper-parameters");
    p.rms_eps = util::key_float(m, a + "attention.layer_norm_rms_epsilon");
    p.n_ctx_train = key_int_or(m, a + "context_length", 4096);
    p.sliding_window = key_int(m, a + "attention.sliding_window");
    if (p.sliding_window <= 0) throw gguf::Error(path + ": gpt-oss.attention.sliding_window must be positive");
    // Sliding layers: an explicit per-layer bool array, or a period n (layer l slides iff l mod n < n - 1, as
    // llama.cpp's set_swa_pattern); default period 2: even layers slide.
    const gguf::Value* pat = m.find(a + "attention.sliding_window_pattern");
    if (pat && pat->is_array()) {
        p.swa = util::key_bool_per_layer(m, a + "attention.sliding_window_pattern", p.n_layer);
    } else {
        const int period = pat ? pat->get_int<int>() : 2;
        if (period < 0) throw gguf::Error(path + ": bad gpt-oss.attention.sliding_window_pattern");
        for (int l = 0; l < p.n_layer; ++l) p.swa.push_back(period == 0 || l % period < period - 1);
    }
    p.rope_base = key_float_or(m, a + "rope.freq_base", 150000.0f);
    p.rope_base_swa = key_float_or(m, a + "rope.freq_base_swa", p.rope_base);
    if (const gguf::Value* t = m.find(a + "rope.scaling.type")) {
        const std::string& type = t->get_string();
        const float factor = key_float_or(m, a + "rope.scaling.factor", 1.0f);
        if (type == "yarn" && factor > 1.0f) {
            const float n_ctx_orig = float(key_int_or(m, a + "rope.scaling.original_context_length", p.n_ctx_train));
            const float beta_fast = key_float_or(m, a + "rope.scaling.yarn_beta_fast", 32.0f);
            const float beta_slow = key_float_or(m, a + "rope.scaling.yarn_beta_slow", 1.0f);
            // Correction range in pair units: c(beta) = n_rot ln(L0 / (2 pi beta)) / (2 ln base). This follows
            // transformers with truncate = false (gpt-oss's config): the range is NOT rounded, so e.g. gpt-oss-20b
            // uses [8.093, 17.398] where llama.cpp floors/ceils to [8, 18] (MODELS.md 1.4). The fixture references
            // are transformers' logits, so matching them wins; the difference to llama.cpp is ~1e-3 relative in
            // the logits.
            const auto corr = [&](double beta) {
                return float(p.n_rot * std::log(n_ctx_orig / (beta * 2.0 * std::numbers::pi)) /
                             (2.0 * std::log(double(p.rope_base))));
            };
            p.rope_freq_scale = 1.0f / factor;
            p.yarn_ext_factor = 1.0f;
            p.yarn_low = std::max(0.0f, corr(beta_fast));
            p.yarn_high = std::min(float(p.n_rot - 1), corr(beta_slow));
            p.yarn_mscale = 1.0f + 0.1f * std::log(factor);  // transformers' attention_factor, on cos and sin
        } else if (type == "linear") {
            p.rope_freq_scale = 1.0f / factor;
        } else if (type != "none" && type != "yarn") {
            throw gguf::Error(path + ": rope scaling '" + type + "' is not supported for gpt-oss");
        }
    }
    p.swiglu_alpha = key_float_or(m, a + "swiglu_alpha", 1.702f);  // not written by the converter
    p.swiglu_limit = key_float_or(m, a + "swiglu_limit", 7.0f);
    p.n_vocab = static_cast<int>(m.tensor("token_embd.weight").info->ne[1]);
    return p;
}

GptOssTensors bind_gpt_oss_tensors(const gguf::Model& m, const GptOssParams& p) {
    GptOssTensors t;
    const int64_t E = p.n_embd, q_dim = int64_t(p.n_head) * p.head_dim, kv_dim = int64_t(p.n_head_kv) * p.head_dim;
    const int64_t F = p.n_ff_exp, X = p.n_expert;
    t.token_embd = tensor(m, "token_embd.weight", {E, p.n_vocab});
    t.output_norm = tensor(m, "output_norm.weight", {E});
    t.output = util::tensor_opt(m, "output.weight", {E, p.n_vocab});
    if (!t.output) t.output = t.token_embd;
    for (int l = 0; l < p.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        GptOssLayer L;
        L.attn_norm = tensor(m, b + "attn_norm.weight", {E});
        L.wq = tensor(m, b + "attn_q.weight", {E, q_dim});
        L.bq = tensor(m, b + "attn_q.bias", {q_dim});
        L.wk = tensor(m, b + "attn_k.weight", {E, kv_dim});
        L.bk = tensor(m, b + "attn_k.bias", {kv_dim});
        L.wv = tensor(m, b + "attn_v.weight", {E, kv_dim});
        L.bv = tensor(m, b + "attn_v.bias", {kv_dim});
        L.wo = tensor(m, b + "attn_output.weight", {q_dim, E});
        L.bo = tensor(m, b + "attn_output.bias", {E});
        L.sinks = tensor(m, b + "attn_sinks.weight", {p.n_head});
        L.post_attn_norm = tensor(m, b + "post_attention_norm.weight", {E});
        L.gate_inp = tensor(m, b + "ffn_gate_inp.weight", {E, X});
        L.gate_inp_b = tensor(m, b + "ffn_gate_inp.bias", {X});
        L.gate_exps = tensor(m, b + "ffn_gate_exps.weight", {E, F, X});
        L.gate_exps_b = tensor(m, b + "ffn_gate_exps.bias", {F, X});
        L.up_exps = tensor(m, b + "ffn_up_exps.weight", {E, F, X});
        L.up_exps_b = tensor(m, b + "ffn_up_exps.bias", {F, X});
        L.down_exps = tensor(m, b + "ffn_down_exps.weight", {F, E, X});
        L.down_exps_b = tensor(m, b + "ffn_down_exps.bias", {E, X});
        t.layers.push_back(L);
    }
    return t;
}

}  // namespace zinc::model
