// JSON that comes from outside: a request body, a conversation or tools file, a tool call's arguments. nlohmann's
// parser does not recurse, but copying, printing and converting what it built do, once per level: JSON nested a few
// tens of thousands of levels deep (a 100 KB body) would overflow the stack in any of them. Such text is refused
// before it is parsed.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zinc::chat {

// Far beyond what a conversation or a tool's JSON Schema needs, far below what the stack holds.
inline constexpr int kMaxJsonNesting = 128;

// Whether text, read as JSON, opens more than kMaxJsonNesting arrays and objects inside one another (a linear scan
// that skips strings; nothing is built).
bool nested_too_deep(std::string_view text);

// Throws std::runtime_error saying what is wrong: not JSON (and where), nested deeper than kMaxJsonNesting, a number
// past what a double holds.
nlohmann::ordered_json parse_json(std::string_view text);

}  // namespace zinc::chat
