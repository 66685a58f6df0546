// Each scanner reproduces, at every position, "try the alternatives in order, first match wins" with the
// greedy-with-backtracking semantics of the regex engines HF tokenizers uses. The code comments quote the
// alternative each block implements.
#include "tokenizer/pretokenizer.h"

#include <array>

#include "tokenizer/unicode.h"

namespace zinc::tokenizer {

namespace {

namespace u = unicode;

struct PreEntry {
    std::string_view pre;
    PreTokenizerInfo info;
};

// ignore_merges / add_bos / clean_spaces as llama.cpp's vocabulary loader sets them for each pre-type.
constexpr std::array kPreEntries = {
    PreEntry{"qwen2", {PreType::Qwen2, "qwen2", false, false, false, true}},
    PreEntry{"deepseek-r1-qwen", {PreType::Qwen2, "qwen2", false, false, false}},
    PreEntry{"megrez", {PreType::Qwen2, "qwen2", false, false, true}},
    PreEntry{"kormo", {PreType::Qwen2, "qwen2", false, false, false}},
    PreEntry{"f2llmv2", {PreType::Qwen2, "qwen2", false, false, false}},
    PreEntry{"qwen35", {PreType::Qwen35, "qwen35", false, false, false, true}},
    PreEntry{"llama-bpe", {PreType::Llama3, "llama3", true, true, true}},
    PreEntry{"llama3", {PreType::Llama3, "llama3", true, true, true}},
    PreEntry{"llama-v3", {PreType::Llama3, "llama3", true, true, true}},
    PreEntry{"falcon3", {PreType::Llama3, "llama3", true, true, true}},
    PreEntry{"falcon-h1", {PreType::Llama3, "llama3", true, true, true}},
    PreEntry{"pixtral", {PreType::Llama3, "llama3", true, true, true}},
    PreEntry{"midm-2.0", {PreType::Llama3, "llama3", true, true, true}},
    PreEntry{"lfm2", {PreType::Llama3, "llama3", true, true, true}},
    PreEntry{"jina-v5-nano", {PreType::Llama3, "llama3", true, true, true}},
    PreEntry{"smaug-bpe", {PreType::Llama3, "smaug", false, false, true}},
    PreEntry{"dbrx", {PreType::Llama3, "dbrx", false, false, true}},
    PreEntry{"gpt-2", {PreType::Gpt2, "gpt2", false, false, true}},
    PreEntry{"gpt-4o", {PreType::Gpt4o, "gpt-4o", false, false, false}},
    PreEntry{"llama4", {PreType::Gpt4o, "gpt-4o", false, false, false}},
    PreEntry{"kanana2", {PreType::Gpt4o, "gpt-4o", false, false, false}},
    PreEntry{"talkie", {PreType::Gpt4o, "gpt-4o", false, false, false}},
    PreEntry{"tekken", {PreType::Tekken, "tekken", true, true, false}},
};

class Scanner {
public:
    explicit Scanner(std::span<const uint32_t> cps) : c_(cps), n_(cps.size()) {
        f_.resize(n_);
        for (size_t i = 0; i < n_; ++i) f_[i] = u::flags(cps[i]);
    }

    size_t size() const { return n_; }
    uint32_t cp(size_t i) const { return i < n_ ? c_[i] : 0; }
    uint16_t fl(size_t i) const { return i < n_ ? f_[i] : 0; }
    bool letter(size_t i) const { return fl(i) & u::kLetter; }
    bool number(size_t i) const { return fl(i) & u::kNumber; }
    bool mark(size_t i) const { return fl(i) & u::kMark; }
    bool ws(size_t i) const { return fl(i) & u::kWhitespace; }
    bool crlf(size_t i) const { return i < n_ && (c_[i] == '\r' || c_[i] == '\n'); }

    // (?i:'s|'t|'re|'ve|'m|'ll|'d) (case-insensitive when ci) at i: match length or 0.
    size_t contraction(size_t i, bool ci) const {
        if (cp(i) != '\'' || i + 1 >= n_) return 0;
        auto lo = [&](size_t k) { return ci ? u::ascii_lower(cp(k)) : cp(k); };
        const uint32_t a = lo(i + 1);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if (i + 2 < n_) {
            const uint32_t b = lo(i + 2);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
        }
        return 0;
    }

