// Randomly initialised GGUF files of real model shapes (`zinc synth`): the preset's tensors with the names, shapes
// and metadata llama.cpp's converter gives them, a real vocabulary, and a chosen quant mix, so that benchmark models
// need no download. The weights are random (projections N(0, 0.02), norms near 1): useless for text, real in cost.
//
// For speed, each (type, row width) gets a pool of `pool_rows` random rows quantized with the reference quantizers;
// every tensor row is assembled from whole quantization blocks (about 256 weights) copied from pool rows and
// positions chosen by a hash of the seed, the tensor and the row, so any chunk of any tensor can be produced on its
// own while the file streams out and nothing but the pools is held in memory.
//
// Options::text_only zeroes the rows of the output matrix (of token_embd where the embedding is tied) of every token
// that is not whole text: control and added tokens, and tokens whose bytes are not complete UTF-8 (byte-level BPE
// pieces of a character, byte-fallback tokens of bytes >= 0x80). Their logits are then exactly 0 among the other
// tokens' random logits of both signs, so greedy decoding writes valid text only, which servers that parse replies
// (llama.cpp's llama-server) need; the shapes, types and cost are those of the file without it, and every other byte
// is the same. Tied, those tokens also embed to zero vectors (RMSNorm keeps them zero: x / sqrt(mean(x^2) + eps)).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/catalog.h"
#include "model/quant_mix.h"

namespace zinc::synth {

// The vocabularies a synthetic model can carry.
inline constexpr const char* kVocabularies[] = {"qwen3", "gemma3", "tekken"};

struct Options {
    std::string preset;          // model::find_preset name
    std::string type = "Q4_K_M"; // model::parse_quant_mix name
    std::string out;             // the .gguf to write
    std::string vocab;           // one of kVocabularies; empty: the preset's
    // Directory with tokenizer.json[.xz] (+ tokenizer_config.json[.xz], config.json[.xz]); empty: data/tokenizers/
    // <vocab> of the source tree zinc was built from, then of the working directory.
    std::string tokenizer_dir;
    uint64_t seed = 1234;
    uint32_t layers = 0;         // 0: the preset's; else model::with_layers
    uint32_t n_vocab = 0;        // 0: the preset's; else the vocabulary is cut to the first n_vocab ids (tests)
    uint32_t n_expert = 0;       // 0: the preset's; else its first n_expert experts, as many used if fewer (tests)
    // 0: the preset's; else the original context of a LongRoPE preset (tests: shorter than a test's context, so that
    // the long factors apply)
    uint32_t orig_ctx = 0;
    int threads = 0;             // 0: every logical CPU
    uint32_t pool_rows = 64;     // random rows per (type, row width) pool
    bool text_only = false;      // zero the output rows of the tokens that are not whole text (above)
};

// Where a vocabulary's files are.
struct TokenizerFiles {
    std::filesystem::path tokenizer;
    std::optional<std::filesystem::path> tokenizer_config, config;
};

// Everything about the file before a byte of it is written.
struct Plan {
    Options options;             // threads and vocab resolved
    model::Preset preset;        // with the layer and vocabulary overrides applied
    model::QuantMix mix = model::QuantMix::Q4_K_M;
    TokenizerFiles tokenizer;
    std::vector<model::TensorSpec> tensors;  // in file order
    std::vector<gguf::TensorType> types;     // of each tensor
    uint64_t tensor_bytes = 0;               // the tensors' data (the file adds headers and padding)
};

struct Progress {
    size_t tensors_done = 0, n_tensors = 0;
    uint64_t bytes_done = 0, total_bytes = 0;
};

struct Events {
    // Called after every chunk of tensor data (from the writing thread, in order).
    std::function<void(const Progress&)> progress;
    // Things the caller should know that do not stop the file (a token dropped from the vocabulary, the output rows
    // text_only zeroed).
    std::function<void(const std::string&)> note;
};

// Checks the options and settles the file's contents; throws std::invalid_argument naming the option at fault, or
// std::runtime_error when the vocabulary's files cannot be found.
Plan plan(const Options& o);

// Writes the planned file (to `out`.tmp, renamed when complete). With text_only, throws std::invalid_argument before
// anything is written when the vocabulary cannot be read as a tokenizer or has no token of whole text.
void write(const Plan& p, const Events& events = {});

// "qwen3-0.6b, qwen3-8b, ..."
std::string preset_names();

}  // namespace zinc::synth
