// The pieces of the JSON Schema conversion (json_schema.h) that stand on their own: GBNF literals and character
// classes for text inside a JSON string, a `pattern` (a regular-expression subset) as a grammar, and the digits of
// the integers in a range. Each throws std::invalid_argument with the problem; the converter adds where it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zinc::grammar::schema {

// A GBNF literal ("...") that matches exactly the UTF-8 text `s`.
std::string gbnf_literal(std::string_view s);

// Code points, as sorted, disjoint inclusive ranges.
using CharSet = std::vector<std::pair<uint32_t, uint32_t>>;

CharSet complement(const CharSet& set);
// The code points of UTF-8 text; throws on text that is not UTF-8.
std::vector<uint32_t> utf8_code_points(std::string_view s);

// A GBNF expression for one character of `set` as it appears inside a JSON string: written as itself, except '"',
// '\' and the control characters, which take their JSON escapes (\" \\ \b \t \n \f \r, else \u00XX in either case).
std::string json_char_gbnf(const CharSet& set);

// A GBNF expression for the content of a JSON string (between its quotes) that `pattern` matches, ECMA-262's search
// semantics: without ^ or $ any text may come before or after. `any_char` names the rule of one character of a JSON
// string, for that text. The subset: literals, escapes \d \w \s \D \W \S \n \t \r \f \v \xHH \uHHHH and escaped
// punctuation, classes [...] and [^...], '.', groups (...) and (?:...), alternation, * + ? {m} {m,} {m,n} (counts at
// most `max_count`), ^ first and $ last. Anything else is refused by name (lookaround, backreferences, \b, lazy
// quantifiers, named groups, flags).
std::string pattern_gbnf(std::string_view pattern, const std::string& any_char, uint32_t max_count);

// A GBNF expression for the decimal integers in [lo, hi] as JSON writes them (no leading zeros, no "+", "-0"
// refused). A missing bound: at most `free_digits` digits on that side.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi, int free_digits);

}  // namespace zinc::grammar::schema
