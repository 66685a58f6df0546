// Text <-> token ids for GGUF vocabularies (docs/formats.md §4). Supported: byte-level BPE (`tokenizer.ggml.model`
// = "gpt2") with the pre-tokenizers of pretokenizer.h; SentencePiece-style BPE over U+2581-escaped text with
// <0xXX> byte fallback: "llama" (score-driven, Gemma 2/3) and "gemma4" (merge-rank driven) in spm_bpe.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/pretokenizer.h"

namespace zinc::tokenizer {

// Every failure to load a vocabulary (missing or inconsistent metadata, unsupported kind).
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// tokenizer.ggml.token_type values (docs/formats.md §4.2).
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

// Algorithm family selected by tokenizer.ggml.model.
enum class TokenizerKind {
    Gpt2,    // byte-level BPE
    Spm,     // "llama": SentencePiece BPE by token score (docs/formats.md §4.8)
    Gemma4,  // "gemma4": BPE by merge rank over raw UTF-8 with U+2581 (docs/formats.md §4.9)
};

class Tokenizer {
public:
    // Looks a metadata key up; nullptr when absent.
    using Lookup = std::function<const gguf::Value*(std::string_view key)>;

    static Tokenizer from_gguf(const gguf::File& file);
    static Tokenizer from_metadata(const Lookup& find);
    static Tokenizer from_metadata(std::span<const gguf::KeyValue> kv);

    // Text to ids. add_special: prepend BOS / append EOS as the vocabulary asks (add_bos / add_eos).
    // parse_special: CONTROL (and UNKNOWN) token texts in `text` become those tokens; USER_DEFINED tokens are
    // always matched. Raw text between special tokens is NFC-normalized when normalize_nfc() (as HF does for
    // Qwen). Invalid UTF-8 is kept byte for byte (it is only classified as U+FFFD when splitting).
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
    // A byte range of a text: [begin, end).
    struct Span {
        size_t begin, end;
    };
    // encode() with parse_special, except that a CONTROL or UNKNOWN token is never read from text that overlaps one
    // of `plain` (sorted, disjoint): a chat prompt's messages, whose text stays text (chat/prompt.h).
    std::vector<int32_t> encode(std::string_view text, bool add_special, std::span<const Span> plain) const;
    // Where encode() with parse_special reads CONTROL and UNKNOWN tokens in `text`, in order.
    std::vector<Span> control_spans(std::string_view text) const;

    // The bytes a token stands for. CONTROL/UNKNOWN tokens give their text when render_special, else nothing;
    // USER_DEFINED tokens always give their text; UNUSED/UNDEFINED give nothing. May be partial UTF-8.
    std::string token_text(int32_t id, bool render_special = true) const;
    // Concatenated token_text of ids, then (if the pre-type asks for it) HF clean_up_tokenization_spaces.
    std::string decode(std::span<const int32_t> ids, bool render_special = true) const;

    // Token as stored in the vocabulary (byte-mapped form for NORMAL tokens).
    const std::string& token_str(int32_t id) const { return tokens_.at(static_cast<size_t>(id)); }
    TokenType token_type(int32_t id) const { return types_.at(static_cast<size_t>(id)); }
    // Id of a stored token text, if any.
    std::optional<int32_t> find_token(std::string_view stored_text) const;

