#include "server/constraint.h"

#include "grammar/json_object.h"

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
        parse_grammar(grammar::kJsonObjectGbnf, "response_format");
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
    // Where a JSON Schema's grammar will come from (json_schema.schema converted to GBNF), once it is served.
    if (type == "json_schema")
        throw BadRequest("response_format json_schema is not supported yet; json_object and grammar (GBNF) are",
                         "response_format");
    throw BadRequest("response_format type must be text, json_object or json_schema", "response_format");
}

}  // namespace

std::shared_ptr<const grammar::Grammar> constraint(const json& body) {
    const bool by_grammar = given(body, "grammar");
    std::shared_ptr<const grammar::Grammar> from_format;
    if (given(body, "response_format")) from_format = format_grammar(body["response_format"]);
    if (!by_grammar) return from_format;
    if (from_format) throw BadRequest("grammar and response_format json_object cannot be given together", "grammar");
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
