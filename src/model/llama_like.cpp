#include "model/llama_like.h"

#include "model/families.h"

namespace zinc::model {

LlamaLikeParams read_llama_like_params(const Metadata& md) {
    LlamaLikeParams p;
    p.arch = md.arch();
    if (!is_family(p.arch, FamilyKind::llama_like)) md.fail("architecture " + p.arch + " is not a llama-like family");
    p.n_layer = md.count("block_count", kMaxLayers);
    p.n_embd = md.count("embedding_length");
    const bool moe = p.arch == "qwen3moe";
    // qwen3moe's converter writes the dense width of the checkpoint's config, which no layer uses.
    p.n_ff = moe ? md.count_or("feed_forward_length", 0) : md.count("feed_forward_length");
    if (moe) {
        p.n_expert = md.count("expert_count");
        p.n_expert_used = md.count("expert_used_count", p.n_expert);
        p.n_ff_exp = md.count("expert_feed_forward_length");
    }
    p.n_head = md.count("attention.head_count");
    p.n_head_kv = md.count_or("attention.head_count_kv", p.n_head);
    if (p.n_head % p.n_head_kv != 0) md.fail("attention.head_count is not a multiple of attention.head_count_kv");
    p.head_dim = md.count_or("attention.key_length", p.n_embd / p.n_head);
    if (p.head_dim < 1) md.fail("embedding_length is smaller than attention.head_count");
    if (md.count_or("attention.value_length", p.head_dim) != p.head_dim)
        md.fail("different key and value head sizes are not supported");
    p.n_rot = md.count_or("rope.dimension_count", p.head_dim);
    if (p.n_rot > p.head_dim || p.n_rot % 2) md.fail(p.arch + ".rope.dimension_count must be even and at most the head size");
    p.rms_eps = md.number("attention.layer_norm_rms_epsilon", kNormEpsilon);
    p.rope_base = md.number_or("rope.freq_base", 10000.0f, kRopeBase);
    p.rope_scaling = md.rope_scaling(p.n_rot, p.rope_base, YarnRange::whole_pairs);
    const int n_ctx_train = md.count_or("context_length", 4096, kMaxContext);
    p.n_ctx_orig = md.count_or("rope.scaling.original_context_length", n_ctx_train, kMaxContext);
    p.attn_temp_scale = md.number_or("attention.temperature_scale", 0.0f, Range{0.0f, 1e3f});
    p.rope_neox = p.arch == "qwen3" || p.arch == "qwen3moe" || p.arch == "qwen2" || p.arch == "phi3";
    if (p.arch == "phi3") {
        p.fused = true;
        // attention.sliding_window is not read: llama.cpp runs every phi3 layer with full attention (Phi-4 files
        // say 0, Phi-4-mini's window is longer than its context).
        p.longrope = md.find(p.arch + ".rope.scaling.attn_factor") != nullptr;
        p.rope_attn_factor = md.number_or("rope.scaling.attn_factor", 1.0f, kRopeAttnFactor);
    }
    p.qk_norm = p.arch == "qwen3" || p.arch == "qwen3moe";
    p.qkv_bias = p.arch == "qwen2";
    p.n_vocab = static_cast<int>(md.n_vocab());
    return p;
}

}  // namespace zinc::model
