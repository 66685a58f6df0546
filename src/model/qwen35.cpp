#include "model/qwen35.h"

#include <algorithm>
#include <initializer_list>
#include <span>

namespace zinc::model {
namespace {

std::string path_of(const gguf::Model& m) { return m.first().path(); }

int get_int(const gguf::Model& m, const std::string& key) { return m.get(key).get_int<int>(); }

int get_int_or(const gguf::Model& m, const std::string& key, int fallback) {
    const gguf::Value* v = m.find(key);
    return v ? v->get_int<int>() : fallback;
}

// A per-layer hyper-parameter stored as a scalar or as an array of n values (MODELS.md §0.1).
std::vector<int> per_layer(const gguf::Model& m, const std::string& key, int n, int fallback) {
    const gguf::Value* v = m.find(key);
    if (!v) return std::vector<int>(static_cast<size_t>(n), fallback);
    if (!v->is_array()) return std::vector<int>(static_cast<size_t>(n), v->get_int<int>());
    std::vector<int> a = v->get_int_array<int>();
    if (a.size() < static_cast<size_t>(n))
        throw gguf::Error(path_of(m) + ": " + key + " has " + std::to_string(a.size()) + " entries for " +
                          std::to_string(n) + " layers");
    a.resize(static_cast<size_t>(n));
    return a;
}

// The one value a per-layer parameter takes on the layers selected by `use` (0 if none).
int common_value(const gguf::Model& m, const std::string& key, const std::vector<int>& v,
                 const std::vector<bool>& use) {
    int out = 0;
    for (size_t i = 0; i < v.size(); ++i) {
        if (!use[i]) continue;
        if (out != 0 && v[i] != out)
            throw gguf::Error(path_of(m) + ": " + key + " differs between layers; not supported");
        out = v[i];
    }
    return out;
}

std::string shape_str(std::span<const int64_t> s) {
    std::string r;
    for (int64_t d : s) r += (r.empty() ? "" : ", ") + std::to_string(d);
    return "{" + r + "}";
}

// The tensor `name` with the given leading extents (the rest must be 1); throws naming it.
const gguf::TensorInfo* check_shape(const gguf::Model& m, const gguf::TensorInfo* t, const std::string& name,
                                    std::initializer_list<int64_t> shape) {
    size_t i = 0;
    bool ok = true;
    for (int64_t want : shape) ok = ok && t->ne[i++] == want;
    for (; i < 4; ++i) ok = ok && t->ne[i] == 1;
    if (!ok)
        throw gguf::Error(path_of(m) + ": tensor " + name + " has shape " + shape_str(t->shape()) + ", expected " +
                          shape_str(std::span<const int64_t>(shape.begin(), shape.size())));
    return t;
}

const gguf::TensorInfo* tensor(const gguf::Model& m, const std::string& name, std::initializer_list<int64_t> shape) {
    const gguf::ModelTensor* mt = m.find_tensor(name);
    if (!mt) throw gguf::Error(path_of(m) + ": tensor " + name + " is missing");
    return check_shape(m, mt->info, name, shape);
}

const gguf::TensorInfo* optional(const gguf::Model& m, const std::string& name,
                                 std::initializer_list<int64_t> shape) {
    const gguf::ModelTensor* mt = m.find_tensor(name);
    return mt ? check_shape(m, mt->info, name, shape) : nullptr;
}

}  // namespace

bool is_qwen35(const std::string& arch) { return arch == "qwen35" || arch == "qwen35moe"; }

Qwen35Params read_qwen35_params(const gguf::Model& m) {
    Qwen35Params p;
    p.arch = m.get("general.architecture").get_string();
    if (!is_qwen35(p.arch)) throw gguf::Error("architecture " + p.arch + " is not qwen35/qwen35moe");
    const std::string a = p.arch + ".";
    const std::string path = path_of(m);
    p.n_layer = get_int(m, a + "block_count") - get_int_or(m, a + "nextn_predict_layers", 0);
    p.n_embd = get_int(m, a + "embedding_length");
    p.n_ctx_train = get_int_or(m, a + "context_length", 4096);
    if (p.n_layer <= 0 || p.n_embd <= 0) throw gguf::Error(path + ": bad block_count or embedding_length");

    // Layer types: attention.recurrent_layers when present, else every full_attention_interval-th layer attends.
    if (const gguf::Value* r = m.find(a + "attention.recurrent_layers")) {
        const std::vector<bool> v = r->get_bool_array();
        if (v.size() < static_cast<size_t>(p.n_layer))
            throw gguf::Error(path + ": " + a + "attention.recurrent_layers is shorter than the layer count");
        p.recurrent.assign(v.begin(), v.begin() + p.n_layer);
    } else {
        const int interval = get_int_or(m, a + "full_attention_interval", 4);
        if (interval <= 0) throw gguf::Error(path + ": bad " + a + "full_attention_interval");
        for (int l = 0; l < p.n_layer; ++l) p.recurrent.push_back((l + 1) % interval != 0);
    }
    std::vector<bool> attn_layers(p.recurrent.size());
    for (size_t l = 0; l < p.recurrent.size(); ++l) attn_layers[l] = !p.recurrent[l];

    p.n_head = common_value(m, a + "attention.head_count", per_layer(m, a + "attention.head_count", p.n_layer, 0),
                            attn_layers);
    p.n_head_kv = common_value(m, a + "attention.head_count_kv",
                               per_layer(m, a + "attention.head_count_kv", p.n_layer, p.n_head), attn_layers);
    if (p.n_head_kv == 0) p.n_head_kv = p.n_head;
    p.head_dim = get_int_or(m, a + "attention.key_length", p.n_head > 0 ? p.n_embd / p.n_head : 0);
    if (get_int_or(m, a + "attention.value_length", p.head_dim) != p.head_dim)
        throw gguf::Error(path + ": different key and value head sizes are not supported");
    const bool any_attn = std::find(attn_layers.begin(), attn_layers.end(), true) != attn_layers.end();
    if (any_attn && (p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.head_dim <= 0))
        throw gguf::Error(path + ": inconsistent attention hyper-parameters");
    p.n_rot = get_int_or(m, a + "rope.dimension_count", p.head_dim);
    if (any_attn && (p.n_rot <= 0 || p.n_rot > p.head_dim || p.n_rot % 2))
        throw gguf::Error(path + ": bad " + a + "rope.dimension_count");
    p.rope_base = m.find(a + "rope.freq_base") ? static_cast<float>(m.get(a + "rope.freq_base").get_number()) : 1e7f;
    p.rms_eps = static_cast<float>(m.get(a + "attention.layer_norm_rms_epsilon").get_number());
    // IMRoPE (MODELS.md §1.3): for text every pair whose section is t, h or w rotates with position p — plain NeoX.
    // A pair in the 4th section would use position 0 (no rotation); no released model has one, so refuse it.
    if (const gguf::Value* s = m.find(a + "rope.dimension_sections")) {
        std::vector<int> sec = s->get_int_array<int>();
        sec.resize(4, 0);
        const int total = sec[0] + sec[1] + sec[2] + sec[3];
        for (int i = 0; i < p.n_rot / 2 && total > 0; ++i) {
            const int k = i % total;
            const bool thw = (k % 3 == 0 && k < 3 * sec[0]) || (k % 3 == 1 && k < 3 * sec[1]) ||
                             (k % 3 == 2 && k < 3 * sec[2]);
            if (!thw) throw gguf::Error(path + ": rope.dimension_sections leave rotary pairs to the extra section");
        }
    }

    p.ssm_conv_kernel = get_int(m, a + "ssm.conv_kernel");
    p.ssm_d_state = get_int(m, a + "ssm.state_size");
    p.ssm_n_k = get_int(m, a + "ssm.group_count");
    p.ssm_n_v = get_int(m, a + "ssm.time_step_rank");
    if (p.ssm_conv_kernel < 1 || p.ssm_d_state <= 0 || p.ssm_n_k <= 0 || p.ssm_n_v <= 0 || p.ssm_n_v % p.ssm_n_k)
        throw gguf::Error(path + ": inconsistent ssm hyper-parameters");
    if (get_int_or(m, a + "ssm.inner_size", p.value_dim()) != p.value_dim())
        throw gguf::Error(path + ": " + a + "ssm.inner_size is not time_step_rank * state_size");

    p.n_ff = per_layer(m, a + "feed_forward_length", p.n_layer, 0);
    p.n_expert = get_int_or(m, a + "expert_count", 0);
    if (p.n_expert > 0) {
        p.n_expert_used = get_int(m, a + "expert_used_count");
        if (p.n_expert_used <= 0 || p.n_expert_used > p.n_expert)
            throw gguf::Error(path + ": bad " + a + "expert_used_count");
        const int n_ff0 = p.n_ff.empty() ? 0 : p.n_ff[0];
        p.n_ff_exp = get_int_or(m, a + "expert_feed_forward_length", n_ff0 / p.n_expert_used);
        p.n_ff_shexp = get_int_or(m, a + "expert_shared_feed_forward_length", n_ff0);
    }
    p.n_vocab = static_cast<int>(m.tensor("token_embd.weight").info->ne[1]);
    return p;
}

Qwen35Tensors bind_qwen35_tensors(const gguf::Model& m, const Qwen35Params& p) {
    Qwen35Tensors t;
    const int64_t E = p.n_embd;
    t.token_embd = tensor(m, "token_embd.weight", {E, p.n_vocab});
    t.output_norm = tensor(m, "output_norm.weight", {E});
    t.output = m.find_tensor("output.weight") ? tensor(m, "output.weight", {E, p.n_vocab}) : t.token_embd;
    const int64_t q_dim = int64_t(p.n_head) * p.head_dim, kv_dim = int64_t(p.n_head_kv) * p.head_dim;
    const int64_t ds = p.ssm_d_state, nv = p.ssm_n_v;
    for (int l = 0; l < p.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        Qwen35Layer L;
        L.attn_norm = tensor(m, b + "attn_norm.weight", {E});
        L.post_attention_norm = tensor(m, b + "post_attention_norm.weight", {E});
        if (p.recurrent[l]) {
            L.attn_qkv = tensor(m, b + "attn_qkv.weight", {E, p.conv_dim()});
            L.attn_gate = tensor(m, b + "attn_gate.weight", {E, p.value_dim()});
            L.ssm_beta = tensor(m, b + "ssm_beta.weight", {E, nv});
            L.ssm_alpha = tensor(m, b + "ssm_alpha.weight", {E, nv});
            L.ssm_dt = tensor(m, b + "ssm_dt.bias", {nv});
            L.ssm_a = tensor(m, b + "ssm_a", {nv});
            L.ssm_conv1d = tensor(m, b + "ssm_conv1d.weight", {p.ssm_conv_kernel, p.conv_dim()});
            L.ssm_norm = tensor(m, b + "ssm_norm.weight", {ds});
            L.ssm_out = tensor(m, b + "ssm_out.weight", {p.value_dim(), E});
            for (const gguf::TensorInfo* f32 : {L.ssm_dt, L.ssm_a, L.ssm_conv1d, L.ssm_norm})
                if (f32->type != gguf::TensorType::F32)
                    throw gguf::Error(path_of(m) + ": tensor " + f32->name + " must be F32");
        } else {
            L.attn_q = tensor(m, b + "attn_q.weight", {E, 2 * q_dim});  // per head [query | gate]
            L.attn_k = tensor(m, b + "attn_k.weight", {E, kv_dim});
            L.attn_v = tensor(m, b + "attn_v.weight", {E, kv_dim});
            L.attn_output = tensor(m, b + "attn_output.weight", {q_dim, E});
            L.attn_q_norm = tensor(m, b + "attn_q_norm.weight", {p.head_dim});
            L.attn_k_norm = tensor(m, b + "attn_k_norm.weight", {p.head_dim});
        }
        if (m.find_tensor(b + "ffn_gate_inp.weight")) {
            if (p.n_expert <= 0) throw gguf::Error(path_of(m) + ": layer " + std::to_string(l) +
                                                   " has experts but " + p.arch + ".expert_count is missing");
            const int64_t ne = p.n_expert, ff = p.n_ff_exp, sh = p.n_ff_shexp;
            L.ffn_gate_inp = tensor(m, b + "ffn_gate_inp.weight", {E, ne});
            if (m.find_tensor(b + "ffn_gate_up_exps.weight")) {
                L.ffn_gate_up_exps = tensor(m, b + "ffn_gate_up_exps.weight", {E, 2 * ff, ne});
            } else {
                L.ffn_gate_exps = tensor(m, b + "ffn_gate_exps.weight", {E, ff, ne});
                L.ffn_up_exps = tensor(m, b + "ffn_up_exps.weight", {E, ff, ne});
                L.ffn_gate_exps_scale = optional(m, b + "ffn_gate_exps.scale", {ne});
            }
            L.ffn_up_exps_scale = optional(m, b + "ffn_up_exps.scale", {ne});
            L.ffn_down_exps = tensor(m, b + "ffn_down_exps.weight", {ff, E, ne});
            L.ffn_down_exps_scale = optional(m, b + "ffn_down_exps.scale", {ne});
            if (m.find_tensor(b + "ffn_gate_inp_shexp.weight")) {
                L.ffn_gate_inp_shexp = tensor(m, b + "ffn_gate_inp_shexp.weight", {E});  // {E} or {E, 1}
                L.ffn_gate_shexp = tensor(m, b + "ffn_gate_shexp.weight", {E, sh});
                L.ffn_up_shexp = tensor(m, b + "ffn_up_shexp.weight", {E, sh});
                L.ffn_down_shexp = tensor(m, b + "ffn_down_shexp.weight", {sh, E});
            }
        } else {
            const int64_t ff = p.n_ff[l];
            if (ff <= 0) throw gguf::Error(path_of(m) + ": layer " + std::to_string(l) + " has no FFN width (" +
                                           p.arch + ".feed_forward_length)");
            L.ffn_gate = tensor(m, b + "ffn_gate.weight", {E, ff});
            L.ffn_up = tensor(m, b + "ffn_up.weight", {E, ff});
            L.ffn_down = tensor(m, b + "ffn_down.weight", {ff, E});
        }
        t.layers.push_back(L);
    }
    return t;
}

}  // namespace zinc::model
