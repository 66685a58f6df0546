// Which ggml type each tensor of a model gets for a `--type` quant mix (`zinc synth`, `zinc quantize`):
// llama-quantize's rules (docs/formats.md §2.9) for the stock mixes, plus an Unsloth-UD-like mix and gpt-oss's
// MXFP4 experts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/metadata.h"
#include "model/schema.h"

namespace zinc::model {

// llama-quantize's mixes that need no importance matrix (its Q2_K_S and IQ1/IQ2/IQ3 mixes refuse to run without
// one), plus MXFP4_MOE and an Unsloth-like UD-Q4_K_XL.
enum class QuantMix {
    F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
    Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K,
    IQ4_NL, IQ4_XS, MXFP4_MOE, UD_Q4_K_XL
};

// The names above as llama-quantize spells them, "UD-Q4_K_XL" with a dash (case-insensitive). Throws
// std::invalid_argument for anything else.
QuantMix parse_quant_mix(std::string_view s);
std::string quant_mix_name(QuantMix m);
std::vector<std::string> quant_mix_names();

// general.file_type (llama_ftype): 0 F32, 1 F16, 32 BF16, 7 Q8_0, 2 Q4_0, 3 Q4_1, 8 Q5_0, 9 Q5_1, 10 Q2_K,
// 11/12/13 Q3_K_S/M/L, 14/15 Q4_K_S/M, 16/17 Q5_K_S/M, 18 Q6_K, 25 IQ4_NL, 30 IQ4_XS, 38 MXFP4_MOE; UD-Q4_K_XL files
// report 15 like Unsloth's.
uint32_t file_type(QuantMix m);

// What the rules read of a model besides its tensors' names and shapes.
struct MixModel {
    std::string arch;  // general.architecture
    int n_layer = 0;   // <arch>.block_count
    int n_expert = 0;  // <arch>.expert_count; 0 for a dense model
    // llama.cpp's LLM_TYPE_70B: a `llama` of 80 layers, without 8 experts, with fewer KV heads than heads (Llama 2
    // and 3 70B). Its attn_v tensors get Q5_K where the mix would give Q3_K or Q4_K.
    bool llama_70b = false;
    // llama.cpp's n_gqa(): the first layer's heads per KV head (n_head / n_head_kv), 0 without KV heads. Q2_K,
    // IQ4_NL and IQ4_XS give attn_v more bits from 4 on.
    int n_gqa = 0;
};

// The MixModel of a file, from its range-checked metadata (<arch>.block_count, <arch>.expert_count and the first
// layer's head counts).
MixModel read_mix_model(const Metadata& md);

// The layer of a tensor called "blk.<layer>.<name>"; -1 for any other name.
int layer_of(std::string_view name);

// llama-quantize's order: model-level tensors first, then by layer; by name within each group (the order of its
// weights map, in which its Q4_K_M layer counters visit the tensors). Layers are TensorSpec::layer.
void sort_like_llama_quantize(std::vector<TensorSpec>& tensors);

// ggml_n_dims: the rank without trailing extents of 1 (at least 1).
int n_dims(const std::vector<int64_t>& ne);

// llama-quantize's tensor_allows_quantization for the tensors of the presets: 2-D/3-D, name ends in "weight",
// not a norm, not a router (ffn_gate_inp.weight), not ssm_conv1d, not per_layer_model_proj.
bool allows_quantization(const TensorSpec& t);

// The type of every tensor of `tensors` (in the order given, which must be llama-quantize's order:
// sort_like_llama_quantize) of model `model` for mix m. Rules:
// * tensors that are never quantized (allows_quantization) are given F32, the type converters write them in; a file
//   that holds such a tensor in another type keeps that type (the caller's business);
// * every llama-quantize mix: its choice for that llama_ftype without an imatrix (llama_tensor_get_type; zinc's
//   families have no Falcon rules to take). The output and a tied token_embd get Q6_K (Q8_0 where the row is not a
//   whole number of the mix's blocks, and for Q8_0/MXFP4_MOE); attn_v-like tensors (attn_v, attn_qkv, attn_kv_b,
//   counted in file order) get more bits by mix (Q2_K: Q4_K from 4 heads per KV head, else Q3_K; Q3_K_M: Q5_K for
//   the first two, then Q4_K; Q3_K_L: Q5_K; IQ4_NL/IQ4_XS: Q5_K from 4 heads per KV head; Q4_K_M/Q5_K_M: Q6_K on
//   the more-bits layers; Q4_K_S: Q5_K for the first four), Q5_K for a llama 70B's Q3_K/Q4_K and Q8_0 with 8
//   experts; attn_k gets Q8_0 with 8 experts; ffn_down* by layer (the tensor's own layer with experts, else a
//   counter): Q2_K: Q3_K; Q3_K_M: Q5_K below n_layer/16, then Q4_K; Q3_K_L: Q5_K; Q4_K_M/Q5_K_M: Q6_K on the
//   more-bits layers; Q4_K_S, IQ4_NL, IQ4_XS: Q5_K below n_layer/8; attn_output: Q5_K with 8 experts for Q2_K,
//   Q3_K_S/M, Q4_K_S/M, IQ4_NL/XS, else Q2_K: Q3_K, Q3_K_M: Q4_K, Q3_K_L: Q5_K. Then the fallbacks when ne0 is not a
//   multiple of the block size (Q2_K/Q3_K->Q4_0, Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0, IQ4_XS->IQ4_NL, then F16);
// * gpt-oss: stacked expert weights are MXFP4 whatever the mix (as in the released GGUFs);
// * UD-Q4_K_XL (modelled on Unsloth's Qwen3.5/3.6 MoE files): routed experts gate/up Q4_K and down Q5_K; shared
//   expert Q8_0; Gated DeltaNet projections (attn_qkv, attn_gate, ssm_alpha, ssm_beta, ssm_out) Q8_0; attention
//   (attn_q/k/v/output) Q8_0; dense FFN gate/up Q4_K, down Q5_K; LM head Q6_K; token_embd Q4_K; same fallbacks.
// Throws std::invalid_argument, as llama-quantize does, for an FFN tensor of an MoE model whose name gives no layer
// in [0, n_layer) when the rules need it.
std::vector<gguf::TensorType> choose_types(const MixModel& model, const std::vector<TensorSpec>& tensors, QuantMix m);

}  // namespace zinc::model
