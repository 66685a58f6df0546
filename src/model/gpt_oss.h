// Hyper-parameters and tensors of `gpt-oss` (MODELS.md 7): a pre-norm MoE decoder with biases on every
// projection, learned attention sinks, alternating sliding-window / full attention, YaRN RoPE and
// clamped SwiGLU ("SwiGLU-OAI") experts.
#pragma once

#include <string>
#include <vector>

#include "gguf/split.h"

namespace zinc::model {

struct GptOssParams {
    int n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_vocab = 0, n_ctx_train = 0;
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
    int sliding_window = 0;
    std::vector<bool> swa;  // per layer: true = sliding-window layer
    float rms_eps = 1e-5f;
    int n_rot = 0;
    float rope_base = 150000.0f, rope_base_swa = 150000.0f;
    // YaRN (MODELS.md 1.4); ext_factor 0 when the file has no YaRN scaling.
    float rope_freq_scale = 1.0f, yarn_ext_factor = 0.0f, yarn_low = 0.0f, yarn_high = 0.0f, yarn_mscale = 1.0f;
    float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;
};

struct GptOssLayer {
    const gguf::TensorInfo *attn_norm, *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo, *sinks;
    const gguf::TensorInfo *post_attn_norm;  // the pre-MoE norm (HF post_attention_layernorm)
    const gguf::TensorInfo *gate_inp, *gate_inp_b;
    const gguf::TensorInfo *gate_exps, *gate_exps_b, *up_exps, *up_exps_b, *down_exps, *down_exps_b;
};

struct GptOssTensors {
    const gguf::TensorInfo *token_embd, *output, *output_norm;
    std::vector<GptOssLayer> layers;
};

bool is_gpt_oss(const std::string& arch);
// Read and check against the file: throws gguf::Error naming the key or tensor that is wrong.
GptOssParams read_gpt_oss_params(const gguf::Model& m);
GptOssTensors bind_gpt_oss_tensors(const gguf::Model& m, const GptOssParams& p);

}  // namespace zinc::model
