// The GBNF parser: a recursive descent whose only recursion is into parentheses, bounded by kMaxNesting. Facts of
// the syntax follow llama.cpp's (docs/grammars.md): a rule ends at a newline unless inside parentheses or after `|`;
// rule names are letters, digits and '-'; a repetition applies to the symbol before it (a whole string literal, a
// class, a reference or a group).
#include <algorithm>
#include <map>

#include "grammar/grammar.h"

namespace zinc::grammar {

GrammarError::GrammarError(int l, int c, const std::string& what)
    : std::runtime_error("grammar: line " + std::to_string(l) + ", column " + std::to_string(c) + ": " + what),
      line(l), column(c) {}

bool Grammar::matches(const Element& e, uint32_t cp) const {
    bool in = false;
    for (uint32_t i = e.first; i < e.first + e.count && !in; ++i) in = ranges[i].lo <= cp && cp <= ranges[i].hi;
    return in != e.negated;
}

namespace {

bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

using Alternative = std::vector<Element>;

struct RuleDraft {
    std::string name;
    std::vector<Alternative> alts;
    bool defined = false;
    size_t pos = 0;  // where it is defined (generated rules: their group or repetition), else first referenced
};

class Parser {
public:
    explicit Parser(std::string_view text) : s_(text) {}

    Grammar parse() {
        if (s_.size() > kMaxGrammarBytes)
            throw GrammarError("grammar: " + std::to_string(s_.size()) + " bytes, more than the " +
                               std::to_string(kMaxGrammarBytes) + " allowed");
        skip_space(true);
        while (p_ < s_.size()) parse_rule();
        return finish();
    }

private:
    std::pair<int, int> line_column(size_t at) const {
        int line = 1, column = 1;
        for (size_t i = 0; i < at && i < s_.size(); ++i) {
            if (s_[i] == '\n') {
                ++line;
                column = 1;
            } else if ((static_cast<unsigned char>(s_[i]) & 0xC0) != 0x80) {
                ++column;
            }
        }
        return {line, column};
    }

    [[noreturn]] void fail(size_t at, const std::string& what) const {
        const auto [line, column] = line_column(at);
        throw GrammarError(line, column, what);
    }

    std::string where(size_t at) const {
        const auto [line, column] = line_column(at);
        return "line " + std::to_string(line) + ", column " + std::to_string(column);
    }

    char peek(size_t ahead = 0) const { return p_ + ahead < s_.size() ? s_[p_ + ahead] : '\0'; }
    bool at_end() const { return p_ >= s_.size(); }

    // Spaces, tabs and comments; newlines too where a rule may continue over them.
    void skip_space(bool newlines) {
        while (!at_end()) {
            const char c = peek();
            if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
                ++p_;
            } else if (c == '#') {
                while (!at_end() && peek() != '\n' && peek() != '\r') ++p_;
            } else {
                break;
            }
        }
    }

    std::string parse_name() {
        const size_t start = p_;
        while (!at_end() && is_word_char(peek())) ++p_;
        if (p_ == start) fail(p_, "expected a rule name");
        return std::string(s_.substr(start, p_ - start));
    }

    uint32_t rule_id(const std::string& name, size_t pos) {
        auto [it, fresh] = ids_.try_emplace(name, uint32_t(rules_.size()));
        if (fresh) rules_.push_back({name, {}, false, pos});
        return it->second;
    }

    uint32_t new_rule(uint32_t parent, size_t pos) {
        const std::string name = rules_[parent].name + "_" + std::to_string(++generated_);
        ids_.emplace(name, uint32_t(rules_.size()));
        rules_.push_back({name, {}, true, pos});
        return uint32_t(rules_.size() - 1);
    }

    void parse_rule() {
        const size_t start = p_;
        const std::string name = parse_name();
        skip_space(false);
        if (s_.substr(p_, 3) != "::=") fail(p_, "expected '::=' after the rule name '" + name + "'");
        p_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(name, start);
        if (rules_[id].defined) fail(start, "rule '" + name + "' is defined twice");
        rules_[id].defined = true;
        rules_[id].pos = start;
        rules_[id].alts = parse_alternatives(id, 0);
        if (!at_end()) {
            if (peek() == ')') fail(p_, "')' without a '(' before it");
            if (peek() != '\n' && peek() != '\r') fail(p_, std::string("unexpected '") + peek() + "'");
        }
        skip_space(true);
    }

