// GBNF grammars as llama.cpp writes them (docs/grammars.md), parsed into rules of alternatives of elements.
// Groups and repetitions become rules of their own, so a matcher sees only characters and rule references.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::grammar {

// A grammar refused: the message names the line and column (1-based, the column in characters) and the problem.
class GrammarError : public std::runtime_error {
public:
    GrammarError(int line, int column, const std::string& what);
    explicit GrammarError(const std::string& what) : std::runtime_error(what) {}
    int line = 0, column = 0;  // 0: the grammar as a whole (its size, a missing root)
};

// The bounds that keep an untrusted grammar's parse, expansion and matching small.
inline constexpr size_t kMaxGrammarBytes = size_t(1) << 20;
inline constexpr int kMaxNesting = 64;          // parentheses within parentheses
inline constexpr uint32_t kMaxRepetition = 2000;  // m and n of {m,n}, as llama.cpp's threshold
inline constexpr size_t kMaxElements = 500000;  // elements of all rules once repetitions are expanded

struct Element {
    enum class Kind : uint8_t {
        chars,  // one code point in ranges[first, first + count) (or outside them when negated)
        rule,   // a reference to rules[first]
        end,    // the end of an alternative
    };
    Kind kind = Kind::end;
    bool negated = false;
    uint32_t first = 0;
    uint32_t count = 0;
};

struct Range {
    uint32_t lo, hi;  // inclusive
};

struct Grammar {
    std::vector<Element> elements;             // every alternative of every rule, each closed by an end element
    std::vector<Range> ranges;                 // the character classes' ranges
    std::vector<std::vector<uint32_t>> rules;  // per rule: where each of its alternatives starts in elements
    std::vector<std::string> names;            // per rule; groups and repetitions are named "<rule>_<n>"
    uint32_t root = 0;

    bool matches(const Element& e, uint32_t cp) const;
};

// Parses GBNF text. Throws GrammarError for a malformed grammar, an undefined or missing rule, left recursion, or
// a grammar beyond the bounds above.
Grammar parse_gbnf(std::string_view text);

}  // namespace zinc::grammar
