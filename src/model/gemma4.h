// Hyper-parameters and tensors of `gemma4` (Gemma 4 dense and MoE; MODELS.md 6): a sandwich-norm decoder
// with interleaved sliding-window and global attention layers of different head geometry, K = V on
// global layers, proportional RoPE (rope_freqs) on global layers, GeGLU FFNs, an optional routed MoE
// beside the dense MLP, tied embeddings and a final logit soft-cap.
#pragma once

#include <string>
#include <vector>

#include "gguf/split.h"

namespace zinc::model {

struct Gemma4Params {
    int n_layer = 0, n_embd = 0, n_head = 0, n_vocab = 0, n_ctx_train = 0;
    int head_dim = 0, head_dim_swa = 0;  // global / sliding layers (K and V heads have the same size)
    int n_rot = 0, n_rot_swa = 0;
    float rope_base = 1e6f, rope_base_swa = 1e4f;
    int sliding_window = 0;
    float rms_eps = 1e-6f;
    float final_softcap = 30.0f;  // llama.cpp's default when the key is absent; 0 = none
    std::vector<int> n_head_kv, n_ff;  // per layer
    std::vector<bool> swa;             // per layer: true = sliding-window layer
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;

    int layer_head_dim(int l) const { return swa[l] ? head_dim_swa : head_dim; }
    int layer_n_rot(int l) const { return swa[l] ? n_rot_swa : n_rot; }
    float layer_rope_base(int l) const { return swa[l] ? rope_base_swa : rope_base; }
};

struct Gemma4Layer {
    const gguf::TensorInfo *attn_norm, *wq, *wk, *wv = nullptr /* absent: V from the K projection */, *wo;
    const gguf::TensorInfo *q_norm, *k_norm, *post_attn_norm;
    const gguf::TensorInfo *ffn_norm, *ffn_gate, *ffn_up, *ffn_down, *post_ffw_norm;
    float out_scale = 1.0f;  // layer_output_scale (1 when absent)
    // MoE (all null on a dense layer). Either gate_up_exps (per expert n_ff_exp gate rows, then n_ff_exp up
    // rows) or gate_exps + up_exps.
    const gguf::TensorInfo *gate_inp = nullptr, *gate_inp_scale = nullptr;
    const gguf::TensorInfo *gate_up_exps = nullptr, *gate_exps = nullptr, *up_exps = nullptr, *down_exps = nullptr;
    const gguf::TensorInfo *down_exps_scale = nullptr;
    const gguf::TensorInfo *pre_ffw_norm_2 = nullptr, *post_ffw_norm_1 = nullptr, *post_ffw_norm_2 = nullptr;
};

struct Gemma4Tensors {
    const gguf::TensorInfo *token_embd, *output, *output_norm;  // output is token_embd when tied
    const gguf::TensorInfo* rope_freqs = nullptr;               // global layers' frequency factors
    std::vector<Gemma4Layer> layers;
};

bool is_gemma4(const std::string& arch);
// Read and check against the file: throws gguf::Error naming the key or tensor that is wrong.
Gemma4Params read_gemma4_params(const gguf::Model& m);
Gemma4Tensors bind_gemma4_tensors(const gguf::Model& m, const Gemma4Params& p);

}  // namespace zinc::model
