#include "server/constraint.h"

#include "grammar/json_schema.h"

namespace zinc::server {
namespace {

bool given(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

std::shared_ptr<const grammar::Grammar> parse_grammar(std::string_view text, const char* param) {
    try {
        return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(text));
    } catch (const grammar::GrammarError& e) {
        throw BadRequest(e.what(), param);  // "grammar: line L, column C: ..."
    }
}

// The JSON object grammar is the same for every request: parsed once.
std::shared_ptr<const grammar::Grammar> json_object_grammar() {
    static const std::shared_ptr<const grammar::Grammar> g =
        parse_grammar(grammar::json_object_gbnf(), "response_format");
    return g;
}

std::shared_ptr<const grammar::Grammar> format_grammar(const json& rf) {
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
        throw BadRequest("response_format must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                         "{\"type\": \"json_schema\", ...}",
                         "response_format");
    const std::string type = rf["type"].get<std::string>();
    if (type == "text") return nullptr;
    if (type == "json_object") return json_object_grammar();
    if (type == "json_schema") {
        // OpenAI's {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}: the schema is always
        // enforced, strict or not. (The request's objects hold their keys sorted, so optional properties are
        // offered in name order rather than the schema's.)
        if (!rf.contains("json_schema") || !rf["json_schema"].is_object() || !rf["json_schema"].contains("schema"))
            throw BadRequest("response_format json_schema needs {\"json_schema\": {\"schema\": {...}}}",
                             "response_format");
        try {
            return parse_grammar(
                grammar::json_schema_value_to_gbnf(nlohmann::ordered_json::parse(rf["json_schema"]["schema"].dump())),
                "response_format");
        } catch (const grammar::SchemaError& e) {
            throw BadRequest(e.what(), "response_format");
        }
    }
    throw BadRequest("response_format type must be text, json_object or json_schema", "response_format");
}

}  // namespace

std::shared_ptr<const grammar::Grammar> constraint(const json& body) {
    const bool by_grammar = given(body, "grammar");
    std::shared_ptr<const grammar::Grammar> from_format;
    if (given(body, "response_format")) from_format = format_grammar(body["response_format"]);
    if (!by_grammar) return from_format;
    if (from_format)
        throw BadRequest("grammar and a response_format that constrains cannot be given together", "grammar");
    const json& g = body["grammar"];
    if (!g.is_string()) throw BadRequest("grammar must be a string of GBNF rules", "grammar");
    const std::string& text = g.get_ref<const std::string&>();
    if (text.size() > kMaxGrammarBytes)
        throw BadRequest("grammar: " + std::to_string(text.size()) + " bytes; at most " +
                             std::to_string(kMaxGrammarBytes) + " are taken",
                         "grammar");
    if (text.empty()) return nullptr;  // llama-server's default: no grammar
    return parse_grammar(text, "grammar");
}

}  // namespace zinc::server
