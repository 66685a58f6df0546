#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <queue>

#include "gguf/printable.h"
#include "tokenizer/unicode.h"

namespace zinc::tokenizer {

// ---------------------------------------------------------------------------------------------------------------
// GPT-2 byte mapping

namespace {

struct ByteMap {
    std::array<uint32_t, 256> to_cp{};
    std::array<int16_t, 0x144> from_cp{};  // every mapped code point is < U+0144
    ByteMap() {
        from_cp.fill(-1);
        uint32_t next = 0x100;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool same = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            to_cp[b] = same ? b : next++;
            from_cp[to_cp[b]] = static_cast<int16_t>(b);
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return byte_map().to_cp[b]; }

int byte_from_codepoint(uint32_t cp) { return cp < 0x144 ? byte_map().from_cp[cp] : -1; }

std::string bytes_to_mapped(std::string_view raw) {
    std::string out;
    out.reserve(raw.size() * 2);
    for (unsigned char b : raw) unicode::append_utf8(out, byte_map().to_cp[b]);
    return out;
}

std::string mapped_to_bytes(std::string_view mapped) {
    std::string out;
    out.reserve(mapped.size());
    for (size_t pos = 0; pos < mapped.size();) {
        const unicode::Decoded d = unicode::decode_utf8(mapped, pos);
        const int b = d.valid ? byte_from_codepoint(d.cp) : -1;
        if (b >= 0) {
            out.push_back(static_cast<char>(b));
        } else {
            // llama.cpp renders code points outside the table as a marker.
            char buf[32];
            std::snprintf(buf, sizeof buf, "[UNK_BYTE_0x%02x", d.valid ? d.cp : 0xFFFDu);
            out += buf;
            out.append(mapped.substr(pos, d.len));
            out += "]";
        }
        pos += d.len;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Loading

namespace {

constexpr std::array<std::string_view, 11> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>",
};
constexpr std::array<std::string_view, 11> kEogExtraTexts = {
    "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "</s>", "<|eom_id|>", "[EOS]", "<eos>", "<turn|>",
    "<|tool_response>", "[e~[",
};

std::string key(std::string_view k) { return "tokenizer.ggml." + std::string(k); }

// Special id key: any integer type, ignored (keeping the default) when out of range, as llama.cpp does.
void read_id(const Tokenizer::Lookup& find, std::string_view k, int32_t n_vocab, int32_t& id) {
    const gguf::Value* v = find(key(k));
    if (!v) return;
    if (!v->is_integer()) throw Error("tokenizer: " + key(k) + " is not an integer");
    int64_t x = -1;
    try {
        x = v->get_int<int64_t>();
    } catch (const gguf::Error&) {
        // larger than INT64_MAX: out of range like any id >= n_vocab
    }
    if (x >= 0 && x < n_vocab) id = static_cast<int32_t>(x);
}

void read_bool(const Tokenizer::Lookup& find, std::string_view k, bool& b) {
    if (const gguf::Value* v = find(key(k))) b = v->get_bool();
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
    return from_metadata([&file](std::string_view k) { return file.find(k); });
}

Tokenizer Tokenizer::from_metadata(std::span<const gguf::KeyValue> kv) {
    return from_metadata([kv](std::string_view k) -> const gguf::Value* {
        for (const auto& e : kv)
            if (e.key == k) return &e.value;
        return nullptr;
    });
}

Tokenizer Tokenizer::from_metadata(const Lookup& find) {
    Tokenizer t;
    try {
        const gguf::Value* model = find("tokenizer.ggml.model");
        if (!model) throw Error("tokenizer: no tokenizer.ggml.model in the file (a model without a vocabulary)");
        t.model_ = model->get_string();
        if (t.model_ == "llama") t.kind_ = TokenizerKind::Spm;
        else if (t.model_ == "gemma4") t.kind_ = TokenizerKind::Gemma4;
        else if (t.model_ != "gpt2")
            throw Error("tokenizer: tokenizer.ggml.model '" + gguf::printable(t.model_, 64) +
                        "' is not supported (supported: gpt2, llama, gemma4)");
        const bool gpt2 = t.kind_ == TokenizerKind::Gpt2;

        const gguf::Value* pre = find("tokenizer.ggml.pre");
        if (!gpt2) {
            // SentencePiece-style kinds: no regex pre-tokenizer (gemma4 is forced to pre-type "gemma4").
            t.pre_name_ = t.kind_ == TokenizerKind::Gemma4 ? "gemma4" : (pre ? pre->get_string() : "default");
        } else {
        t.pre_name_ = pre ? pre->get_string() : "gpt-2";  // llama.cpp falls back to the GPT-2 regex (degraded)
        const auto info = find_pre_tokenizer(t.pre_name_);
        if (!info)
            throw Error("tokenizer: tokenizer.ggml.pre '" + gguf::printable(t.pre_name_, 64) + "' is not supported (supported: " +
                        supported_pre_tokenizers() + ")");
        t.pre_ = *info;
        }

        const gguf::Value* toks = find("tokenizer.ggml.tokens");
        if (!toks) throw Error("tokenizer: missing tokenizer.ggml.tokens");
        t.tokens_ = toks->get_string_array();
        if (t.tokens_.empty()) throw Error("tokenizer: tokenizer.ggml.tokens is empty");
        if (t.tokens_.size() > static_cast<size_t>(INT32_MAX)) throw Error("tokenizer: too many tokens");
        const auto n = static_cast<int32_t>(t.tokens_.size());

        t.types_.assign(t.tokens_.size(), TokenType::Normal);
        if (const gguf::Value* tt = find("tokenizer.ggml.token_type")) {
            const std::vector<int32_t> types = tt->get_int_array<int32_t>();
            if (types.size() != t.tokens_.size())
                throw Error("tokenizer: tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                            " entries for " + std::to_string(t.tokens_.size()) + " tokens");
            for (size_t i = 0; i < types.size(); ++i)
                t.types_[i] = (types[i] >= 0 && types[i] <= 6) ? static_cast<TokenType>(types[i]) : TokenType::Undefined;
        }

        t.token_ids_.reserve(t.tokens_.size());
        for (int32_t i = 0; i < n; ++i) t.token_ids_.emplace(t.tokens_[static_cast<size_t>(i)], i);  // first wins

        const gguf::Value* merges = find("tokenizer.ggml.merges");
        if (!merges && t.kind_ != TokenizerKind::Spm)
            throw Error("tokenizer: missing tokenizer.ggml.merges (required for " + t.model_ + ")");
        static const gguf::Value kNoMerges = gguf::Value::array(std::vector<std::string>{});
        if (!merges) merges = &kNoMerges;
        const auto& ms = merges->get_string_array();
        t.n_merges_ = ms.size();
        t.merges_.reserve(ms.size());
        for (size_t r = 0; r < ms.size(); ++r) {
            const std::string& m = ms[r];
            const size_t sp = m.find(' ', 1);
            if (sp == std::string::npos) throw Error("tokenizer: merge " + std::to_string(r) + " has no space: '" + gguf::printable(m, 64) + "'");
            const std::string_view a(m.data(), sp), b(m.data() + sp + 1, m.size() - sp - 1);
            const auto ia = t.token_ids_.find(a), ib = t.token_ids_.find(b);
            if (ia == t.token_ids_.end() || ib == t.token_ids_.end()) continue;  // can never apply
            std::string joined;
            joined.reserve(a.size() + b.size());
            joined.append(a).append(b);
            const auto ij = t.token_ids_.find(joined);
            if (ij == t.token_ids_.end()) continue;  // result is not a token: merging would only be undone
            t.merges_.emplace(pair_key(ia->second, ib->second), Merge{static_cast<int32_t>(r), ij->second});
        }

        // Defaults for gpt2 (docs/formats.md §4.3), then the file's keys.
        if (gpt2) {
            if (11 < n) t.bos_ = t.eos_ = 11;
            t.add_bos_ = t.pre_.add_bos;
            t.clean_spaces_ = t.pre_.clean_spaces;
            t.nfc_ = t.pre_.nfc;
        } else {
            t.load_spm_bpe(find);  // scores and the kind's defaults
        }
        read_id(find, "bos_token_id", n, t.bos_);
        read_id(find, "eos_token_id", n, t.eos_);
        read_id(find, "eot_token_id", n, t.eot_);
        read_id(find, "eom_token_id", n, t.eom_);
        read_id(find, "unknown_token_id", n, t.unk_);
        read_id(find, "padding_token_id", n, t.pad_);
        for (const char* k : {"fim_pad_token_id", "fim_rep_token_id", "fim_sep_token_id"}) {
            int32_t id = -1;
            read_id(find, k, n, id);
            if (id >= 0) t.fim_eog_.push_back(id);
        }
        read_bool(find, "add_bos_token", t.add_bos_);
        read_bool(find, "add_eos_token", t.add_eos_);
        if (!gpt2) read_bool(find, "add_space_prefix", t.add_space_prefix_);
        if (t.kind_ == TokenizerKind::Gemma4) t.add_bos_ = true;  // llama.cpp forces BOS for gemma4
        if (const gguf::Value* ct = find("tokenizer.chat_template")) t.chat_template_ = ct->get_string();
    } catch (const gguf::Error& e) {
        throw Error(std::string("tokenizer: ") + e.what());
    }
    t.build();
    return t;
}

void Tokenizer::build() {
    const auto n = static_cast<int32_t>(tokens_.size());
    auto set_control = [&](int32_t id) { types_[static_cast<size_t>(id)] = TokenType::Control; };

    // gpt-oss (Harmony): these markers are always matched and always rendered.
    for (std::string_view s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
        if (auto id = find_token(s)) types_[static_cast<size_t>(*id)] = TokenType::UserDefined;

    // EOT by text when not given; EOG set (docs/formats.md §4.11). Deliberate difference from llama.cpp: only tokens
    // that are not NORMAL are recognized by their text. llama.cpp also takes NORMAL ones and forces them to
    // CONTROL, which turns Qwen's ordinary BPE token "</s>" (128247, the HTML strike-through end tag) into an
    // invisible end-of-generation token.
    auto special_by_text = [&](std::string_view s) -> std::optional<int32_t> {
        const auto id = find_token(s);
        if (!id || types_[static_cast<size_t>(*id)] == TokenType::Normal) return std::nullopt;
        return id;
    };
    if (eot_ < 0) {
        for (std::string_view s : kEotTexts)
            if (auto id = special_by_text(s)) {
                eot_ = *id;
                break;
            }
    }
    std::vector<int32_t> eog;
    auto add_eog = [&](int32_t id) {
        if (id >= 0 && id < n && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
    };
    for (std::string_view s : kEotTexts)
        if (auto id = special_by_text(s)) {
            set_control(*id);
            add_eog(*id);
        }
    for (std::string_view s : kEogExtraTexts)
        if (auto id = special_by_text(s)) {
            set_control(*id);
            add_eog(*id);
        }
    add_eog(eos_);
    add_eog(eot_);
    add_eog(eom_);
    for (int32_t id : fim_eog_) add_eog(id);
    auto text_id = [&](std::string_view s) { return special_by_text(s).value_or(-1); };
    auto erase_eog = [&](int32_t id) {
        if (id >= 0) eog.erase(std::remove(eog.begin(), eog.end(), id), eog.end());
    };
    const int32_t ret = text_id("<|return|>"), call = text_id("<|call|>"), end = text_id("<|end|>");
    auto in_eog = [&](int32_t id) { return id >= 0 && std::find(eog.begin(), eog.end(), id) != eog.end(); };
    if (in_eog(ret) && in_eog(call) && in_eog(end)) {  // Harmony: <|end|> separates messages
        erase_eog(end);
        types_[static_cast<size_t>(end)] = TokenType::UserDefined;
    }
    if (in_eog(text_id("<|tool_response>"))) erase_eog(text_id("</s>"));
    std::sort(eog.begin(), eog.end());
    eog_ = std::move(eog);
    is_eog_.assign(tokens_.size(), false);
    for (int32_t id : eog_) is_eog_[static_cast<size_t>(id)] = true;

    // Decoded pieces of NORMAL tokens.
    pieces_.assign(tokens_.size(), std::string());
    if (kind_ == TokenizerKind::Gpt2) {
        for (size_t i = 0; i < tokens_.size(); ++i)
            if (types_[i] == TokenType::Normal) pieces_[i] = mapped_to_bytes(tokens_[i]);
        // Single-byte tokens.
        for (int b = 0; b < 256; ++b) {
            const auto it = token_ids_.find(unicode::to_utf8(byte_to_codepoint(static_cast<uint8_t>(b))));
            byte_token_[b] = it == token_ids_.end() ? -1 : it->second;
        }
    } else {
        build_spm();  // spm_bpe.cpp
    }

    // Special-token cache: CONTROL, USER_DEFINED, UNKNOWN; longest text first (ties: lower id first).
    special_cache_.clear();
    for (int32_t i = 0; i < n; ++i) {
        const TokenType ty = types_[static_cast<size_t>(i)];
        if ((ty == TokenType::Control || ty == TokenType::UserDefined || ty == TokenType::Unknown) &&
            !tokens_[static_cast<size_t>(i)].empty())
            special_cache_.push_back(i);
    }
    std::stable_sort(special_cache_.begin(), special_cache_.end(), [&](int32_t a, int32_t b) {
        return tokens_[static_cast<size_t>(a)].size() > tokens_[static_cast<size_t>(b)].size();
    });
}

std::optional<int32_t> Tokenizer::find_token(std::string_view stored_text) const {
    const auto it = token_ids_.find(stored_text);
    if (it == token_ids_.end()) return std::nullopt;
    return it->second;
}

bool Tokenizer::is_eog(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < is_eog_.size() && is_eog_[static_cast<size_t>(id)];
}

bool Tokenizer::is_control(int32_t id) const {
    return id >= 0 && id < n_vocab() && types_[static_cast<size_t>(id)] == TokenType::Control;
}

// ---------------------------------------------------------------------------------------------------------------
// Encoding

void Tokenizer::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (pre_.ignore_merges) {
        if (auto id = find_token(bytes_to_mapped(word))) {
            out.push_back(*id);
            return;
        }
    }
    struct Sym {
        int32_t id;
        int32_t prev, next;
    };
    const auto n = static_cast<int32_t>(word.size());
    std::vector<Sym> sym(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i)
        sym[static_cast<size_t>(i)] = {byte_token_[static_cast<unsigned char>(word[static_cast<size_t>(i)])], i - 1,
                                       i + 1 < n ? i + 1 : -1};
    if (n == 1) {
        if (sym[0].id >= 0) out.push_back(sym[0].id);
        return;
    }

    struct Cand {
        int32_t rank, left, left_id, right_id, result;
        bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> q;
    auto try_push = [&](int32_t l) {
        if (l < 0) return;
        const int32_t r = sym[static_cast<size_t>(l)].next;
        if (r < 0) return;
        const int32_t a = sym[static_cast<size_t>(l)].id, b = sym[static_cast<size_t>(r)].id;
        if (a < 0 || b < 0) return;
        const auto it = merges_.find(pair_key(a, b));
        if (it != merges_.end()) q.push({it->second.rank, l, a, b, it->second.result});
    };
    for (int32_t i = 0; i + 1 < n; ++i) try_push(i);
    while (!q.empty()) {
        const Cand c = q.top();
        q.pop();
        Sym& l = sym[static_cast<size_t>(c.left)];
        if (l.id != c.left_id || l.next < 0) continue;  // left symbol changed (or was merged away: id -1)
        Sym& r = sym[static_cast<size_t>(l.next)];
        if (r.id != c.right_id) continue;
        l.id = c.result;
        const int32_t rn = r.next;
        r.id = -2;  // dead
        l.next = rn;
        if (rn >= 0) sym[static_cast<size_t>(rn)].prev = c.left;
        try_push(l.prev);
        try_push(c.left);
    }
    for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next)
        if (sym[static_cast<size_t>(i)].id >= 0) out.push_back(sym[static_cast<size_t>(i)].id);
}

void Tokenizer::encode_fragment(std::string_view raw, std::vector<int32_t>& out) const {
    if (kind_ != TokenizerKind::Gpt2) {
        encode_spm_fragment(raw, out);
        return;
    }
    std::string normalized;
    if (nfc_) normalized = unicode::nfc_utf8(raw);
    const std::string_view text = nfc_ ? std::string_view(normalized) : raw;
    std::vector<size_t> offs;
    const std::vector<uint32_t> cps = unicode::decode_utf8_all(text, &offs);
    const std::vector<size_t> b = pretokenize(pre_.type, cps);
    for (size_t k = 0; k + 1 < b.size(); ++k)
        bpe_word(text.substr(offs[b[k]], offs[b[k + 1]] - offs[b[k]]), out);
}

namespace {

// Whether [begin, end) overlaps one of the sorted, disjoint spans.
bool overlaps(std::span<const Tokenizer::Span> spans, size_t begin, size_t end) {
    const auto it = std::upper_bound(spans.begin(), spans.end(), begin,
                                     [](size_t b, const Tokenizer::Span& s) { return b < s.end; });
    return it != spans.end() && it->begin < end;
}

bool control(TokenType ty) { return ty == TokenType::Control || ty == TokenType::Unknown; }

}  // namespace

// Longest token text first: USER_DEFINED tokens always, CONTROL and UNKNOWN ones when parse_special and not
// overlapping `plain`.
std::vector<Tokenizer::Piece> Tokenizer::split_special(std::string_view text, bool parse_special,
                                                       std::span<const Span> plain) const {
    std::vector<Piece> pieces{{-1, {0, text.size()}}};
    if (text.empty()) return pieces;
    std::vector<Piece> next;
    for (int32_t id : special_cache_) {
        const bool is_control = control(types_[static_cast<size_t>(id)]);
        if (!parse_special && is_control) continue;
        const std::string& s = tokens_[static_cast<size_t>(id)];
        if (text.find(s) == std::string_view::npos) continue;
        next.clear();
        for (const Piece& p : pieces) {
            if (p.id >= 0) {
                next.push_back(p);
                continue;
            }
            size_t pos = p.at.begin, from = p.at.begin;
            while (from < p.at.end) {
                const size_t hit = text.substr(0, p.at.end).find(s, from);
                if (hit == std::string_view::npos) break;
                if (is_control && overlaps(plain, hit, hit + s.size())) {
                    from = hit + 1;  // a message's text: not this token
                    continue;
                }
                if (hit > pos) next.push_back({-1, {pos, hit}});
                next.push_back({id, {hit, hit + s.size()}});
                pos = from = hit + s.size();
            }
            if (pos < p.at.end) next.push_back({-1, {pos, p.at.end}});
        }
        pieces.swap(next);
    }
    return pieces;
}

std::vector<int32_t> Tokenizer::encode_pieces(std::string_view text, bool add_special,
                                              const std::vector<Piece>& pieces) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
    for (const Piece& p : pieces) {
        if (p.id >= 0)
            out.push_back(p.id);
        else if (p.at.end > p.at.begin)
            encode_fragment(text.substr(p.at.begin, p.at.end - p.at.begin), out);
    }
    if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
    return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    return encode_pieces(text, add_special, split_special(text, parse_special, {}));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, std::span<const Span> plain) const {
    return encode_pieces(text, add_special, split_special(text, true, plain));
}

std::vector<Tokenizer::Span> Tokenizer::control_spans(std::string_view text) const {
    std::vector<Span> spans;
    for (const Piece& p : split_special(text, true, {}))
        if (p.id >= 0 && control(types_[static_cast<size_t>(p.id)])) spans.push_back(p.at);
    return spans;
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding

std::string Tokenizer::token_text(int32_t id, bool render_special) const {
    if (id < 0 || id >= n_vocab()) return {};
    const auto i = static_cast<size_t>(id);
    switch (types_[i]) {
    case TokenType::Normal:
    case TokenType::Byte: return pieces_[i];  // (empty for gpt2 vocabularies: byte tokens are SPM-only)
    case TokenType::UserDefined: return tokens_[i];
    case TokenType::Control:
    case TokenType::Unknown: return render_special ? tokens_[i] : std::string();
    default: return {};
    }
}

namespace {

// HF clean_up_tokenization_spaces as llama.cpp applies it (three passes).
void apply_clean_spaces(std::string& t) {
    if (t.size() < 2) return;
    std::string o;
    o.reserve(t.size());
    // 1: " ?", " !", " .", " ," -> drop the space
    for (size_t i = 0; i < t.size(); ++i) {
        const char x = t[i];
        if (i > 0 && t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') && !o.empty()) o.pop_back();
        o.push_back(x);
    }
    t.swap(o);
    o.clear();
    // 2: " ' " -> "'"
    for (size_t i = 0; i < t.size(); ++i) {
        const char x = t[i];
        if (i > 0 && x == '\'' && i + 1 < t.size() && t[i - 1] == ' ' && t[i + 1] == ' ') {
            if (!o.empty()) o.pop_back();
            o.push_back(x);
            ++i;
            continue;
        }
        o.push_back(x);
    }
    t.swap(o);
    o.clear();
    // 3: " 's", " 'm", " 're", " 've" -> drop the space (not " 't", " 'd", " 'll")
    for (size_t i = 0; i < t.size(); ++i) {
        const char x = t[i];
        if (i > 0 && t[i - 1] == ' ' && x == '\'' && i + 1 < t.size()) {
            const char x1 = t[i + 1];
            const char x2 = i + 2 < t.size() ? t[i + 2] : '\0';
            if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e'))
                if (!o.empty()) o.pop_back();
        }
        o.push_back(x);
    }
    t.swap(o);
}

}  // namespace

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
    std::string out;
    for (int32_t id : ids) out += token_text(id, render_special);
    // SentencePiece dummy prefix: one leading space of the first piece is not part of the text (docs/formats.md §4.12).
    if (add_space_prefix_ && !ids.empty() && !out.empty() && out[0] == ' ' && !token_text(ids[0], render_special).empty())
        out.erase(0, 1);
    if (clean_spaces_) apply_clean_spaces(out);
    return out;
}

std::string StreamDecoder::push(int32_t id) { return push_bytes(tok_->token_text(id, render_special_)); }

std::string StreamDecoder::push_bytes(std::string_view bytes) {
    pending_.append(bytes);
    const size_t n = unicode::complete_prefix_length(pending_);
    std::string out = unicode::sanitize_utf8(std::string_view(pending_).substr(0, n));
    pending_.erase(0, n);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out = unicode::sanitize_utf8(pending_);
    pending_.clear();
    return out;
}

}  // namespace zinc::tokenizer
