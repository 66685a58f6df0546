// SentencePiece-style BPE vocabularies (docs/formats.md §4.8, §4.9): text with spaces escaped as U+2581 ("▁"), split
// into UTF-8 characters, merged either by token score ("llama", SentencePiece BPE: Gemma 2/3, Llama 2, Mistral)
// or by merge rank ("gemma4"), with <0xXX> byte-fallback tokens for characters the vocabulary lacks.
#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace zinc::tokenizer {
namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581

uint64_t rank_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size() + s.size() / 2);
    for (size_t p = 0;;) {
        const size_t q = s.find(from, p);
        if (q == std::string_view::npos) {
            out.append(s.substr(p));
            return out;
        }
        out.append(s.substr(p, q - p)).append(to);
        p = q + from.size();
    }
}

// Length of the UTF-8 character at pos (1 for an invalid byte), never past the end.
size_t char_len(std::string_view s, size_t pos) { return unicode::decode_utf8(s, pos).len; }

}  // namespace

// Scores and the kind's defaults (docs/formats.md §4.3); the file's keys are read afterwards by from_metadata.
void Tokenizer::load_spm_bpe(const Lookup& find) {
    const auto n = static_cast<int32_t>(tokens_.size());
    if (const gguf::Value* sc = find("tokenizer.ggml.scores")) {
        scores_ = sc->get_f32_array();
        if (scores_.size() != tokens_.size())
            throw Error("tokenizer: tokenizer.ggml.scores has " + std::to_string(scores_.size()) + " entries for " +
                        std::to_string(tokens_.size()) + " tokens");
    } else if (kind_ == TokenizerKind::Spm) {
        throw Error("tokenizer: missing tokenizer.ggml.scores (required for llama / SentencePiece)");
    }
    clean_spaces_ = kind_ == TokenizerKind::Gemma4;  // llama.cpp: SPM false, gemma4 pre-type true
    nfc_ = false;
    add_eos_ = false;
    add_bos_ = true;
    if (kind_ == TokenizerKind::Spm) {
        add_space_prefix_ = true;
        if (1 < n) bos_ = 1;
        if (2 < n) eos_ = 2;
        if (0 < n) unk_ = 0;
    } else {
        add_space_prefix_ = false;
    }
}

void Tokenizer::build_spm() {
    for (size_t i = 0; i < tokens_.size(); ++i) {
        if (types_[i] == TokenType::Normal) {
            pieces_[i] = replace_all(tokens_[i], kSpace, " ");
        } else if (types_[i] == TokenType::Byte) {
            const std::string& t = tokens_[i];
            unsigned v = 0;
            if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::sscanf(t.c_str() + 3, "%2x", &v) == 1)
                pieces_[i] = std::string(1, static_cast<char>(v));
            else
                pieces_[i] = t;  // not of the <0xXX> form: its text
        }
    }
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        auto id = find_token(name);
        if (!id) id = find_token(std::string(1, static_cast<char>(b)));
        byte_token_[b] = id.value_or(-1);
    }
}

void Tokenizer::byte_fallback(std::string_view bytes, std::vector<int32_t>& out) const {
    for (unsigned char c : bytes) {
        const int32_t id = byte_token_[c];
        if (id >= 0) out.push_back(id);
        else if (unk_ >= 0 && (out.empty() || out.back() != unk_)) out.push_back(unk_);
    }
}

void Tokenizer::encode_spm_fragment(std::string_view raw, std::vector<int32_t>& out) const {
    std::string text;
    if (add_space_prefix_) text = " ";  // every raw fragment is the input's start or follows a special token
    text.append(raw);
    text = replace_all(text, " ", kSpace);
    if (kind_ == TokenizerKind::Spm) {
        spm_word(text, out);
        return;
    }
    // gemma4: maximal runs of '\n' and of other characters; a newline run that is a token is emitted whole.
    for (size_t p = 0; p < text.size();) {
        const bool nl = text[p] == '\n';
        size_t q = p;
        while (q < text.size() && (text[q] == '\n') == nl) ++q;
        const std::string_view run = std::string_view(text).substr(p, q - p);
        if (nl) {
            if (auto id = find_token(run)) {
                out.push_back(*id);
                p = q;
                continue;
            }
        }
        gemma4_word(run, out);
        p = q;
    }
}

