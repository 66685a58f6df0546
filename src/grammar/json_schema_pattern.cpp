// A schema's `pattern` as a grammar (json_schema_parts.h): a recursive-descent reader of the regular-expression
// subset that writes GBNF as it goes. The pattern is matched against the string's characters, so every character the
// expression allows is written in the JSON form it takes inside the quotes (json_char_gbnf).
// GCC 12 warns of overlapping copies in std::string concatenation where there are none (its bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <algorithm>
#include <stdexcept>

#include "grammar/json_schema_parts.h"

namespace zinc::grammar::schema {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

CharSet normalize(CharSet s) {
    std::sort(s.begin(), s.end());
    CharSet out;
    for (const auto& r : s) {
        if (!out.empty() && r.first <= out.back().second + 1)
            out.back().second = std::max(out.back().second, r.second);
        else
            out.push_back(r);
    }
    return out;
}

}  // namespace

CharSet complement(const CharSet& s) {
    CharSet out;
    uint32_t next = 0;
    for (const auto& [lo, hi] : normalize(s)) {
        if (lo > next) out.push_back({next, lo - 1});
        next = hi + 1;
    }
    if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
    return out;
}

std::vector<uint32_t> utf8_code_points(std::string_view text) {
    std::vector<uint32_t> cps;
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = text[i];
        const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > text.size()) throw std::invalid_argument("text that is not UTF-8");
        uint32_t cp = n == 1 ? c : c & (0x7F >> n);
        for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(text[i + k]) & 0x3F);
        cps.push_back(cp);
        i += n;
    }
    return cps;
}

namespace {

const CharSet kDigit = {{'0', '9'}};
const CharSet kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CharSet kSpace = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0xFEFF, 0xFEFF}};

class PatternReader {
public:
    // Code points, so that a class or a repetition takes a whole character.
    PatternReader(std::string_view pattern, uint32_t max_count)
        : cps_(utf8_code_points(pattern)), max_count_(max_count) {}

    std::string read(const std::string& any_char) {
        const bool start = !cps_.empty() && cps_[0] == '^';
        if (start) ++p_;
        size_t end = cps_.size();
        const bool finish = end > p_ && cps_[end - 1] == '$' && !(end >= 2 && cps_[end - 2] == '\\');
        if (finish) --end;
        end_ = end;
        const size_t alts_before = top_alternatives_;
        std::string body = alternatives(0);
        if (p_ != end_) fail("unbalanced ')'");
        if ((start || finish) && top_alternatives_ > alts_before + 1)
            fail("'|' at the top level of an anchored pattern (group it: ^(a|b)$)");
        std::vector<std::string> parts;
        if (!start) parts.push_back("(" + any_char + ")*");
        if (!body.empty()) parts.push_back("(" + body + ")");
        if (!finish) parts.push_back("(" + any_char + ")*");
        if (parts.empty()) return "\"\"";  // "^$": the empty string only
        std::string out;
        for (size_t i = 0; i < parts.size(); ++i) out += (i ? " " : "") + parts[i];
        return out;
    }

private:
    std::vector<uint32_t> cps_;
    size_t p_ = 0, end_ = 0;
    size_t top_alternatives_ = 0;
    uint32_t max_count_;

    [[noreturn]] void fail(const std::string& what) const {
        throw std::invalid_argument("pattern, at character " + std::to_string(p_ + 1) + ": " + what);
    }
    bool more() const { return p_ < end_; }
    uint32_t peek() const { return cps_[p_]; }

    std::string alternatives(int depth) {
        if (depth > 32) fail("groups nested more than 32 deep");
        std::vector<std::string> alts{sequence(depth)};
        while (more() && peek() == '|') {
            ++p_;
            alts.push_back(sequence(depth));
        }
        if (depth == 0) top_alternatives_ = alts.size();
        std::string out;
        for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        return out;
    }

    std::string sequence(int depth) {
        std::string out;
        while (more() && peek() != '|' && peek() != ')') {
            std::string atom_text = atom(depth);
            atom_text = quantified("(" + atom_text + ")");
            out += (out.empty() ? "" : " ") + atom_text;
        }
        return out;
    }

    uint32_t number() {
        if (!more() || peek() < '0' || peek() > '9') fail("expected a number in {m,n}");
        uint64_t v = 0;
        while (more() && peek() >= '0' && peek() <= '9') {
            v = v * 10 + (peek() - '0');
            if (v > max_count_) fail("a repetition count above " + std::to_string(max_count_));
            ++p_;
        }
        return uint32_t(v);
    }

    std::string quantified(const std::string& atom_text) {
        if (!more()) return atom_text;
        const uint32_t c = peek();
        std::string q;
        if (c == '*' || c == '+' || c == '?') {
            ++p_;
            q = std::string(1, char(c));
        } else if (c == '{') {
            ++p_;
            const uint32_t m = number();
            q = std::string("{").append(std::to_string(m));
            if (more() && peek() == ',') {
                ++p_;
                q += ",";
                if (more() && peek() != '}') {
                    const uint32_t n = number();
                    if (n < m) fail("{m,n} with n below m");
                    q += std::to_string(n);
                }
            }
            if (!more() || peek() != '}') fail("'{' that is not a repetition {m}, {m,} or {m,n}");
            ++p_;
            q += "}";
        } else {
            return atom_text;
        }
        if (more() && (peek() == '?' || peek() == '+')) fail("lazy and possessive quantifiers (*? +? ?? {}?, *+)");
        if (more() && (peek() == '*' || peek() == '{')) fail("a quantifier after a quantifier");
        return atom_text + q;
    }

