#include "model/qwen35.h"

#include <algorithm>

#include "model/families.h"

namespace zinc::model {
namespace {

// The one value a per-layer parameter takes on the layers selected by `use` (0 if none).
int common_value(const Metadata& md, const std::string& key, const std::vector<int>& v, const std::vector<bool>& use) {
    int out = 0;
    for (size_t i = 0; i < v.size(); ++i) {
        if (!use[i]) continue;
        if (out != 0 && v[i] != out) md.fail(md.arch() + "." + key + " differs between layers; not supported");
        out = v[i];
    }
    return out;
}

}  // namespace

Qwen35Params read_qwen35_params(const Metadata& md) {
    Qwen35Params p;
    p.arch = md.arch();
    if (!is_family(p.arch, FamilyKind::qwen35)) md.fail("architecture " + p.arch + " is not qwen35/qwen35moe");
    const int n_block = md.count("block_count", kMaxLayers);
    p.n_layer = n_block - md.integer_or("nextn_predict_layers", 0, 0, n_block - 1);
    p.n_embd = md.count("embedding_length");

    // Layer types: attention.recurrent_layers when present, else every full_attention_interval-th layer attends.
    if (md.find(p.arch + ".attention.recurrent_layers")) {
        p.recurrent = md.flags_per_layer("attention.recurrent_layers", p.n_layer);
    } else {
        const int interval = md.count_or("full_attention_interval", 4, kMaxLayers);
        for (int l = 0; l < p.n_layer; ++l) p.recurrent.push_back((l + 1) % interval != 0);
    }
    std::vector<bool> attn_layers(p.recurrent.size());
    for (size_t l = 0; l < p.recurrent.size(); ++l) attn_layers[l] = !p.recurrent[l];
    const bool any_attn = std::find(attn_layers.begin(), attn_layers.end(), true) != attn_layers.end();

    p.n_head = common_value(md, "attention.head_count",
                            md.per_layer_or("attention.head_count", p.n_layer, 0, kMaxWidth, 0), attn_layers);
    p.n_head_kv = common_value(md, "attention.head_count_kv",
                               md.per_layer_or("attention.head_count_kv", p.n_layer, 0, kMaxWidth, p.n_head),
                               attn_layers);
    if (p.n_head_kv == 0) p.n_head_kv = p.n_head;
    p.head_dim = md.count_or("attention.key_length", p.n_head > 0 ? p.n_embd / p.n_head : 0);
    if (md.count_or("attention.value_length", p.head_dim) != p.head_dim)
        md.fail("different key and value head sizes are not supported");
    if (any_attn && (p.n_head <= 0 || p.n_head % p.n_head_kv != 0 || p.head_dim <= 0))
        md.fail("inconsistent attention hyper-parameters (head_count, head_count_kv, key_length)");
    p.n_rot = md.count_or("rope.dimension_count", p.head_dim);
    if (any_attn && (p.n_rot > p.head_dim || p.n_rot % 2))
        md.fail(p.arch + ".rope.dimension_count must be even and at most the head size");
    p.rope_base = md.number_or("rope.freq_base", 1e7f, kRopeBase);
    p.rms_eps = md.number("attention.layer_norm_rms_epsilon", kNormEpsilon);
    // IMRoPE (docs/models.md §1.3): for text every pair whose section is t, h or w rotates with position p — plain
    // NeoX. A pair in the 4th section would use position 0 (no rotation); no released model has one, so refuse it.
    if (md.find(p.arch + ".rope.dimension_sections")) {
        std::vector<int> sec = md.leading_values("rope.dimension_sections", 4, 0, kMaxWidth);
        sec.resize(4, 0);
        int64_t total = 0;
        for (int n : sec) total += n;
        for (int64_t i = 0; i < p.n_rot / 2 && total > 0; ++i) {
            const int64_t k = i % total;
            const bool thw = (k % 3 == 0 && k < 3 * sec[0]) || (k % 3 == 1 && k < 3 * sec[1]) ||
                             (k % 3 == 2 && k < 3 * sec[2]);
            if (!thw) md.fail("rope.dimension_sections leave rotary pairs to the extra section");
        }
    }

    p.ssm_conv_kernel = md.count("ssm.conv_kernel", 64);
    p.ssm_d_state = md.count("ssm.state_size");
    p.ssm_n_k = md.count("ssm.group_count");
    p.ssm_n_v = md.count("ssm.time_step_rank");
    if (p.ssm_n_v % p.ssm_n_k) md.fail("ssm.time_step_rank is not a multiple of ssm.group_count");
    if (md.find(p.arch + ".ssm.inner_size") && md.count("ssm.inner_size", kMaxWidth) != p.value_dim())
        md.fail(p.arch + ".ssm.inner_size is not time_step_rank * state_size");

    p.n_ff = md.per_layer_or("feed_forward_length", p.n_layer, 0, kMaxWidth, 0);
    p.n_expert = md.count_or("expert_count", 0);
    if (p.n_expert > 0) {
        p.n_expert_used = md.count("expert_used_count", p.n_expert);
        const int n_ff0 = p.n_ff.empty() ? 0 : p.n_ff[0];
        p.n_ff_exp = md.count_or("expert_feed_forward_length", n_ff0 / p.n_expert_used);
        p.n_ff_shexp = md.count_or("expert_shared_feed_forward_length", n_ff0);
        if (p.n_ff_exp <= 0) md.fail("expert_feed_forward_length is missing");
    }
    p.n_vocab = static_cast<int>(md.n_vocab());
    return p;
}

}  // namespace zinc::model
