// Real model shapes as data: the presets `zinc synth` writes (architecture, hyper-parameters, the tensor list with
// the names and ggml shapes llama.cpp's converter gives them, and the `<arch>.*` metadata the converter writes).
// Sources: docs/models.md §3-7 and the converter-written reference fixtures in tests/fixtures/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "model/quant_mix.h"
#include "model/schema.h"

namespace zinc::model {

struct Preset {
    std::string name;          // CLI name, e.g. "qwen3-8b"
    std::string arch;          // general.architecture
    std::string model_name;    // general.name
    std::string size_label;    // general.size_label
    std::string vocab;         // default vocabulary: "qwen3", "gemma3" or "tekken"
    uint32_t n_vocab = 0;      // embedding rows (the checkpoint's padded vocab_size)
    uint32_t n_layer = 0;
    uint32_t n_embd = 0;
    uint32_t n_ff = 0;         // dense FFN width (0: none)
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;    // gemma4: sliding layers
    uint32_t head_dim = 0;     // gemma4: global layers
    uint32_t n_ctx = 0;
    float rms_eps = 1e-6f;
    float rope_base = 10000.0f;
    float rope_scale = 0.0f;   // linear RoPE scaling factor (gemma3's global layers); 0: none
    bool tied = false;         // LM head shares token_embd (no output.weight)
    // qwen35 / qwen35moe
    uint32_t n_rot = 0;
    uint32_t ssm_conv = 0, ssm_state = 0, ssm_groups = 0, ssm_v_heads = 0;
    uint32_t full_attn_interval = 0;
    // MoE
    uint32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
    // gemma4
    uint32_t head_dim_swa = 0, n_head_kv_global = 0, sliding_window = 0, swa_period = 0;
    float rope_base_swa = 0.0f, rope_partial_global = 0.0f, softcap = 0.0f;
    // YaRN (gpt-oss, Ministral 3); Ministral 3's attention temperature past yarn_orig_ctx
    float yarn_factor = 0.0f;
    uint32_t yarn_orig_ctx = 0;
    float attn_temp_scale = 0.0f;
    // phi3: rope.scaling.original_context_length; with longrope, LongRoPE factors for a context of n_ctx over it
    uint32_t orig_ctx = 0;
    bool longrope = false;
};

// phi3's rope.scaling.attn_factor as llama.cpp's converter computes it for LongRoPE: sqrt(1 + ln(s) / ln(orig_ctx))
// with s = n_ctx / orig_ctx, 1 where s <= 1.
float longrope_attn_factor(uint32_t n_ctx, uint32_t orig_ctx);

// All presets, in the order `zinc synth --help` lists them.
const std::vector<Preset>& presets();
// nullptr when unknown.
const Preset* find_preset(std::string_view name);

// The preset with its layer count replaced (for smaller test files of a real width). Where the layer pattern
// would leave no layer of some kind, the reduced model keeps one: qwen35's full_attention_interval becomes
// min(4, n_layer) so the last layer is full attention; gemma4's last layer is always global (it is in the real
// models too).
Preset with_layers(const Preset& p, uint32_t n_layer);

// The tensors of the model as its family declares them (model/families.h), in the order llama-quantize writes them
// (model-level tensors first, then by layer; by name within each group), which is also the order its Q4_K_M layer
// counters visit them.
std::vector<TensorSpec> tensor_list(const Preset& p);

// What the quant-mix rules read of the preset (model::choose_types).
MixModel mix_model(const Preset& p);

// general.architecture, general.type, general.name, general.size_label and the `<arch>.*` hyper-parameters,
// with the value types gguf-py writes (UINT32 counts, FLOAT32 eps/bases, INT32/BOOL arrays for per-layer values).
// general.file_type, general.quantization_version and tokenizer.* are added by the caller.
std::vector<gguf::KeyValue> arch_metadata(const Preset& p);

}  // namespace zinc::model
