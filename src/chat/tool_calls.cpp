#include "chat/tool_calls.h"

#include <nlohmann/json.hpp>

#include "chat/json_text.h"
#include "chat/text_scan.h"

namespace zinc::chat {

namespace {

using nlohmann::json;

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// A model's JSON: what it writes is bounded by its reply's length only, so its nesting is bounded here.
json parse_call_json(std::string_view text, const char* what) {
    if (nested_too_deep(text))
        throw ToolCallSyntaxError(std::string(what) + " nests deeper than " + std::to_string(kMaxJsonNesting) +
                                  " levels");
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        throw ToolCallSyntaxError(std::string(what) + " is not valid JSON: " + e.what());
    }
}

// The same, as a value or nothing (discarded).
json try_json(std::string_view text) {
    if (nested_too_deep(text)) return json(json::value_t::discarded);
    try {
        return json::parse(text, nullptr, false);
    } catch (const json::exception&) {  // a number past a double's range
        return json(json::value_t::discarded);
    }
}

// Arguments given as an object, or as a string holding one (some fine-tunes quote them).
std::string arguments_text(const json& args, const char* what) {
    if (args.is_object()) return args.dump();
    if (args.is_string()) {
        const json inner = parse_call_json(args.get<std::string>(), what);
        if (inner.is_object()) return inner.dump();
    }
    throw ToolCallSyntaxError(std::string(what) + " is not a JSON object");
}

ToolCall call_from_json(const json& j, const char* args_key, const char* alt_key) {
    if (!j.is_object()) throw ToolCallSyntaxError("the tool call is not a JSON object");
    const auto name = j.find("name");
    if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) {
        throw ToolCallSyntaxError("the tool call has no \"name\" string");
    }
    auto args = j.find(args_key);
    if (args == j.end()) args = j.find(alt_key);
    if (args == j.end()) return {name->get<std::string>(), "{}"};
    return {name->get<std::string>(), arguments_text(*args, "the tool call's arguments")};
}

// Qwen3.5/3.6: <function=NAME> then <parameter=KEY>\nVALUE\n</parameter> per argument. The template
// writes strings as they are and other values as JSON (tojson), so a value that reads as JSON
// other than a bare word is taken as JSON; anything else is a string.
ToolCall parse_qwen_xml(std::string_view body) {
    constexpr std::string_view fn_open = "<function=", fn_close = "</function>";
    constexpr std::string_view p_open = "<parameter=", p_close = "</parameter>";
    body.remove_prefix(fn_open.size());
    const std::size_t name_end = body.find('>');
    if (name_end == std::string_view::npos) throw ToolCallSyntaxError("<function= has no closing '>'");
    ToolCall call{std::string(trim(body.substr(0, name_end))), {}};
    if (call.name.empty()) throw ToolCallSyntaxError("<function=> has an empty name");
    body.remove_prefix(name_end + 1);
    json args = json::object();
    while (true) {
        body = trim(body);
        if (body.starts_with(fn_close)) break;
        if (!body.starts_with(p_open)) {
            throw ToolCallSyntaxError(body.empty() ? "</function> is missing" : "expected <parameter= or </function>");
        }
        body.remove_prefix(p_open.size());
        const std::size_t key_end = body.find('>');
        if (key_end == std::string_view::npos) throw ToolCallSyntaxError("<parameter= has no closing '>'");
        const std::string key(trim(body.substr(0, key_end)));
        body.remove_prefix(key_end + 1);
        const std::size_t value_end = body.find(p_close);
        if (value_end == std::string_view::npos) throw ToolCallSyntaxError("</parameter> is missing for " + key);
        std::string_view value = body.substr(0, value_end);
        // The template puts one newline on each side of the value.
        if (value.starts_with('\n')) value.remove_prefix(1);
        if (value.ends_with('\n')) value.remove_suffix(1);
        json v = try_json(value);
        const bool json_like = !v.is_discarded() && (v.is_object() || v.is_array() || v.is_number() ||
                                                     v.is_boolean() || v.is_null());
        args[key] = json_like ? v : json(std::string(value));
        body.remove_prefix(value_end + p_close.size());
    }
    if (!trim(body.substr(fn_close.size())).empty()) throw ToolCallSyntaxError("text after </function>");
    call.arguments = args.dump();
    return call;
}

// Gemma 4's argument notation, read into JSON.
class Gemma4Args {
public:
    explicit Gemma4Args(std::string_view s) : s_(s) {}

    json object() {
        expect('{');
        json o = json::object();
        if (peek() == '}') {
            ++i_;
            return o;
        }
        while (true) {
            std::string key = this->key();
            expect(':');
            o[key] = value();
            const char c = next();
            if (c == '}') return o;
            if (c != ',') fail("expected ',' or '}'");
        }
    }

    bool at_end() {
        skip_space();
        return i_ == s_.size();
    }

private:
    static constexpr std::string_view quote = "<|\"|>";

