#include "model/catalog.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "model/families.h"

namespace zinc::model {

namespace {

// What every preset gives: names and the dense shape.
Preset preset(std::string name, std::string arch, std::string model_name, std::string size, uint32_t n_layer,
              uint32_t n_embd, uint32_t n_ff, uint32_t n_head, uint32_t n_head_kv) {
    Preset p;
    p.name = std::move(name);
    p.arch = std::move(arch);
    p.model_name = std::move(model_name);
    p.size_label = std::move(size);
    p.n_layer = n_layer;
    p.n_embd = n_embd;
    p.n_ff = n_ff;
    p.n_head = n_head;
    p.n_head_kv = n_head_kv;
    p.rms_eps = 1e-6f;
    return p;
}

Preset qwen3(std::string name, std::string model_name, std::string size, uint32_t n_layer, uint32_t n_embd,
             uint32_t n_ff, uint32_t n_head, uint32_t n_head_kv, bool tied) {
    Preset p = preset(std::move(name), "qwen3", std::move(model_name), std::move(size), n_layer, n_embd, n_ff, n_head,
                      n_head_kv);
    p.vocab = "qwen3";
    p.n_vocab = 151936;
    p.head_dim = 128;
    p.n_ctx = 40960;
    p.rope_base = 1e6f;
    p.tied = tied;
    return p;
}

// Qwen2.5 (and the models built on it: QwQ, DeepSeek-R1's Qwen distills): Qwen3's tokenizer but for the thinking
// tokens Qwen3 added, and head_dim = n_embd / n_head.
Preset qwen2(std::string name, std::string model_name, std::string size, uint32_t n_layer, uint32_t n_embd,
             uint32_t n_ff, uint32_t n_head, uint32_t n_head_kv, uint32_t n_vocab, bool tied) {
    Preset p = preset(std::move(name), "qwen2", std::move(model_name), std::move(size), n_layer, n_embd, n_ff, n_head,
                      n_head_kv);
    p.vocab = "qwen3";
    p.n_vocab = n_vocab;
    p.head_dim = n_embd / n_head;
    p.n_ctx = 32768;
    p.rope_base = 1e6f;
    p.tied = tied;
    return p;
}

Preset qwen35(std::string name, std::string model_name, std::string size, uint32_t n_layer, uint32_t n_embd,
              uint32_t n_ff, uint32_t n_head, uint32_t n_head_kv, uint32_t v_heads) {
    Preset p = preset(std::move(name), "qwen35", std::move(model_name), std::move(size), n_layer, n_embd, n_ff, n_head,
                      n_head_kv);
    p.vocab = "qwen3";
    p.n_vocab = 248320;
    p.head_dim = 256;
    p.n_ctx = 262144;
    p.rope_base = 1e7f;
    p.n_rot = 64;
    p.ssm_conv = 4;
    p.ssm_state = 128;
    p.ssm_groups = 16;
    p.ssm_v_heads = v_heads;
    p.full_attn_interval = 4;
    return p;
}

Preset gemma4(std::string name, std::string model_name, std::string size, uint32_t n_layer, uint32_t n_embd,
              uint32_t n_ff, uint32_t n_head, uint32_t kv_swa, uint32_t kv_global) {
    Preset p = preset(std::move(name), "gemma4", std::move(model_name), std::move(size), n_layer, n_embd, n_ff, n_head,
                      kv_swa);
    p.vocab = "gemma3";
    p.n_vocab = 262144;
    p.n_head_kv_global = kv_global;
    p.head_dim = 512;
    p.head_dim_swa = 256;
    p.n_ctx = 262144;
    p.rope_base = 1e6f;
    p.rope_base_swa = 1e4f;
    p.rope_partial_global = 0.25f;
    p.sliding_window = 1024;
    p.swa_period = 6;
    p.softcap = 30.0f;
    p.tied = true;
    return p;
}

// Gemma 3 (text): five sliding layers then one global, RoPE 1e4 on the sliding layers and 1e6 on the global ones.
Preset gemma3(std::string name, std::string model_name, std::string size, uint32_t n_layer, uint32_t n_embd,
              uint32_t n_ff, uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim) {
    Preset p = preset(std::move(name), "gemma3", std::move(model_name), std::move(size), n_layer, n_embd, n_ff, n_head,
                      n_head_kv);
    p.vocab = "gemma3";
    p.n_vocab = 262208;
    p.head_dim = head_dim;
    p.n_ctx = 131072;
    p.rope_base = 1e6f;
    p.rope_scale = 8.0f;
    p.sliding_window = 1024;
    p.tied = true;
    return p;
}

// Mistral's models on the llama architecture (Mistral Nemo) or mistral3 (Mistral Small 3.x, Ministral 3): llama's
// decoder with 128-wide heads and the Tekken vocabulary. The shapes are those of the published config.json files.
Preset mistral(std::string name, std::string arch, std::string model_name, std::string size, uint32_t n_layer,
               uint32_t n_embd, uint32_t n_ff, uint32_t n_ctx, float rope_base) {
    Preset p = preset(std::move(name), std::move(arch), std::move(model_name), std::move(size), n_layer, n_embd, n_ff,
                      32, 8);
    p.vocab = "tekken";
    p.n_vocab = 131072;
    p.head_dim = 128;
    p.n_ctx = n_ctx;
    p.rms_eps = 1e-5f;
    p.rope_base = rope_base;
    return p;
}

// Phi-4 and Phi-4-mini: Phi-3's layout (fused attn_qkv, ffn_up of gate and up), NeoX RoPE, ε 1e-5. The real
// tokenizers (Phi-4's cl100k-like, Phi-4-mini's o200k) are not among the repository's: Qwen3's vocabulary padded
// to the real vocab size stands in, with its chat template.
Preset phi3(std::string name, std::string model_name, std::string size, uint32_t n_layer, uint32_t n_embd,
            uint32_t n_ff, uint32_t n_head, uint32_t n_head_kv, uint32_t n_vocab) {
    Preset p = preset(std::move(name), "phi3", std::move(model_name), std::move(size), n_layer, n_embd, n_ff, n_head,
                      n_head_kv);
    p.vocab = "qwen3";
    p.n_vocab = n_vocab;
    p.head_dim = n_embd / n_head;
    p.n_rot = p.head_dim;
    p.rms_eps = 1e-5f;
    return p;
}

std::vector<Preset> make_presets() {
    std::vector<Preset> v;
    v.push_back(qwen2("qwen2.5-0.5b", "Qwen2.5 0.5B Instruct", "0.5B", 24, 896, 4864, 14, 2, 151936, true));
    v.push_back(qwen2("qwen2.5-7b", "Qwen2.5 7B Instruct", "7.6B", 28, 3584, 18944, 28, 4, 152064, false));
    v.push_back(mistral("mistral-nemo-12b", "llama", "Mistral Nemo Instruct 2407", "12B", 40, 5120, 14336, 1024000,
                        1e6f));
    v.push_back(mistral("mistral-small-3.2-24b", "mistral3", "Mistral Small 3.2 24B Instruct 2506", "24B", 40, 5120,
                        32768, 131072, 1e9f));
    {
        // YaRN x16 over 16,384 positions, and llama-4 attention temperature past them.
        Preset p = mistral("ministral-3-8b", "mistral3", "Ministral 3 8B Instruct 2512", "8B", 34, 4096, 14336,
                           262144, 1e6f);
        p.yarn_factor = 16.0f;
        p.yarn_orig_ctx = 16384;
        p.attn_temp_scale = 0.1f;
        v.push_back(p);
    }
    v.push_back(qwen3("qwen3-0.6b", "Qwen3 0.6B", "0.6B", 28, 1024, 3072, 16, 8, true));
    v.push_back(qwen3("qwen3-8b", "Qwen3 8B", "8.2B", 36, 4096, 12288, 32, 8, false));
    {
        Preset p = qwen3("qwen3-30b-a3b", "Qwen3 30B A3B", "30B-A3B", 48, 2048, 6144, 32, 4, false);
        p.arch = "qwen3moe";
        p.n_expert = 128;
        p.n_expert_used = 8;
        p.n_ff_exp = 768;
        v.push_back(p);
    }
    {
        // Phi-4 (14B): no LongRoPE; its config's sliding_window is null, which the converter writes as 0.
        Preset p = phi3("phi-4", "Phi 4", "15B", 40, 5120, 17920, 40, 10, 100352);
        p.n_ctx = 16384;
        p.orig_ctx = 16384;
        p.rope_base = 250000.0f;
        v.push_back(p);
    }
    {
        // Phi-4-mini-instruct: 96 of 128 dimensions rotate (partial_rotary_factor 0.75), LongRoPE from 4096 to
        // 131072 positions, tied embeddings, a 262144 sliding window (longer than the context).
        Preset p = phi3("phi-4-mini", "Phi 4 Mini Instruct", "3.8B", 32, 3072, 8192, 24, 8, 200064);
        p.n_rot = 96;
        p.n_ctx = 131072;
        p.orig_ctx = 4096;
        p.longrope = true;
        p.sliding_window = 262144;
        p.tied = true;
        v.push_back(p);
    }
    v.push_back(qwen35("qwen3.5-9b", "Qwen3.5 9B", "9B", 32, 4096, 12288, 16, 4, 32));
    v.push_back(qwen35("qwen3.6-27b", "Qwen3.6 27B", "27B", 64, 5120, 17408, 24, 4, 48));
    {
        Preset p = qwen35("qwen3.6-35b-a3b", "Qwen3.6 35B A3B", "35B-A3B", 40, 2048, 0, 16, 2, 32);
        p.arch = "qwen35moe";
        p.n_expert = 256;
        p.n_expert_used = 8;
        p.n_ff_exp = 512;
        p.n_ff_shexp = 512;
        v.push_back(p);
    }
    {
        Preset p = gemma3("gemma-3-1b", "Gemma 3 1B It", "1B", 26, 1152, 6912, 4, 1, 256);
        p.n_vocab = 262144;
        p.n_ctx = 32768;
        p.rope_scale = 0.0f;
        p.sliding_window = 512;
        v.push_back(p);
    }
    v.push_back(gemma3("gemma-3-27b", "Gemma 3 27B It", "27B", 62, 5376, 21504, 32, 16, 128));
    v.push_back(gemma4("gemma-4-31b", "Gemma 4 31B", "31B", 60, 5376, 21504, 32, 16, 4));
    {
        Preset p = gemma4("gemma-4-26b-a4b", "Gemma 4 26B A4B", "26B-A4B", 30, 2816, 2112, 16, 8, 2);
        p.n_expert = 128;
        p.n_expert_used = 8;
        p.n_ff_exp = 704;
        v.push_back(p);
    }
    {
        Preset p = preset("gpt-oss-20b", "gpt-oss", "Gpt Oss 20B", "20B", 24, 2880, 2880, 64, 8);
        p.vocab = "qwen3";  // the real o200k tokenizer is not available; padded to the real vocab size
        p.n_vocab = 201088;
        p.head_dim = 64;
        p.n_ctx = 131072;
        p.rms_eps = 1e-5f;
        p.rope_base = 150000.0f;
        p.n_expert = 32;
        p.n_expert_used = 4;
        p.n_ff_exp = 2880;
        p.sliding_window = 128;
        p.yarn_factor = 32.0f;
        p.yarn_orig_ctx = 4096;
        v.push_back(p);
    }
    return v;
}

// gemma4's layer pattern: every swa_period-th layer and the last attend globally, the others slide.
bool is_swa_layer(const Preset& p, uint32_t il) { return il + 1 != p.n_layer && (il + 1) % p.swa_period != 0; }

gguf::KeyValue kv(std::string key, gguf::Value v) {
    v.set_key(key);
    return {std::move(key), std::move(v)};
}

}  // namespace

float longrope_attn_factor(uint32_t n_ctx, uint32_t orig_ctx) {
    const double s = double(n_ctx) / double(orig_ctx);
    return s > 1.0 ? float(std::sqrt(1.0 + std::log(s) / std::log(double(orig_ctx)))) : 1.0f;
}

const std::vector<Preset>& presets() {
    static const std::vector<Preset> v = make_presets();
    return v;
}

const Preset* find_preset(std::string_view name) {
    for (const Preset& p : presets())
        if (p.name == name) return &p;
    return nullptr;
}

Preset with_layers(const Preset& p, uint32_t n_layer) {
    if (n_layer == 0) throw std::invalid_argument("synth: the layer count must be at least 1");
    Preset r = p;
    r.n_layer = n_layer;
    if (r.full_attn_interval > n_layer) r.full_attn_interval = n_layer;
    return r;
}

std::vector<TensorSpec> tensor_list(const Preset& p) {
    std::vector<TensorSpec> t = list_tensors(Metadata(arch_metadata(p), p.n_vocab, "preset " + p.name), p.tied);
    sort_like_llama_quantize(t);
    return t;
}

MixModel mix_model(const Preset& p) {
    MixModel m;
    m.arch = p.arch;
    m.n_layer = static_cast<int>(p.n_layer);
    m.n_expert = static_cast<int>(p.n_expert);
    // The first layer's KV heads, as arch_metadata writes them (a gemma4's first layer is a sliding one).
    const uint32_t kv = p.arch == "gemma4" && !is_swa_layer(p, 0) ? p.n_head_kv_global : p.n_head_kv;
    m.n_gqa = kv > 0 ? static_cast<int>(p.n_head / kv) : 0;
    return m;  // no preset is a llama 70B
}

std::vector<gguf::KeyValue> arch_metadata(const Preset& p) {
    using gguf::Value;
    std::vector<gguf::KeyValue> m;
    const std::string a = p.arch + ".";
    auto u32 = [&](const std::string& k, uint32_t v) { m.push_back(kv(a + k, Value::of(v))); };
    auto f32 = [&](const std::string& k, float v) { m.push_back(kv(a + k, Value::of(v))); };
    m.push_back(kv("general.architecture", Value::of(p.arch)));
    m.push_back(kv("general.type", Value::of("model")));
    m.push_back(kv("general.name", Value::of(p.model_name + " (zinc synth, random weights)")));
    m.push_back(kv("general.size_label", Value::of(p.size_label)));
    u32("block_count", p.n_layer);
    u32("context_length", p.n_ctx);
    u32("embedding_length", p.n_embd);

    if (p.arch == "qwen3" || p.arch == "qwen3moe" || p.arch == "qwen2") {
        u32("feed_forward_length", p.n_ff);
        u32("attention.head_count", p.n_head);
        u32("attention.head_count_kv", p.n_head_kv);
        f32("rope.freq_base", p.rope_base);
        f32("attention.layer_norm_rms_epsilon", p.rms_eps);
        if (p.arch != "qwen2") {  // qwen2's converter leaves the head size to n_embd / n_head
            u32("attention.key_length", p.head_dim);
            u32("attention.value_length", p.head_dim);
        }
        if (p.arch == "qwen3moe") {
            u32("expert_count", p.n_expert);
            u32("expert_used_count", p.n_expert_used);
            u32("expert_feed_forward_length", p.n_ff_exp);
        }
    } else if (p.arch == "qwen35" || p.arch == "qwen35moe") {
        if (p.arch == "qwen35") u32("feed_forward_length", p.n_ff);
        u32("attention.head_count", p.n_head);
        u32("attention.head_count_kv", p.n_head_kv);
        const std::vector<int32_t> sections = {11, 11, 10, 0};
        m.push_back(kv(a + "rope.dimension_sections", Value::array(sections)));
        f32("rope.freq_base", p.rope_base);
        f32("attention.layer_norm_rms_epsilon", p.rms_eps);
        if (p.arch == "qwen35moe") {
            u32("expert_count", p.n_expert);
            u32("expert_used_count", p.n_expert_used);
        }
        u32("attention.key_length", p.head_dim);
        u32("attention.value_length", p.head_dim);
        if (p.arch == "qwen35moe") {
            u32("expert_feed_forward_length", p.n_ff_exp);
            u32("expert_shared_feed_forward_length", p.n_ff_shexp);
        }
        u32("ssm.conv_kernel", p.ssm_conv);
        u32("ssm.state_size", p.ssm_state);
        u32("ssm.group_count", p.ssm_groups);
        u32("ssm.time_step_rank", p.ssm_v_heads);
        u32("ssm.inner_size", p.ssm_v_heads * p.ssm_state);
        u32("full_attention_interval", p.full_attn_interval);
        u32("rope.dimension_count", p.n_rot);
    } else if (p.arch == "gemma4") {
        u32("feed_forward_length", p.n_ff);
        u32("attention.head_count", p.n_head);
        std::vector<int32_t> kv_heads;
        std::vector<bool> swa;
        for (uint32_t il = 0; il < p.n_layer; ++il) {
            swa.push_back(is_swa_layer(p, il));
            kv_heads.push_back(static_cast<int32_t>(swa.back() ? p.n_head_kv : p.n_head_kv_global));
        }
        m.push_back(kv(a + "attention.head_count_kv", Value::array(kv_heads)));
        f32("rope.freq_base", p.rope_base);
        f32("rope.freq_base_swa", p.rope_base_swa);
        f32("attention.layer_norm_rms_epsilon", p.rms_eps);
        if (p.n_expert > 0) {
            u32("expert_count", p.n_expert);
            u32("expert_used_count", p.n_expert_used);
        }
        u32("attention.key_length", p.head_dim);
        u32("attention.value_length", p.head_dim);
        f32("final_logit_softcapping", p.softcap);
        u32("attention.sliding_window", p.sliding_window);
        u32("attention.shared_kv_layers", 0);
        u32("embedding_length_per_layer_input", 0);
        m.push_back(kv(a + "attention.sliding_window_pattern", Value::array(swa)));
        u32("attention.key_length_swa", p.head_dim_swa);
        u32("attention.value_length_swa", p.head_dim_swa);
        if (p.n_expert > 0) u32("expert_feed_forward_length", p.n_ff_exp);
        u32("rope.dimension_count", p.head_dim);
        u32("rope.dimension_count_swa", p.head_dim_swa);
    } else if (p.arch == "gemma3") {
        u32("feed_forward_length", p.n_ff);
        u32("attention.head_count", p.n_head);
        u32("attention.head_count_kv", p.n_head_kv);
        f32("rope.freq_base", p.rope_base);
        f32("attention.layer_norm_rms_epsilon", p.rms_eps);
        u32("attention.key_length", p.head_dim);
        u32("attention.value_length", p.head_dim);
        u32("attention.sliding_window", p.sliding_window);
        if (p.rope_scale > 0) {
            m.push_back(kv(a + "rope.scaling.type", Value::of("linear")));
            f32("rope.scaling.factor", p.rope_scale);
        }
    } else if (p.arch == "phi3") {  // in the order the converter writes them
        u32("rope.scaling.original_context_length", p.orig_ctx);
        u32("feed_forward_length", p.n_ff);
        u32("attention.head_count", p.n_head);
        u32("attention.head_count_kv", p.n_head_kv);
        f32("attention.layer_norm_rms_epsilon", p.rms_eps);
        u32("rope.dimension_count", p.n_rot);
        f32("rope.freq_base", p.rope_base);
        u32("attention.sliding_window", p.sliding_window);
        if (p.longrope) f32("rope.scaling.attn_factor", longrope_attn_factor(p.n_ctx, p.orig_ctx));
    } else if (p.arch == "gpt-oss") {
        u32("feed_forward_length", p.n_ff);
        u32("attention.head_count", p.n_head);
        u32("attention.head_count_kv", p.n_head_kv);
        m.push_back(kv(a + "rope.scaling.type", Value::of("yarn")));
        f32("rope.scaling.factor", p.yarn_factor);
        u32("rope.scaling.original_context_length", p.yarn_orig_ctx);
        f32("rope.scaling.yarn_beta_fast", 32.0f);
        f32("rope.scaling.yarn_beta_slow", 1.0f);
        f32("rope.freq_base", p.rope_base);
        f32("attention.layer_norm_rms_epsilon", p.rms_eps);
        u32("expert_count", p.n_expert);
        u32("expert_used_count", p.n_expert_used);
        u32("attention.key_length", p.head_dim);
        u32("attention.value_length", p.head_dim);
        u32("attention.sliding_window", p.sliding_window);
        u32("expert_feed_forward_length", p.n_ff_exp);
    } else if (p.arch == "llama" || p.arch == "mistral3") {
        u32("feed_forward_length", p.n_ff);
        u32("attention.head_count", p.n_head);
        u32("attention.head_count_kv", p.n_head_kv);
        f32("rope.freq_base", p.rope_base);
        f32("attention.layer_norm_rms_epsilon", p.rms_eps);
        u32("attention.key_length", p.head_dim);
        u32("attention.value_length", p.head_dim);
        u32("rope.dimension_count", p.head_dim);
        if (p.yarn_factor > 0) {  // as the mistral3 converter writes Ministral 3's rope_parameters
            m.push_back(kv(a + "rope.scaling.type", Value::of("yarn")));
            f32("rope.scaling.factor", p.yarn_factor);
            u32("rope.scaling.original_context_length", p.yarn_orig_ctx);
            f32("rope.scaling.yarn_beta_fast", 32.0f);
            f32("rope.scaling.yarn_beta_slow", 1.0f);
            f32("rope.scaling.yarn_log_multiplier", 1.0f);
        }
        if (p.attn_temp_scale > 0) f32("attention.temperature_scale", p.attn_temp_scale);
    } else {
        throw std::invalid_argument("synth: no metadata for architecture " + p.arch);
    }
    return m;
}

}  // namespace zinc::model