    int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
    size_t n_merges() const { return n_merges_; }
    // Special ids, -1 when the vocabulary has none.
    int32_t bos() const { return bos_; }
    int32_t eos() const { return eos_; }
    int32_t eot() const { return eot_; }
    int32_t pad() const { return pad_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    // End-of-generation: EOS, EOT, EOM and the tokens llama.cpp recognizes by text (docs/formats.md §4.11).
    bool is_eog(int32_t id) const;
    const std::vector<int32_t>& eog_ids() const { return eog_; }
    bool is_control(int32_t id) const;

    const std::string& model() const { return model_; }
    TokenizerKind kind() const { return kind_; }
    bool add_space_prefix() const { return add_space_prefix_; }
    const std::string& pre() const { return pre_name_; }
    const PreTokenizerInfo& pre_info() const { return pre_; }
    bool clean_spaces() const { return clean_spaces_; }
    // NFC-normalize raw text fragments before splitting (HF's normalizer for Qwen; default from the pre-type).
    bool normalize_nfc() const { return nfc_; }
    void set_normalize_nfc(bool on) { nfc_ = on; }
    // tokenizer.chat_template, empty when absent.
    const std::string& chat_template() const { return chat_template_; }

    // Byte-level BPE of one pre-tokenized word (raw UTF-8 bytes), appended to out.
    void bpe_word(std::string_view word, std::vector<int32_t>& out) const;

private:
    Tokenizer() = default;
    void build();
    // The text split at special tokens: a token found there (id >= 0) or raw text between them (id < 0).
    struct Piece {
        int32_t id;
        Span at;
    };
    std::vector<Piece> split_special(std::string_view text, bool parse_special, std::span<const Span> plain) const;
    std::vector<int32_t> encode_pieces(std::string_view text, bool add_special, const std::vector<Piece>& pieces) const;
    void encode_fragment(std::string_view text, std::vector<int32_t>& out) const;
    // spm_bpe.cpp: SentencePiece-style kinds.
    void load_spm_bpe(const Lookup& find);
    void build_spm();
    void encode_spm_fragment(std::string_view text, std::vector<int32_t>& out) const;
    void spm_word(std::string_view text, std::vector<int32_t>& out) const;
    void gemma4_word(std::string_view text, std::vector<int32_t>& out) const;
    void byte_fallback(std::string_view bytes, std::vector<int32_t>& out) const;

    struct PairHash {
        size_t operator()(uint64_t k) const { return std::hash<uint64_t>{}(k * 0x9E3779B97F4A7C15ull); }
    };
    struct Merge {
        int32_t rank;
        int32_t result;
    };
    struct StrHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };

    std::string model_;
    TokenizerKind kind_ = TokenizerKind::Gpt2;
    std::vector<float> scores_;             // tokenizer.ggml.scores (SPM merge priority), may be empty
    bool add_space_prefix_ = false;
    std::string pre_name_;
    PreTokenizerInfo pre_;
    std::vector<std::string> tokens_;
    std::vector<TokenType> types_;
    std::unordered_map<std::string, int32_t, StrHash, std::equal_to<>> token_ids_;
    std::unordered_map<uint64_t, Merge, PairHash> merges_;
    size_t n_merges_ = 0;
    std::vector<std::string> pieces_;       // decoded bytes of NORMAL tokens (empty for others)
    std::vector<int32_t> special_cache_;    // CONTROL / USER_DEFINED / UNKNOWN ids, longest text first
    std::vector<int32_t> eog_;
    std::vector<int32_t> fim_eog_;          // FIM pad / rep / sep ids (end generation too)
    std::vector<bool> is_eog_;
    int32_t byte_token_[256] = {};          // token of each single byte (mapped; <0xXX> for SPM kinds), -1 if missing
    int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, pad_ = -1, unk_ = -1;
    bool add_bos_ = false, add_eos_ = false, clean_spaces_ = true, nfc_ = false;
    std::string chat_template_;
};

// Streams token ids to text without ever splitting a UTF-8 character: bytes of an unfinished character are held
// back until the tokens that complete it arrive. Invalid bytes come out as U+FFFD.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok, bool render_special = true)
        : tok_(&tok), render_special_(render_special) {}

    // Adds a token; returns the text that is now complete (possibly empty).
    std::string push(int32_t id);
    // Adds raw bytes (for callers that already have a token's bytes).
    std::string push_bytes(std::string_view bytes);
    // Returns whatever is held back (an unfinished character becomes U+FFFD) and clears the state.
    std::string flush();
    void reset() { pending_.clear(); }
    size_t pending_bytes() const { return pending_.size(); }

private:
    const Tokenizer* tok_;
    bool render_special_;
    std::string pending_;
};

// GPT-2 byte <-> code point mapping (docs/formats.md §4.6).
uint32_t byte_to_codepoint(uint8_t b);
// -1 when cp is not in the table.
int byte_from_codepoint(uint32_t cp);
// Maps raw bytes to their byte-level (vocabulary) form, and back (unmapped code points become
// "[UNK_BYTE_0x..]" like llama.cpp).
std::string bytes_to_mapped(std::string_view raw);
std::string mapped_to_bytes(std::string_view mapped);

}  // namespace zinc::tokenizer