    [[noreturn]] void fail(const std::string& what) const {
        throw ToolCallSyntaxError("Gemma 4 arguments: " + what + " at byte " + std::to_string(i_));
    }
    void skip_space() {
        while (i_ < s_.size() && is_space(s_[i_])) ++i_;
    }
    char peek() {
        skip_space();
        return i_ < s_.size() ? s_[i_] : '\0';
    }
    char next() {
        const char c = peek();
        if (c == '\0') fail("unexpected end");
        ++i_;
        return c;
    }
    void expect(char c) {
        if (next() != c) fail(std::string("expected '") + c + "'");
    }
    std::string quoted() {  // at <|"|>
        i_ += quote.size();
        const std::size_t end = s_.find(quote, i_);
        if (end == std::string_view::npos) fail("unterminated <|\"|> string");
        std::string out(s_.substr(i_, end - i_));
        i_ = end + quote.size();
        return out;
    }
    std::string key() {
        skip_space();
        if (s_.substr(i_).starts_with(quote)) return quoted();
        const std::size_t start = i_;
        while (i_ < s_.size() && s_[i_] != ':' && s_[i_] != ',' && s_[i_] != '}' && !is_space(s_[i_])) ++i_;
        if (i_ == start) fail("expected a key");
        return std::string(s_.substr(start, i_ - start));
    }
    json value() {
        // Each level of this parser is a level of the stack; the nesting JSON may have is enough for arguments.
        if (++depth_ > kMaxJsonNesting) fail("values nested deeper than " + std::to_string(kMaxJsonNesting) + " levels");
        struct Leave {
            int& d;
            ~Leave() { --d; }
        } leave{depth_};
        const char c = peek();
        if (s_.substr(i_).starts_with(quote)) return quoted();
        if (c == '{') return object();
        if (c == '[') {
            ++i_;
            json a = json::array();
            if (peek() == ']') {
                ++i_;
                return a;
            }
            while (true) {
                a.push_back(value());
                const char d = next();
                if (d == ']') return a;
                if (d != ',') fail("expected ',' or ']'");
            }
        }
        if (c == '"') {  // a JSON string, which some outputs use instead of <|"|>
            const std::size_t start = i_++;
            while (i_ < s_.size() && s_[i_] != '"') i_ += s_[i_] == '\\' ? 2 : 1;
            if (i_ >= s_.size()) fail("unterminated string");
            ++i_;
            return parse_call_json(s_.substr(start, i_ - start), "a quoted string");
        }
        // A bare number, true, false or null.
        const std::size_t start = i_;
        while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']') ++i_;
        const std::string_view word = trim(s_.substr(start, i_ - start));
        if (word.empty()) fail("expected a value");
        json v = try_json(word);
        if (v.is_discarded() || v.is_object() || v.is_array() || v.is_string()) {
            fail("'" + std::string(word) + "' is not a value");
        }
        return v;
    }

    std::string_view s_;
    std::size_t i_ = 0;
    int depth_ = 0;
};

}  // namespace

ToolCall parse_qwen_tool_call(std::string_view body) {
    body = trim(body);
    if (body.starts_with("<function=")) return parse_qwen_xml(body);
    return call_from_json(parse_call_json(body, "the tool call"), "arguments", "parameters");
}

ToolCall parse_gemma4_tool_call(std::string_view body) {
    body = trim(body);
    if (!body.starts_with("call:")) throw ToolCallSyntaxError("a Gemma 4 tool call starts with \"call:\"");
    body.remove_prefix(5);
    const std::size_t brace = body.find('{');
    if (brace == std::string_view::npos) throw ToolCallSyntaxError("the tool call has no '{' after its name");
    ToolCall call{std::string(trim(body.substr(0, brace))), {}};
    if (call.name.empty()) throw ToolCallSyntaxError("the tool call has an empty name");
    for (char c : call.name) {
        if (is_space(c) || c == '<' || c == '>') throw ToolCallSyntaxError("invalid function name '" + call.name + "'");
    }
    Gemma4Args args(body.substr(brace));
    const json o = args.object();
    if (!args.at_end()) throw ToolCallSyntaxError("text after the arguments' closing '}'");
    call.arguments = o.dump();
    return call;
}

std::vector<ToolCall> parse_json_tool_calls(std::string_view text) {
    const json j = parse_call_json(trim(text), "the tool call");
    std::vector<ToolCall> calls;
    if (j.is_array()) {
        if (j.empty()) throw ToolCallSyntaxError("the tool call list is empty");
        for (const json& c : j) calls.push_back(call_from_json(c, "parameters", "arguments"));
    } else {
        calls.push_back(call_from_json(j, "parameters", "arguments"));
    }
    return calls;
}

std::string check_json_arguments(std::string_view text) {
    const json j = parse_call_json(trim(text), "the tool call's arguments");
    if (!j.is_object()) throw ToolCallSyntaxError("the tool call's arguments are not a JSON object");
    return j.dump();
}

}  // namespace zinc::chat
