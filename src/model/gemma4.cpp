#include "model/gemma4.h"

#include "model/hparams_util.h"

namespace zinc::model {

using util::key_float_or;
using util::key_int;
using util::key_int_or;
using util::tensor;
using util::tensor_opt;

bool is_gemma4(const std::string& arch) { return arch == "gemma4"; }

Gemma4Params read_gemma4_params(const gguf::Model& m) {
    Gemma4Params p;
    const std::string arch = m.get("general.architecture").get_string();
    if (!is_gemma4(arch)) throw gguf::Error("architecture " + arch + " is not gemma4");
    const std::string path = m.first().path();
    const std::string a = "gemma4.";
    p.n_layer = key_int(m, a + "block_count");
    p.n_embd = key_int(m, a + "embedding_length");
    p.n_head = key_int(m, a + "attention.head_count");
    if (p.n_layer <= 0 || p.n_embd <= 0 || p.n_head <= 0) throw gguf::Error(path + ": bad gemma4 dimensions");
    p.n_head_kv = util::key_int_per_layer(m, a + "attention.head_count_kv", p.n_layer);
    p.n_ff = util::key_int_per_layer(m, a + "feed_forward_length", p.n_layer);
    p.swa = util::key_bool_per_layer(m, a + "attention.sliding_window_pattern", p.n_layer);
    p.head_dim = key_int(m, a + "attention.key_length");
    p.head_dim_swa = key_int(m, a + "attention.key_length_swa");
    if (key_int_or(m, a + "attention.value_length", p.head_dim) != p.head_dim ||
        key_int_or(m, a + "attention.value_length_swa", p.head_dim_swa) != p.head_dim_swa)
        throw gguf::Error(path + ": gemma4 needs equal key and value head sizes");
    p.n_rot = key_int_or(m, a + "rope.dimension_count", p.head_dim);
    p.n_rot_swa = key_int_or(m, a + "rope.dimension_count_swa", p.head_dim_swa);
    if (p.head_dim <= 0 || p.head_dim_swa <= 0 || p.n_rot <= 0 || p.n_rot > p.head_dim || p.n_rot % 2 ||
        p.n_rot_swa <= 0 || p.n_rot_swa > p.head_dim_swa || p.n_rot_swa % 2)
        throw gguf::Error(path + ": bad gemma4 head or rope dimensions");
    for (int l = 0; l < p.n_layer; ++l)
        if (p.n_head_kv[l] <= 0 || p.n_head % p.n_head_kv[l] != 0 || p.n_ff[l] <= 0)
            throw gguf::Error(path + ": bad head_count_kv or feed_forward_length of layer " + std::to_string(l));
    p.rope_base = key_float_or(m, a + "rope.freq_base", 1e6f);
    p.rope_base_swa = key_float_or(m, a + "rope.freq_base_swa", 1e4f);
    p.sliding_window = key_int(m, a + "attention.sliding_window");
    if (p.sliding_window <= 0) throw gguf::Error(path + ": gemma4.attention.sliding_window must be positive");
    p.rms_eps = util::key_float(m, a + "attention.layer_norm_rms_epsilon");
    p.final_softcap = key_float_or(m, a + "final_logit_softcapping", 30.0f);
    p.n_ctx_train = key_int_or(m, a + "context_length", 4096);
    if (key_int_or(m, a + "embedding_length_per_layer_input", 0) != 0)
        throw gguf::Error(path + ": gemma4 per-layer embeddings (E2B/E4B) are not supported yet");
    if (key_int_or(m, a + "attention.shared_kv_layers", 0) != 0)
        throw gguf::Error(path + ": gemma4 KV-shared layers (E2B/E4B) are not supported yet");
    p.n_expert = key_int_or(m, a + "expert_count", 0);
    p.n_expert_used = key_int_or(m, a + "expert_used_count", 0);
    p.n_ff_exp = key_int_or(m, a + "expert_feed_forward_length", 0);
    if (p.n_expert > 0 && (p.n_expert_used <= 0 || p.n_expert_used > p.n_expert || p.n_ff_exp <= 0))
        throw gguf::Error(path + ": bad gemma4 expert hyper-parameters");
    p.n_vocab = static_cast<int>(m.tensor("token_embd.weight").info->ne[1]);
    return p;
}

Gemma4Tensors bind_gemma4_tensors(const gguf::Model& m, const Gemma4Params& p) {
    Gemma4Tensors t;
    const int64_t E = p.n_embd;
    t.token_embd = tensor(m, "token_embd.weight", {E, p.n_vocab});
    t.output_norm = tensor(m, "output_norm.weight", {E});
    t.output = tensor_opt(m, "output.weight", {E, p.n_vocab});
    if (!t.output) t.output = t.token_embd;
    for (int l = 0; l < p.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        const int64_t d = p.layer_head_dim(l), q_dim = int64_t(p.n_head) * d, kv_dim = int64_t(p.n_head_kv[l]) * d;
        Gemma4Layer L;
        L.attn_norm = tensor(m, b + "attn_norm.weight", {E});
        L.wq = tensor(m, b + "attn_q.weight", {E, q_dim});
        L.wk = tensor(m, b + "attn_k.weight", {E, kv_dim});
        L.wv = tensor_opt(m, b + "attn_v.weight", {E, kv_dim});
        L.wo = tensor(m, b + "attn_output.weight", {q_dim, E});
        L.q_norm = tensor(m, b + "attn_q_norm.weight", {d});
        L.k_norm = tensor(m, b + "attn_k_norm.weight", {d});
        L.post_attn_norm = tensor(m, b + "post_attention_norm.weight", {E});
        L.ffn_norm = tensor(m, b + "ffn_norm.weight", {E});
        L.ffn_gate = tensor(m, b + "ffn_gate.weight", {E, p.n_ff[l]});
        L.ffn_up = tensor(m, b + "ffn_up.weight", {E, p.n_ff[l]});
        L.ffn_down = tensor(m, b + "ffn_down.weight", {p.n_ff[l], E});
        L.post_ffw_norm = tensor(m, b + "post_ffw_norm.weight", {E});
        if (const gguf::TensorInfo* s = tensor_opt(m, b + "layer_output_scale.weight", {1}))
            L.out_scale = util::tensor_scalar(m, *s);
        if (p.n_expert > 0) {
            L.gate_inp = tensor_opt(m, b + "ffn_gate_inp.weight", {E, p.n_expert});
        } else if (m.find_tensor(b + "ffn_gate_inp.weight")) {
            throw gguf::Error(m.first().path() + ": tensor " + b +
                              "ffn_gate_inp.weight is present but gemma4.expert_count is missing");
        }
        if (L.gate_inp) {
            const int64_t F = p.n_ff_exp, X = p.n_expert;
            L.gate_inp_scale = tensor(m, b + "ffn_gate_inp.scale", {E});
            L.gate_up_exps = tensor_opt(m, b + "ffn_gate_up_exps.weight", {E, 2 * F, X});
            if (!L.gate_up_exps) {
                L.gate_exps = tensor(m, b + "ffn_gate_exps.weight", {E, F, X});
                L.up_exps = tensor(m, b + "ffn_up_exps.weight", {E, F, X});
            }
            L.down_exps = tensor(m, b + "ffn_down_exps.weight", {F, E, X});
            L.down_exps_scale = tensor_opt(m, b + "ffn_down_exps.scale", {X});
            L.pre_ffw_norm_2 = tensor(m, b + "pre_ffw_norm_2.weight", {E});
            L.post_ffw_norm_1 = tensor(m, b + "post_ffw_norm_1.weight", {E});
            L.post_ffw_norm_2 = tensor(m, b + "post_ffw_norm_2.weight", {E});
        }
        if (!p.swa[l] && !t.rope_freqs) t.rope_freqs = tensor(m, "rope_freqs.weight", {p.n_rot / 2});
        t.layers.push_back(L);
    }
    return t;
}

}  // namespace zinc::model