    std::vector<Alternative> parse_alternatives(uint32_t rule, int depth) {
        std::vector<Alternative> alts;
        alts.push_back(parse_sequence(rule, depth));
        while (peek() == '|') {
            ++p_;
            skip_space(true);
            alts.push_back(parse_sequence(rule, depth));
        }
        return alts;
    }

    void count(size_t n) {
        total_ += n;
        if (total_ > kMaxElements)
            fail(p_, "the grammar expands to more than " + std::to_string(kMaxElements) + " elements");
    }

    Alternative parse_sequence(uint32_t rule, int depth) {
        const bool nested = depth > 0;
        Alternative seq;
        size_t last = seq.size();  // where the last symbol starts: what a repetition repeats
        for (;;) {
            const char c = peek();
            if (c == '"') {
                last = seq.size();
                parse_literal(seq);
            } else if (c == '[') {
                last = seq.size();
                parse_class(seq);
            } else if (c == '.') {
                last = seq.size();
                ++p_;
                count(1);
                seq.push_back({Element::Kind::chars, true, uint32_t(ranges_.size()), 0});
            } else if (is_word_char(c)) {
                last = seq.size();
                const size_t at = p_;
                const std::string name = parse_name();
                count(1);
                seq.push_back({Element::Kind::rule, false, rule_id(name, at), 0});
            } else if (c == '(') {
                const size_t open = p_;
                if (depth + 1 > kMaxNesting)
                    fail(open, "groups nested more than " + std::to_string(kMaxNesting) + " deep");
                ++p_;
                skip_space(true);
                const uint32_t sub = new_rule(rule, open);
                rules_[sub].alts = parse_alternatives(rule, depth + 1);
                if (peek() != ')') fail(p_, "expected ')' to close the group opened at " + where(open));
                ++p_;
                last = seq.size();
                count(1);
                seq.push_back({Element::Kind::rule, false, sub, 0});
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (last == seq.size()) fail(p_, std::string("'") + c + "' repeats nothing: no symbol before it");
                parse_repetition(rule, seq, last);
                last = seq.size();  // "a**" is refused: a repetition repeats a symbol, not another repetition
            } else if (c == '<' || (c == '!' && peek(1) == '<')) {
                fail(p_, "token references (<...>) are not supported");
            } else {
                break;
            }
            skip_space(nested);
        }
        count(1);
        seq.push_back({});
        return seq;
    }

    // One code point of the grammar's text (UTF-8), or of an escape.
    uint32_t parse_char(char closing) {
        const size_t at = p_;
        const auto c = static_cast<unsigned char>(peek());
        if (c == '\\') {
            if (p_ + 1 >= s_.size()) fail(at, closing == '"' ? "unterminated string" : "unterminated class");
            const char e = peek(1);
            p_ += 2;
            switch (e) {
                case 'n': return '\n';
                case 't': return '\t';
                case 'r': return '\r';
                case '\\': return '\\';
                case '"': return '"';
                case '[': return '[';
                case ']': return ']';
                case '-': return '-';
                case '^': return '^';
                case 'x': return parse_hex(at, 2);
                case 'u': return parse_hex(at, 4);
                case 'U': return parse_hex(at, 8);
                default:
                    fail(at, std::string("unknown escape '\\") + e + "'");
            }
        }
        if (c == '\n' || c == '\r') fail(at, closing == '"' ? "unterminated string: a newline inside it"
                                                            : "unterminated class: a newline inside it");
        int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0) fail(at, "invalid UTF-8");
        uint32_t cp = n == 0 ? c : c & (0x3F >> n);
        ++p_;
        for (; n > 0; --n, ++p_) {
            const auto b = static_cast<unsigned char>(peek());
            if (at_end() || (b & 0xC0) != 0x80) fail(at, "invalid UTF-8");
            cp = cp << 6 | (b & 0x3F);
        }
        if (cp > 0x10FFFF) fail(at, "invalid UTF-8");
        return cp;
    }

