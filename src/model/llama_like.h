// Hyper-parameters and tensors of the llama-like families (`llama`, `qwen3`): a pre-norm decoder
// with GQA attention, RoPE and a SwiGLU FFN; qwen3 adds per-head Q/K RMSNorm and NeoX RoPE.
#pragma once

#include <string>
#include <vector>

#include "gguf/split.h"

namespace zinc::model {

struct LlamaLikeParams {
    std::string arch;
    int n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_vocab = 0;
    int n_ctx_train = 0;
    int n_rot = 0;
    bool rope_neox = false;  // qwen3: halves; llama: adjacent pairs
    float rope_base = 10000.0f, rope_freq_scale = 1.0f;
    float rms_eps = 1e-5f;
    bool qk_norm = false;
};

struct LlamaLikeLayer {
    const gguf::TensorInfo *attn_norm, *wq, *wk, *wv, *wo, *q_norm = nullptr, *k_norm = nullptr;
    const gguf::TensorInfo *ffn_norm, *ffn_gate, *ffn_up, *ffn_down;
};

struct LlamaLikeTensors {
    const gguf::TensorInfo *token_embd, *output_norm, *output;  // output is token_embd when tied
    std::vector<LlamaLikeLayer> layers;
};

bool is_llama_like(const std::string& arch);
// Read and check against the file: throws gguf::Error naming the key or tensor that is wrong.
LlamaLikeParams read_llama_like_params(const gguf::Model& m);
LlamaLikeTensors bind_llama_like_tensors(const gguf::Model& m, const LlamaLikeParams& p);

}  // namespace zinc::model
