// Hugging Face tokenizer.json of a SentencePiece-style BPE model (U+2581-escaped vocabulary, byte fallback, e.g.
// Gemma 3 / Gemma 4) -> GGUF `tokenizer.*` metadata as llama.cpp's converter writes it (docs/formats.md §4.1-§4.3,
// §4.9, §4.15).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gguf/reader.h"

namespace zinc::tokenizer {

struct HfSpmImportOptions {
    // tokenizer.ggml.model to declare:
    //  "gemma4": what conversion/gemma.py Gemma4Model writes (gguf-py LlamaHfVocab over tokenizer.json): every
    //            score -1000, types BYTE for <0xXX>, CONTROL for HF's special tokens (bos/eos/unk/pad/mask and
    //            the extra special tokens), USER_DEFINED for Gemma 4's always-rendered markers, NORMAL otherwise;
    //            plus the merges.
    //  "llama":  the SentencePiece declaration of Gemma 2/3 GGUFs (_set_vocab_sentencepiece). The real scores
    //            live in tokenizer.model, which tokenizer.json lacks; they are reconstructed from the merge list
    //            (score = -rank of the first merge producing the token, which orders tokens as HF's
    //            SentencePiece extractor did). Added tokens become CONTROL (special or special-looking) or
    //            USER_DEFINED with score -1000. No merges key.
    std::string model = "llama";
    // Token slots (config.json vocab_size); missing ids become "[PAD<id>]" UNUSED. Default: the tokenizer's size.
    std::optional<uint32_t> vocab_size;
};

// Throws tokenizer::Error on a tokenizer.json that is not BPE with byte fallback. tokenizer_config may be null.
std::vector<gguf::KeyValue> import_hf_spm_tokenizer(const nlohmann::json& tokenizer,
                                                    const nlohmann::json* tokenizer_config,
                                                    const HfSpmImportOptions& opts = {});

}  // namespace zinc::tokenizer