    uint32_t parse_hex(size_t at, int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i, ++p_) {
            const int h = hex_value(peek());
            if (at_end() || h < 0) fail(at, "expected " + std::to_string(digits) + " hexadecimal digits after '" +
                                                std::string(s_.substr(at, 2)) + "'");
            v = v << 4 | uint32_t(h);
        }
        if (v > 0x10FFFF) fail(at, "code point beyond U+10FFFF");
        return v;
    }

    void parse_literal(Alternative& seq) {
        const size_t open = p_++;
        for (;;) {
            if (at_end()) fail(open, "unterminated string");
            if (peek() == '"') break;
            const uint32_t cp = parse_char('"');
            seq.push_back({Element::Kind::chars, false, uint32_t(ranges_.size()), 1});
            ranges_.push_back({cp, cp});
            count(2);
        }
        ++p_;
    }

    void parse_class(Alternative& seq) {
        const size_t open = p_++;
        Element e{Element::Kind::chars, false, uint32_t(ranges_.size()), 0};
        if (peek() == '^') {
            e.negated = true;
            ++p_;
        }
        for (;;) {
            if (at_end()) fail(open, "unterminated class");
            if (peek() == ']') break;
            const size_t at = p_;
            const uint32_t lo = parse_char(']');
            uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']' && p_ + 1 < s_.size()) {
                ++p_;
                hi = parse_char(']');
                if (hi < lo) fail(at, "a range whose end comes before its start");
            }
            ranges_.push_back({lo, hi});
            ++e.count;
            count(1);
        }
        ++p_;
        seq.push_back(e);
    }

    uint32_t parse_count(size_t open) {
        if (peek() < '0' || peek() > '9') fail(p_, "expected a number in the repetition opened at " + where(open));
        uint64_t v = 0;
        const size_t at = p_;
        while (peek() >= '0' && peek() <= '9') {
            v = v * 10 + uint64_t(peek() - '0');
            ++p_;
            if (v > kMaxRepetition)
                fail(at, "repetition bound above the " + std::to_string(kMaxRepetition) + " allowed");
        }
        skip_space(false);
        return uint32_t(v);
    }

    // Replaces seq[last..] (symbol S) by S{min,max} (max UINT32_MAX: no bound) made of plain rules:
    // S repeated min times, then either `r ::= S r | ` (no bound) or max-min nested optional copies
    // `o1 ::= S | `, `ok ::= S o(k-1) | `, which read each count of copies one way only.
    void parse_repetition(uint32_t rule, Alternative& seq, size_t last) {
        const size_t at = p_;
        const char c = peek();
        ++p_;
        uint32_t lo = 0, hi = UINT32_MAX;
        if (c == '+') lo = 1;
        if (c == '?') hi = 1;
        if (c == '{') {
            skip_space(false);
            lo = parse_count(at);
            hi = lo;
            if (peek() == ',') {
                ++p_;
                skip_space(false);
                hi = peek() == '}' ? UINT32_MAX : parse_count(at);
            }
            if (peek() != '}') fail(p_, "expected '}' to close the repetition opened at " + where(at));
            ++p_;
            if (hi < lo) fail(at, "bad repetition bounds: {" + std::to_string(lo) + "," + std::to_string(hi) + "}");
        }
        const Alternative sym(seq.begin() + std::ptrdiff_t(last), seq.end());
        seq.resize(last);
        count((sym.size() + 3) * (size_t(lo) + (hi == UINT32_MAX ? 1 : hi - lo)));
        for (uint32_t i = 0; i < lo; ++i) seq.insert(seq.end(), sym.begin(), sym.end());
        const Element end{};
        if (hi == UINT32_MAX) {
            const uint32_t r = new_rule(rule, at);
            Alternative more = sym;
            more.push_back({Element::Kind::rule, false, r, 0});
            more.push_back(end);
            rules_[r].alts = {more, {end}};
            seq.push_back({Element::Kind::rule, false, r, 0});
        } else if (hi > lo) {
            uint32_t prev = 0;
            for (uint32_t k = 1; k <= hi - lo; ++k) {
                const uint32_t r = new_rule(rule, at);
                Alternative one = sym;
                if (k > 1) one.push_back({Element::Kind::rule, false, prev, 0});
                one.push_back(end);
                rules_[r].alts = {one, {end}};
                prev = r;
            }
            seq.push_back({Element::Kind::rule, false, prev, 0});
        }
    }

    Grammar finish() {
        for (const RuleDraft& r : rules_)
            if (!r.defined) fail(r.pos, "unknown rule '" + r.name + "'");
        const auto root = ids_.find("root");
        if (root == ids_.end()) throw GrammarError("grammar: no 'root' rule: it says what the whole output must match");
        Grammar g;
        g.root = root->second;
        g.ranges = std::move(ranges_);
        for (RuleDraft& r : rules_) {
            std::vector<uint32_t> starts;
            for (Alternative& a : r.alts) {
                starts.push_back(uint32_t(g.elements.size()));
                g.elements.insert(g.elements.end(), a.begin(), a.end());
            }
            g.rules.push_back(std::move(starts));
            g.names.push_back(r.name);
        }
        check_left_recursion(g);
        return g;
    }

    // A rule that can reach itself before reading a character would expand forever in the matcher (llama.cpp refuses
    // such grammars too): `expr ::= expr "+" term`, or a repetition of something that may be empty, `("a"?)*`.
    // Which rules may match nothing is found by propagation, the cycle by an iterative depth-first search: both in
    // time linear in the grammar, without recursion.
    void check_left_recursion(const Grammar& g) const {
        const size_t n = g.rules.size();
        std::vector<char> nullable(n, 0);
        std::vector<std::vector<std::pair<uint32_t, uint32_t>>> used_in(n);  // rule -> (owner rule, alternative)
        std::vector<std::vector<uint32_t>> pending(n);  // per rule and alternative: references not yet nullable
        std::vector<uint32_t> queue;
        for (uint32_t r = 0; r < n; ++r) {
            pending[r].assign(g.rules[r].size(), 0);
            for (uint32_t a = 0; a < g.rules[r].size(); ++a) {
                bool has_chars = false;
                for (uint32_t i = g.rules[r][a]; g.elements[i].kind != Element::Kind::end; ++i) {
                    if (g.elements[i].kind == Element::Kind::chars) {
                        has_chars = true;
                    } else {
                        ++pending[r][a];
                        used_in[g.elements[i].first].push_back({r, a});
                    }
                }
                if (has_chars) {
                    pending[r][a] = UINT32_MAX;
                } else if (pending[r][a] == 0 && !nullable[r]) {
                    nullable[r] = 1;
                    queue.push_back(r);
                }
            }
        }
        while (!queue.empty()) {
            const uint32_t r = queue.back();
            queue.pop_back();
            for (auto [owner, a] : used_in[r]) {
                if (pending[owner][a] == UINT32_MAX || --pending[owner][a] != 0 || nullable[owner]) continue;
                nullable[owner] = 1;
                queue.push_back(owner);
            }
        }
        // Edges: the rules each rule may start with.
        std::vector<std::vector<uint32_t>> starts(n);
        for (uint32_t r = 0; r < n; ++r)
            for (uint32_t a : g.rules[r])
                for (uint32_t i = a; g.elements[i].kind == Element::Kind::rule; ++i) {
                    starts[r].push_back(g.elements[i].first);
                    if (!nullable[g.elements[i].first]) break;
                }
        std::vector<char> state(n, 0);  // 0 unseen, 1 on the path, 2 done
        std::vector<std::pair<uint32_t, size_t>> path;
        for (uint32_t s = 0; s < n; ++s) {
            if (state[s]) continue;
            path.push_back({s, 0});
            state[s] = 1;
            while (!path.empty()) {
                auto& [r, next] = path.back();
                if (next == starts[r].size()) {
                    state[r] = 2;
                    path.pop_back();
                    continue;
                }
                const uint32_t t = starts[r][next++];
                if (state[t] == 1) {
                    const RuleDraft& d = rules_[t];
                    fail(d.pos, "left recursion: rule '" + d.name +
                                    "' can reach itself without reading a character (through a rule, or a "
                                    "repetition of something that may be empty)");
                }
                if (state[t] == 0) {
                    state[t] = 1;
                    path.push_back({t, 0});
                }
            }
        }
    }

    std::string_view s_;
    size_t p_ = 0;
    std::vector<RuleDraft> rules_;
    std::map<std::string, uint32_t> ids_;
    std::vector<Range> ranges_;
    size_t total_ = 0;
    int generated_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return Parser(text).parse(); }

}  // namespace zinc::grammar
