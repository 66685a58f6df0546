#include "model/gpt_oss.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "gguf/printable.h"
#include "model/families.h"

namespace zinc::model {

GptOssParams read_gpt_oss_params(const Metadata& md) {
    GptOssParams p;
    if (!is_family(md.arch(), FamilyKind::gpt_oss)) md.fail("architecture " + md.arch() + " is not gpt-oss");
    const std::string a = "gpt-oss.";
    p.n_layer = md.count("block_count", kMaxLayers);
    p.n_embd = md.count("embedding_length");
    p.n_head = md.count("attention.head_count");
    p.n_head_kv = md.count_or("attention.head_count_kv", p.n_head);
    // d_h is not n_embd / n_head (2880 / 64 = 45 for gpt-oss-20b, whose heads are 64 wide).
    p.head_dim = md.count("attention.key_length");
    if (md.count_or("attention.value_length", p.head_dim) != p.head_dim)
        md.fail("gpt-oss needs equal key and value head sizes");
    if (p.n_head % p.n_head_kv || p.head_dim % 2)
        md.fail("inconsistent gpt-oss attention hyper-parameters (head_count, head_count_kv, key_length)");
    p.n_rot = md.count_or("rope.dimension_count", p.head_dim);
    if (p.n_rot > p.head_dim || p.n_rot % 2) md.fail(a + "rope.dimension_count must be even and at most the head size");
    p.n_expert = md.count("expert_count");
    p.n_expert_used = md.count("expert_used_count", p.n_expert);
    p.n_ff_exp = md.count("expert_feed_forward_length");
    p.rms_eps = md.number("attention.layer_norm_rms_epsilon", kNormEpsilon);
    p.sliding_window = md.count("attention.sliding_window", kMaxContext);
    // Sliding layers: an explicit per-layer bool array, or a period n (layer l slides iff l mod n < n - 1, as
    // llama.cpp's set_swa_pattern); default period 2: even layers slide.
    const gguf::Value* pat = md.find(a + "attention.sliding_window_pattern");
    if (pat && pat->is_array()) {
        p.swa = md.flags_per_layer("attention.sliding_window_pattern", p.n_layer);
    } else {
        const int period = md.integer_or("attention.sliding_window_pattern", 2, 0, kMaxLayers);
        for (int l = 0; l < p.n_layer; ++l) p.swa.push_back(period == 0 || l % period < period - 1);
    }
    p.rope_base = md.number_or("rope.freq_base", 150000.0f, kRopeBase);
    p.rope_base_swa = md.number_or("rope.freq_base_swa", p.rope_base, kRopeBase);
    // transformers with truncate = false (gpt-oss's config): the YaRN range is NOT rounded, so e.g. gpt-oss-20b uses
    // [8.093, 17.398] where llama.cpp floors/ceils to [8, 18] (docs/models.md §1.4). The fixture references are
    // transformers' logits, so matching them wins; the difference to llama.cpp is ~1e-3 relative in the logits.
    p.rope_scaling = md.rope_scaling(p.n_rot, p.rope_base, YarnRange::exact);
    p.swiglu_alpha = md.number_or("swiglu_alpha", 1.702f, kActivationParam);  // not written by the converter
    p.swiglu_limit = md.number_or("swiglu_limit", 7.0f, kActivationParam);
    p.n_vocab = static_cast<int>(md.n_vocab());
    return p;
}

}  // namespace zinc::model