    std::string atom(int depth) {
        const uint32_t c = peek();
        if (c == '(') {
            ++p_;
            if (more() && peek() == '?') {
                if (p_ + 1 < end_ && cps_[p_ + 1] == ':') {
                    p_ += 2;
                } else {
                    const uint32_t k = p_ + 1 < end_ ? cps_[p_ + 1] : 0;
                    fail(k == '=' || k == '!' ? "lookahead (?= and (?!"
                         : k == '<'           ? "lookbehind and named groups (?<"
                                              : "group flags (?...)");
                }
            }
            std::string inner = alternatives(depth + 1);
            if (!more() || peek() != ')') fail("a group '(' not closed");
            ++p_;
            if (inner.empty()) fail("an empty group ()");
            return inner;
        }
        if (c == '[') return json_char_gbnf(char_class());
        if (c == '.') {
            ++p_;
            return json_char_gbnf(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
        }
        if (c == '^' || c == '$') fail(std::string("the anchor '") + char(c) + "' other than first (^) or last ($)");
        if (c == '*' || c == '+' || c == '?' || c == '{') fail(std::string("'") + char(c) + "' repeats nothing");
        if (c == ')') fail("unbalanced ')'");
        if (c == '\\') return json_char_gbnf(escape(false));
        ++p_;
        return json_char_gbnf({{c, c}});
    }

    // An escape after '\' (p_ at the backslash): the characters it stands for.
    CharSet escape(bool in_class) {
        ++p_;
        if (!more()) fail("a '\\' at the end");
        const uint32_t c = peek();
        ++p_;
        switch (c) {
            case 'd': return kDigit;
            case 'D': return complement(kDigit);
            case 'w': return kWord;
            case 'W': return complement(kWord);
            case 's': return kSpace;
            case 'S': return complement(kSpace);
            case 'n': return {{'\n', '\n'}};
            case 't': return {{'\t', '\t'}};
            case 'r': return {{'\r', '\r'}};
            case 'f': return {{'\f', '\f'}};
            case 'v': return {{'\v', '\v'}};
            case 'x': {
                const uint32_t v = hex(2);
                return {{v, v}};
            }
            case 'u': {
                const uint32_t v = hex(4);
                return {{v, v}};
            }
            case 'b': fail(in_class ? "\\b (backspace) in a class" : "\\b (a word boundary)");
            case 'B': fail("\\B (not a word boundary)");
            case 'p':
            case 'P': fail("\\p and \\P (Unicode properties)");
            case 'k': fail("\\k (a named backreference)");
            case 'c': fail("\\c (a control letter)");
            case '0': fail("\\0 (the null character)");
            default: break;
        }
        if (c >= '1' && c <= '9') fail("backreferences (\\1 to \\9)");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail(std::string("the escape \\") + char(c));
        return {{c, c}};
    }

    uint32_t hex(int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            if (!more()) fail("a \\x or \\u escape cut short");
            const uint32_t d = peek();
            const int x = d >= '0' && d <= '9' ? int(d - '0') : d >= 'a' && d <= 'f' ? int(d - 'a' + 10)
                          : d >= 'A' && d <= 'F' ? int(d - 'A' + 10) : -1;
            if (x < 0) fail("a \\x or \\u escape with a character that is not hexadecimal");
            v = v * 16 + uint32_t(x);
            ++p_;
        }
        return v;
    }

    // One member of a class: a character or an escape (escapes like \d stand for several).
    CharSet class_member() {
        if (peek() == '\\') return escape(true);
        const uint32_t c = peek();
        ++p_;
        return {{c, c}};
    }

    CharSet char_class() {
        ++p_;  // '['
        bool negated = false;
        if (more() && peek() == '^') {
            negated = true;
            ++p_;
        }
        if (more() && peek() == ']') fail("an empty class []");
        CharSet set;
        while (more() && peek() != ']') {
            if (peek() == '[' && p_ + 1 < end_ && cps_[p_ + 1] == ':') fail("POSIX classes [:name:]");
            CharSet first = class_member();
            if (more() && peek() == '-' && p_ + 1 < end_ && cps_[p_ + 1] != ']') {
                ++p_;
                CharSet last = class_member();
                if (first.size() != 1 || last.size() != 1 || first[0].first != first[0].second ||
                    last[0].first != last[0].second)
                    fail("a range whose end is a class escape (\\d, \\w, \\s)");
                if (last[0].first < first[0].first) fail("a range out of order");
                set.push_back({first[0].first, last[0].first});
            } else {
                set.insert(set.end(), first.begin(), first.end());
            }
        }
        if (!more()) fail("a class '[' not closed");
        ++p_;
        set = normalize(set);
        return negated ? complement(set) : set;
    }
};

}  // namespace

std::string pattern_gbnf(std::string_view pattern, const std::string& any_char, uint32_t max_count) {
    return PatternReader(pattern, max_count).read(any_char);
}

}  // namespace zinc::grammar::schema
