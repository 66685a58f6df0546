// Pre-tokenizers for byte-level BPE: hand-written scanners equivalent to the split regexes of each
// `tokenizer.ggml.pre` value (docs/formats.md §4.7). No regex engine is involved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::tokenizer {

enum class PreType {
    Gpt2,    // GPT-2: 's|'t|... | ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    Llama3,  // cl100k-style, numbers in groups of up to 3 digits
    Qwen2,   // cl100k-style, single digits
    Qwen35,  // as Qwen2, but marks join letters
    Gpt4o,   // o200k (gpt-oss): case-aware words, contraction suffixes, [\r\n/]* after punctuation
    Tekken,  // Mistral: as Gpt4o without contraction suffixes, single digits
};

// What a `tokenizer.ggml.pre` value selects, with the per-pre flags llama.cpp derives from it.
struct PreTokenizerInfo {
    PreType type = PreType::Gpt2;
    std::string_view name;      // canonical name of the type
    bool ignore_merges = false; // a word that is itself a token is emitted without merging (llama3 family)
    bool add_bos = false;       // default for tokenizer.ggml.add_bos_token when the key is absent
    bool clean_spaces = true;   // HF clean_up_tokenization_spaces applied when detokenizing
    // The family's HF tokenizer.json declares an NFC normalizer (Qwen). llama.cpp does not normalize; zinc
    // follows HF by default (Tokenizer::set_normalize_nfc to turn it off).
    bool nfc = false;
};

// Looks up a `tokenizer.ggml.pre` value; nullopt if it is not supported.
std::optional<PreTokenizerInfo> find_pre_tokenizer(std::string_view pre);
// The supported `tokenizer.ggml.pre` values, comma separated (for error messages).
std::string supported_pre_tokenizers();

// Splits code points into pieces. Returns the boundaries: piece k is [b[k], b[k+1]); b.front() == 0 and
// b.back() == cps.size() (so an empty input gives {0}).
std::vector<size_t> pretokenize(PreType type, std::span<const uint32_t> cps);

// Convenience: splits UTF-8 text and returns the pieces as byte substrings of text (invalid bytes are kept as
// they are and classified as U+FFFD).
std::vector<std::string_view> pretokenize_utf8(PreType type, std::string_view text);

}  // namespace zinc::tokenizer
