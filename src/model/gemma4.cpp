#include "model/gemma4.h"

#include <cmath>

#include "model/families.h"

namespace zinc::model {
namespace {

// Gemma 3's keys: one head geometry and one KV head count for all layers, the sliding layers by a period (every
// `period`-th layer global, as llama.cpp lays them out), RoPE bases 1e4 (sliding) and rope.freq_base (global, with
// its linear scaling).
Gemma4Params read_gemma3_params(const Metadata& md) {
    Gemma4Params p;
    p.gemma4 = false;
    p.n_layer = md.count("block_count", kMaxLayers);
    p.n_embd = md.count("embedding_length");
    p.n_head = md.count("attention.head_count");
    p.n_head_kv = md.per_layer_or("attention.head_count_kv", p.n_layer, 1, kMaxWidth, p.n_head);
    p.n_ff = md.per_layer("feed_forward_length", p.n_layer, 1, kMaxWidth);
    p.head_dim = p.head_dim_swa = md.count_or("attention.key_length", p.n_embd / p.n_head);
    if (p.head_dim < 1) md.fail("embedding_length is smaller than attention.head_count");
    if (md.count_or("attention.value_length", p.head_dim) != p.head_dim)
        md.fail("gemma3 needs equal key and value head sizes");
    p.n_rot = p.n_rot_swa = md.count_or("rope.dimension_count", p.head_dim);
    if (p.n_rot > p.head_dim || p.n_rot % 2)
        md.fail("gemma3.rope.dimension_count must be even and at most the head size");
    for (int l = 0; l < p.n_layer; ++l)
        if (p.n_head % p.n_head_kv[l] != 0)
            md.fail("attention.head_count is not a multiple of head_count_kv of layer " + std::to_string(l));
    p.sliding_window = md.count_or("attention.sliding_window", 0, kMaxContext);
    const int period = md.count_or("attention.sliding_window_pattern", 6, kMaxLayers);
    for (int l = 0; l < p.n_layer; ++l) p.swa.push_back(p.sliding_window > 0 && l % period < period - 1);
    p.rope_base = md.number_or("rope.freq_base", 10000.0f, kRopeBase);
    p.rope_base_swa = md.number_or("rope.freq_base_swa", 10000.0f, kRopeBase);
    p.rope_freq_scale = md.linear_rope_freq_scale();
    p.rms_eps = md.number("attention.layer_norm_rms_epsilon", kNormEpsilon);
    p.final_softcap = md.number_or("final_logit_softcapping", 0.0f, kSoftcap);
    // The file does not hold query_pre_attn_scalar: the head size, but n_embd / n_head for the 27B model (62
    // layers), as llama.cpp tells them apart.
    p.q_scale = 1.0f / std::sqrt(float(p.n_layer == 62 ? p.n_embd / p.n_head : p.head_dim));
    p.n_vocab = static_cast<int>(md.n_vocab());
    return p;
}

}  // namespace

Gemma4Params read_gemma4_params(const Metadata& md) {
    Gemma4Params p;
    if (!is_family(md.arch(), FamilyKind::gemma4)) md.fail("architecture " + md.arch() + " is not gemma3 or gemma4");
    if (md.arch() == "gemma3") return read_gemma3_params(md);
    p.n_layer = md.count("block_count", kMaxLayers);
    p.n_embd = md.count("embedding_length");
    p.n_head = md.count("attention.head_count");
    p.n_head_kv = md.per_layer("attention.head_count_kv", p.n_layer, 1, kMaxWidth);
    p.n_ff = md.per_layer("feed_forward_length", p.n_layer, 1, kMaxWidth);
    p.swa = md.flags_per_layer("attention.sliding_window_pattern", p.n_layer);
    p.head_dim = md.count("attention.key_length");
    p.head_dim_swa = md.count("attention.key_length_swa");
    if (md.count_or("attention.value_length", p.head_dim) != p.head_dim ||
        md.count_or("attention.value_length_swa", p.head_dim_swa) != p.head_dim_swa)
        md.fail("gemma4 needs equal key and value head sizes");
    p.n_rot = md.count_or("rope.dimension_count", p.head_dim);
    p.n_rot_swa = md.count_or("rope.dimension_count_swa", p.head_dim_swa);
    if (p.n_rot > p.head_dim || p.n_rot % 2 || p.n_rot_swa > p.head_dim_swa || p.n_rot_swa % 2)
        md.fail("gemma4 rope dimensions must be even and at most the head size");
    for (int l = 0; l < p.n_layer; ++l)
        if (p.n_head % p.n_head_kv[l] != 0)
            md.fail("attention.head_count is not a multiple of head_count_kv of layer " + std::to_string(l));
    p.rope_base = md.number_or("rope.freq_base", 1e6f, kRopeBase);
    p.rope_base_swa = md.number_or("rope.freq_base_swa", 1e4f, kRopeBase);
    p.sliding_window = md.count("attention.sliding_window", kMaxContext);
    p.rms_eps = md.number("attention.layer_norm_rms_epsilon", kNormEpsilon);
    p.final_softcap = md.number_or("final_logit_softcapping", 30.0f, kSoftcap);
    if (md.integer_or("embedding_length_per_layer_input", 0, 0, kMaxWidth) != 0)
        md.fail("gemma4 per-layer embeddings (E2B/E4B) are not supported yet");
    if (md.integer_or("attention.shared_kv_layers", 0, 0, kMaxLayers) != 0)
        md.fail("gemma4 KV-shared layers (E2B/E4B) are not supported yet");
    p.n_expert = md.count_or("expert_count", 0);
    if (p.n_expert > 0) {
        p.n_expert_used = md.count("expert_used_count", p.n_expert);
        p.n_ff_exp = md.count("expert_feed_forward_length");
    }
    p.n_vocab = static_cast<int>(md.n_vocab());
    return p;
}

}  // namespace zinc::model
