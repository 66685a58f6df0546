#include "chat/json_text.h"

#include <algorithm>
#include <stdexcept>

namespace zinc::chat {
namespace {

// The deepest nesting of arrays and objects in the text, outside strings; stops counting past `max`.
int nesting(std::string_view text, int max) {
    int depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
            if (deepest > max) return deepest;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return deepest;
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string plain(const std::exception& e) {
    const std::string what = e.what();
    const size_t end = what.starts_with("[json.exception.") ? what.find("] ") : std::string::npos;
    return end == std::string::npos ? what : what.substr(end + 2);
}

}  // namespace

bool nested_too_deep(std::string_view text) { return nesting(text, kMaxJsonNesting) > kMaxJsonNesting; }

nlohmann::ordered_json parse_json(std::string_view text) {
    if (nested_too_deep(text))
        throw std::runtime_error("JSON nested deeper than " + std::to_string(kMaxJsonNesting) + " levels");
    try {
        return nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::out_of_range& e) {
        throw std::runtime_error(plain(e) + " (a number must fit in a double)");
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error("not JSON: " + plain(e));
    }
}

}  // namespace zinc::chat