    // End of the maximal whitespace run starting at i.
    size_t ws_end(size_t i) const {
        while (i < n_ && ws(i)) ++i;
        return i;
    }

    // The three whitespace alternatives shared by all patterns, at i where ws(i):
    //   \s*[\r\n]+  (only when with_newline_rule) | \s+(?!\S) | \s+
    size_t whitespace(size_t i, bool with_newline_rule) const {
        const size_t j = ws_end(i);
        if (with_newline_rule) {
            // \s* backtracks from the end of the run to the last CR/LF; [\r\n]+ then takes it (nothing after it
            // within the run is CR/LF).
            for (size_t k = j; k > i; --k)
                if (crlf(k - 1)) return k - i;
        }
        if (j == n_) return j - i;          // \s+(?!\S) at the end of the text
        if (j - i >= 2) return j - 1 - i;   // \s+(?!\S): give back the last space to the next word
        return j - i;                       // \s+
    }

private:
    std::span<const uint32_t> c_;
    size_t n_;
    std::vector<uint16_t> f_;
};

// cl100k family (llama3, qwen2, qwen35):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,max_digits} | ?[^\s\p{L}\p{N}]+[\r\n]*
//   | \s*[\r\n]+ | \s+(?!\S) | \s+
// With marks_are_letters (qwen35): \p{L} in the word rule becomes [\p{L}\p{M}], and punctuation excludes \p{M}.
size_t match_cl100k(const Scanner& s, size_t i, size_t max_digits, bool marks_are_letters) {
    const size_t n = s.size();
    auto wordch = [&](size_t k) { return s.letter(k) || (marks_are_letters && s.mark(k)); };
    auto punct = [&](size_t k) {
        return k < n && !s.ws(k) && !s.letter(k) && !s.number(k) && !(marks_are_letters && s.mark(k));
    };
    if (size_t m = s.contraction(i, true)) return m;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    {
        size_t k = i;
        if (!s.crlf(i) && !s.letter(i) && !s.number(i) && wordch(i + 1)) k = i + 1;  // take the optional prefix
        if (wordch(k)) {
            while (k < n && wordch(k)) ++k;
            return k - i;
        }
    }
    // \p{N}{1,max}
    if (s.number(i)) {
        size_t k = i;
        while (k < n && k - i < max_digits && s.number(k)) ++k;
        return k - i;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    {
        size_t k = i;
        if (s.cp(i) == ' ' && punct(i + 1)) k = i + 1;
        if (punct(k)) {
            while (punct(k)) ++k;
            while (s.crlf(k)) ++k;
            return k - i;
        }
    }
    if (s.ws(i)) return s.whitespace(i, true);
    return 0;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
size_t match_gpt2(const Scanner& s, size_t i) {
    const size_t n = s.size();
    if (size_t m = s.contraction(i, false)) return m;
    const size_t k0 = s.cp(i) == ' ' ? i + 1 : i;
    auto run = [&](auto pred) -> size_t {
        size_t k = k0;
        if (!pred(k)) return 0;
        while (k < n && pred(k)) ++k;
        return k - i;
    };
    if (size_t m = run([&](size_t k) { return s.letter(k); })) return m;
    if (size_t m = run([&](size_t k) { return s.number(k); })) return m;
    if (size_t m = run([&](size_t k) { return k < n && !s.ws(k) && !s.letter(k) && !s.number(k); })) return m;
    if (s.ws(i)) return s.whitespace(i, false);
    return 0;
}

// o200k (gpt-4o):
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// Tekken (Mistral) is the same without the contraction suffixes and with \p{N} for \p{N}{1,3}.
size_t match_o200k(const Scanner& s, size_t i, bool contractions, size_t max_digits) {
    const size_t n = s.size();
    constexpr uint16_t kUp = u::kUpper | u::kTitle | u::kModifier | u::kOtherLetter | u::kMark;
    constexpr uint16_t kLo = u::kLower | u::kModifier | u::kOtherLetter | u::kMark;
    auto up = [&](size_t k) { return (s.fl(k) & kUp) != 0; };
    auto lo = [&](size_t k) { return (s.fl(k) & kLo) != 0; };
    const bool can_prefix = i < n && !s.crlf(i) && !s.letter(i) && !s.number(i);
    // Rule 1 from start b: U* (greedy, backtracking) then L+ ; returns end or 0.
    auto rule1 = [&](size_t b) -> size_t {
        size_t u_end = b;
        while (u_end < n && up(u_end)) ++u_end;
        for (size_t k = u_end + 1; k > b; --k) {  // L+ starts at k-1, from u_end down to b
            const size_t st = k - 1;
            if (lo(st)) {
                size_t e = st;
                while (e < n && lo(e)) ++e;
                return e;
            }
        }
        return 0;
    };
    // Rule 2 from start b: U+ then L*.
    auto rule2 = [&](size_t b) -> size_t {
        if (!up(b)) return 0;
        size_t e = b;
        while (e < n && up(e)) ++e;
        while (e < n && lo(e)) ++e;
        return e;
    };
    for (auto rule : {0, 1}) {
        size_t e = 0;
        if (can_prefix) e = rule == 0 ? rule1(i + 1) : rule2(i + 1);
        if (!e) e = rule == 0 ? rule1(i) : rule2(i);
        if (e) return e + (contractions ? s.contraction(e, true) : 0) - i;
    }
    if (s.number(i)) {
        size_t k = i;
        while (k < n && k - i < max_digits && s.number(k)) ++k;
        return k - i;
    }
    auto punct = [&](size_t k) { return k < n && !s.ws(k) && !s.letter(k) && !s.number(k); };
    {
        size_t k = i;
        if (s.cp(i) == ' ' && punct(i + 1)) k = i + 1;
        if (punct(k)) {
            while (punct(k)) ++k;
            while (s.crlf(k) || s.cp(k) == '/') ++k;
            return k - i;
        }
    }
    if (s.ws(i)) return s.whitespace(i, true);
    return 0;
}

}  // namespace

std::optional<PreTokenizerInfo> find_pre_tokenizer(std::string_view pre) {
    for (const auto& e : kPreEntries)
        if (e.pre == pre) return e.info;
    return std::nullopt;
}

std::string supported_pre_tokenizers() {
    std::string s;
    for (const auto& e : kPreEntries) {
        if (!s.empty()) s += ", ";
        s += e.pre;
    }
    return s;
}

std::vector<size_t> pretokenize(PreType type, std::span<const uint32_t> cps) {
    const Scanner s(cps);
    std::vector<size_t> bounds{0};
    const size_t n = cps.size();
    for (size_t i = 0; i < n;) {
        size_t m = 0;
        switch (type) {
        case PreType::Qwen2: m = match_cl100k(s, i, 1, false); break;
        case PreType::Qwen35: m = match_cl100k(s, i, 1, true); break;
        case PreType::Llama3: m = match_cl100k(s, i, 3, false); break;
        case PreType::Gpt2: m = match_gpt2(s, i); break;
        case PreType::Gpt4o: m = match_o200k(s, i, true, 3); break;
        case PreType::Tekken: m = match_o200k(s, i, false, 1); break;
        }
        if (m == 0) m = 1;  // unmatched text is its own piece ("Isolated"); cannot happen with these patterns
        i += m;
        bounds.push_back(i);
    }
    return bounds;
}

std::vector<std::string_view> pretokenize_utf8(PreType type, std::string_view text) {
    std::vector<size_t> offs;
    const std::vector<uint32_t> cps = unicode::decode_utf8_all(text, &offs);
    const std::vector<size_t> b = pretokenize(type, cps);
    std::vector<std::string_view> out;
    out.reserve(b.size() - 1);
    for (size_t k = 0; k + 1 < b.size(); ++k) out.push_back(text.substr(offs[b[k]], offs[b[k + 1]] - offs[b[k]]));
    return out;
}

}  // namespace zinc::tokenizer