// SentencePiece BPE: repeatedly merge the adjacent pair whose concatenation is the best-scoring vocabulary token
// (ties: leftmost). Only NORMAL tokens are merge results, as in SentencePiece (llama.cpp also accepts CONTROL and
// UNUSED ones, docs/formats.md §4.14 item 5).
void Tokenizer::spm_word(std::string_view text, std::vector<int32_t>& out) const {
    struct Sym {
        size_t off, len;
        int32_t prev, next;
    };
    std::vector<Sym> sym;
    for (size_t p = 0; p < text.size();) {
        const size_t l = char_len(text, p);
        const auto i = static_cast<int32_t>(sym.size());
        sym.push_back({p, l, i - 1, -1});
        if (i > 0) sym[static_cast<size_t>(i - 1)].next = i;
        p += l;
    }
    if (sym.empty()) return;
    struct Cand {
        float score;
        int32_t left;
        size_t len;
        bool operator<(const Cand& o) const {  // priority_queue top = highest score, then leftmost
            return score != o.score ? score < o.score : left > o.left;
        }
    };
    std::priority_queue<Cand> q;
    auto try_push = [&](int32_t l) {
        if (l < 0) return;
        const Sym& a = sym[static_cast<size_t>(l)];
        if (a.next < 0) return;
        const Sym& b = sym[static_cast<size_t>(a.next)];
        const auto id = find_token(text.substr(a.off, a.len + b.len));
        if (!id || types_[static_cast<size_t>(*id)] != TokenType::Normal) return;
        const float s = scores_.empty() ? 0.0f : scores_[static_cast<size_t>(*id)];
        q.push({s, l, a.len + b.len});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_push(i);
    while (!q.empty()) {
        const Cand c = q.top();
        q.pop();
        Sym& a = sym[static_cast<size_t>(c.left)];
        if (a.len == 0 || a.next < 0) continue;
        Sym& b = sym[static_cast<size_t>(a.next)];
        if (a.len + b.len != c.len) continue;  // outdated
        a.len += b.len;
        b.len = 0;
        a.next = b.next;
        if (a.next >= 0) sym[static_cast<size_t>(a.next)].prev = c.left;
        try_push(a.prev);
        try_push(c.left);
    }
    for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
        const Sym& s = sym[static_cast<size_t>(i)];
        const std::string_view piece = text.substr(s.off, s.len);
        if (auto id = find_token(piece)) out.push_back(*id);
        else byte_fallback(piece, out);
    }
}

// gemma4: BPE by merge rank over UTF-8 characters (no GPT-2 byte mapping); characters without a token fall back to
// <0xXX> tokens.
void Tokenizer::gemma4_word(std::string_view text, std::vector<int32_t>& out) const {
    struct Sym {
        int32_t id;
        size_t off, len;
        int32_t prev, next;
    };
    std::vector<Sym> sym;
    for (size_t p = 0; p < text.size();) {
        const size_t l = char_len(text, p);
        const auto i = static_cast<int32_t>(sym.size());
        sym.push_back({find_token(text.substr(p, l)).value_or(-1), p, l, i - 1, -1});
        if (i > 0) sym[static_cast<size_t>(i - 1)].next = i;
        p += l;
    }
    if (sym.empty()) return;
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
        const auto it = merges_.find(rank_key(a, b));
        if (it != merges_.end()) q.push({it->second.rank, l, a, b, it->second.result});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_push(i);
    while (!q.empty()) {
        const Cand c = q.top();
        q.pop();
        Sym& l = sym[static_cast<size_t>(c.left)];
        if (l.id != c.left_id || l.next < 0 || l.len == 0) continue;
        Sym& r = sym[static_cast<size_t>(l.next)];
        if (r.id != c.right_id) continue;
        l.id = c.result;
        l.len += r.len;
        r.len = 0;
        r.id = -2;
        l.next = r.next;
        if (l.next >= 0) sym[static_cast<size_t>(l.next)].prev = c.left;
        try_push(l.prev);
        try_push(c.left);
    }
    for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
        const Sym& s = sym[static_cast<size_t>(i)];
        if (s.id >= 0) out.push_back(s.id);
        else byte_fallback(text.substr(s.off, s.len), out);
    }
}

}  // namespace zinc::tokenizer
