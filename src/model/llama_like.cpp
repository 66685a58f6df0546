#include "model/llama_like.h"

#include <cmath>

namespace zinc::model {
namespace {

int get_int(const gguf::Model& m, const std::string& key) { return m.get(key).get_int<int>(); }

int get_int_or(const gguf::Model& m, const std::string& key, int fallback) {
    const gguf::Value* v = m.find(key);
    return v ? v->get_int<int>() : fallback;
}

float get_float_or(const gguf::Model& m, const std::string& key, float fallback) {
    const gguf::Value* v = m.find(key);
    return v ? static_cast<float>(v->get_number()) : fallback;
}

const gguf::TensorInfo* tensor(const gguf::Model& m, const std::string& name, std::initializer_list<int64_t> shape) {
    const gguf::TensorInfo* t = m.tensor(name).info;
    size_t i = 0;
    for (int64_t want : shape) {
        if (t->ne[i] != want) {
            std::string s, w;
            for (int64_t d : t->shape()) s += (s.empty() ? "" : ", ") + std::to_string(d);
            for (int64_t d : shape) w += (w.empty() ? "" : ", ") + std::to_string(d);
            throw gguf::Error(m.first().path() + ": tensor " + name + " has shape {" + s + "}, expected {" + w + "}");
        }
        ++i;
    }
    for (; i < 4; ++i)
        if (t->ne[i] != 1) throw gguf::Error(m.first().path() + ": tensor " + name + " has too many dimensions");
    return t;
}

}  // namespace

bool is_llama_like(const std::string& arch) { return arch == "llama" || arch == "qwen3"; }

LlamaLikeParams read_llama_like_params(const gguf::Model& m) {
    LlamaLikeParams p;
    p.arch = m.get("general.architecture").get_string();
    if (!is_llama_like(p.arch)) throw gguf::Error("architecture " + p.arch + " is not a llama-like family");
    const std::string a = p.arch + ".";
    p.n_layer = get_int(m, a + "block_count");
    p.n_embd = get_int(m, a + "embedding_length");
    p.n_ff = get_int(m, a + "feed_forward_length");
    p.n_head = get_int(m, a + "attention.head_count");
    p.n_head_kv = get_int_or(m, a + "attention.head_count_kv", p.n_head);
    if (p.n_layer <= 0 || p.n_embd <= 0 || p.n_ff <= 0 || p.n_head <= 0 || p.n_head_kv <= 0 ||
        p.n_head % p.n_head_kv != 0)
        throw gguf::Error(m.first().path() + ": inconsistent attention hyper-parameters");
    p.head_dim = get_int_or(m, a + "attention.key_length", p.n_embd / p.n_head);
    if (get_int_or(m, a + "attention.value_length", p.head_dim) != p.head_dim)
        throw gguf::Error(m.first().path() + ": different key and value head sizes are not supported");
    p.n_rot = get_int_or(m, a + "rope.dimension_count", p.head_dim);
    if (p.n_rot <= 0 || p.n_rot > p.head_dim || p.n_rot % 2) throw gguf::Error("bad rope.dimension_count");
    p.n_ctx_train = get_int_or(m, a + "context_length", 4096);
    p.rms_eps = static_cast<float>(m.get(a + "attention.layer_norm_rms_epsilon").get_number());
    p.rope_base = get_float_or(m, a + "rope.freq_base", 10000.0f);
    if (const gguf::Value* t = m.find(a + "rope.scaling.type")) {
        const std::string& type = t->get_string();
        if (type == "linear")
            p.rope_freq_scale = 1.0f / get_float_or(m, a + "rope.scaling.factor", 1.0f);
        else if (type != "none")
            throw gguf::Error(m.first().path() + ": rope scaling '" + type + "' is not supported yet");
    }
    p.rope_neox = p.arch == "qwen3";
    p.qk_norm = p.arch == "qwen3";
    p.n_vocab = static_cast<int>(m.tensor("token_embd.weight").info->ne[1]);
    return p;
}

LlamaLikeTensors bind_llama_like_tensors(const gguf::Model& m, const LlamaLikeParams& p) {
    LlamaLikeTensors t;
    const int64_t q_dim = int64_t(p.n_head) * p.head_dim, kv_dim = int64_t(p.n_head_kv) * p.head_dim;
    t.token_embd = tensor(m, "token_embd.weight", {p.n_embd, p.n_vocab});
    t.output_norm = tensor(m, "output_norm.weight", {p.n_embd});
    t.output = m.find_tensor("output.weight") ? tensor(m, "output.weight", {p.n_embd, p.n_vocab}) : t.token_embd;
    for (int l = 0; l < p.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        LlamaLikeLayer L;
        L.attn_norm = tensor(m, b + "attn_norm.weight", {p.n_embd});
        L.wq = tensor(m, b + "attn_q.weight", {p.n_embd, q_dim});
        L.wk = tensor(m, b + "attn_k.weight", {p.n_embd, kv_dim});
        L.wv = tensor(m, b + "attn_v.weight", {p.n_embd, kv_dim});
        L.wo = tensor(m, b + "attn_output.weight", {q_dim, p.n_embd});
        if (p.qk_norm) {
            L.q_norm = tensor(m, b + "attn_q_norm.weight", {p.head_dim});
            L.k_norm = tensor(m, b + "attn_k_norm.weight", {p.head_dim});
        }
        L.ffn_norm = tensor(m, b + "ffn_norm.weight", {p.n_embd});
        L.ffn_gate = tensor(m, b + "ffn_gate.weight", {p.n_embd, p.n_ff});
        L.ffn_up = tensor(m, b + "ffn_up.weight", {p.n_embd, p.n_ff});
        L.ffn_down = tensor(m, b + "ffn_down.weight", {p.n_ff, p.n_embd});
        t.layers.push_back(L);
    }
    return t;
}

}  // namespace zinc::model
