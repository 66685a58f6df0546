// Hyper-parameters and tensors of the Qwen3.5 / Qwen3.6 hybrid families (`qwen35`, `qwen35moe`, MODELS.md §4-5):
// gated delta-net (recurrent) layers and gated full-attention layers; the FFN of each layer is a dense SwiGLU or
// a routed MoE with a sigmoid-gated shared expert, as the file's tensors say.
#pragma once

#include <string>
#include <vector>

#include "gguf/split.h"

namespace zinc::model {

struct Qwen35Params {
    std::string arch;
    int n_layer = 0;  // main stack (block_count - nextn_predict_layers)
    int n_embd = 0, n_vocab = 0, n_ctx_train = 0;
    std::vector<bool> recurrent;  // per layer: gated delta-net (true) or full attention
    // Full attention
    int n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0;
    float rope_base = 10000.0f;
    float rms_eps = 1e-6f;
    // Gated delta-net: n_k key heads, n_v value heads of d_state (= d_k = d_v), conv kernel width
    int ssm_conv_kernel = 0, ssm_d_state = 0, ssm_n_k = 0, ssm_n_v = 0;
    int key_dim() const { return ssm_n_k * ssm_d_state; }
    int value_dim() const { return ssm_n_v * ssm_d_state; }
    int conv_dim() const { return 2 * key_dim() + value_dim(); }
    // FFN: dense width (per layer; 0 where absent) and the MoE sizes (0 without experts)
    std::vector<int> n_ff;
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
};

struct Qwen35Layer {
    const gguf::TensorInfo *attn_norm = nullptr, *post_attention_norm = nullptr;
    // gated delta-net
    const gguf::TensorInfo *attn_qkv = nullptr, *attn_gate = nullptr, *ssm_beta = nullptr, *ssm_alpha = nullptr,
                           *ssm_dt = nullptr, *ssm_a = nullptr, *ssm_conv1d = nullptr, *ssm_norm = nullptr,
                           *ssm_out = nullptr;
    // gated full attention
    const gguf::TensorInfo *attn_q = nullptr, *attn_k = nullptr, *attn_v = nullptr, *attn_output = nullptr,
                           *attn_q_norm = nullptr, *attn_k_norm = nullptr;
    // dense FFN
    const gguf::TensorInfo *ffn_gate = nullptr, *ffn_up = nullptr, *ffn_down = nullptr;
    // MoE FFN (ffn_gate_inp present); gate_exps + up_exps or gate_up_exps
    const gguf::TensorInfo *ffn_gate_inp = nullptr, *ffn_gate_exps = nullptr, *ffn_up_exps = nullptr,
                           *ffn_gate_up_exps = nullptr, *ffn_down_exps = nullptr;
    const gguf::TensorInfo *ffn_gate_exps_scale = nullptr, *ffn_up_exps_scale = nullptr,
                           *ffn_down_exps_scale = nullptr;
    const gguf::TensorInfo *ffn_gate_inp_shexp = nullptr, *ffn_gate_shexp = nullptr, *ffn_up_shexp = nullptr,
                           *ffn_down_shexp = nullptr;
    bool moe() const { return ffn_gate_inp != nullptr; }
};

struct Qwen35Tensors {
    const gguf::TensorInfo *token_embd, *output_norm, *output;  // output is token_embd when tied
    std::vector<Qwen35Layer> layers;
};

bool is_qwen35(const std::string& arch);
// Read and check against the file: throws gguf::Error naming the key or tensor that is wrong.
Qwen35Params read_qwen35_params(const gguf::Model& m);
Qwen35Tensors bind_qwen35_tensors(const gguf::Model& m, const Qwen35Params& p);

}  // namespace zinc::model
