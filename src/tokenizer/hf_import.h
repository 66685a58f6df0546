// Hugging Face tokenizer.json (+ tokenizer_config.json, config.json) -> GGUF `tokenizer.*` metadata, with the
// keys and values llama.cpp's converter writes for byte-level BPE models such as Qwen3 (docs/formats.md §4.1-§4.2,
// §4.15).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gguf/reader.h"
#include "gguf/writer.h"

namespace zinc::tokenizer {

struct HfImportOptions {
    // tokenizer.ggml.pre. Empty: derived from the tokenizer.json pre-tokenizer regex (the converter hashes the
    // HF tokenizer's output instead; the regex identifies the same families).
    std::string pre;
    // Number of token slots (the model's embedding rows, config.json `vocab_size`); slots without a token become
    // "[PAD<id>]" UNUSED. Default: config vocab_size if a config is given, else the tokenizer's size.
    std::optional<uint32_t> vocab_size;
};

// Throws tokenizer::Error (tokenizer.h) on a tokenizer that is not byte-level BPE or is malformed.
// tokenizer_config and config may be null. The result is in the converter's key order.
std::vector<gguf::KeyValue> import_hf_tokenizer(const nlohmann::json& tokenizer, const nlohmann::json* tokenizer_config,
                                                const nlohmann::json* config, const HfImportOptions& opts = {});

// Reads tokenizer.json, and if present tokenizer_config.json, config.json, chat_template.jinja /
// chat_template.json from a model directory. Files ending in .xz are not handled here.
std::vector<gguf::KeyValue> import_hf_tokenizer_dir(const std::string& dir, const HfImportOptions& opts = {});

// The tokenizer.ggml.pre value matching a tokenizer.json pre_tokenizer, or "" when not recognized.
std::string detect_pre_tokenizer(const nlohmann::json& tokenizer);

// Adds every record to a writer.
void add_to_writer(gguf::Writer& w, const std::vector<gguf::KeyValue>& kv);

}  // namespace zinc::tokenizer
