// JSON Schema to GBNF (json_schema.h): each subschema becomes a GBNF expression, named rules where it is shared or
// nests, and each $ref target one rule, so recursive schemas give rules that refer to each other.
// GCC 12 warns of overlapping copies in std::string concatenation where there are none (its bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_object.h"
#include "grammar/json_schema_parts.h"

namespace zinc::grammar {
namespace {

using json = nlohmann::ordered_json;
using namespace schema;

// Keywords that say nothing about which texts are allowed; $defs and definitions are read only through $ref.
const std::set<std::string> kAnnotations = {"title",      "description", "$schema",  "$id",
                                            "$comment",   "default",     "examples", "deprecated",
                                            "readOnly",   "writeOnly",   "$defs",    "definitions"};
// The keywords of each type, for a schema without `type` (its type is taken from them) and to refuse one that
// cannot apply (`minLength` on an integer).
const std::map<std::string, std::string> kTypeOfKeyword = {
    {"properties", "object"}, {"required", "object"},        {"additionalProperties", "object"},
    {"items", "array"},       {"prefixItems", "array"},      {"minItems", "array"},
    {"maxItems", "array"},    {"minLength", "string"},       {"maxLength", "string"},
    {"pattern", "string"},    {"format", "string"},          {"minimum", "number"},
    {"maximum", "number"},    {"exclusiveMinimum", "number"}, {"exclusiveMaximum", "number"}};
const std::set<std::string> kOtherKeywords = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"};
const std::vector<std::string> kTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};

// Why some keywords are refused, for the error message.
const std::map<std::string, std::string> kRefusedWhy = {
    {"not", "a grammar cannot exclude what a schema matches"},
    {"if", "conditional schemas are not converted"},
    {"then", "conditional schemas are not converted"},
    {"else", "conditional schemas are not converted"},
    {"uniqueItems", "a grammar cannot compare items"},
    {"multipleOf", "divisibility is not converted"},
    {"patternProperties", "property names by pattern are not converted"},
    {"propertyNames", "property names by schema are not converted"},
    {"minProperties", "property counts are not converted"},
    {"maxProperties", "property counts are not converted"},
    {"dependentSchemas", "dependencies between properties are not converted"},
    {"dependentRequired", "dependencies between properties are not converted"},
    {"dependencies", "dependencies between properties are not converted"},
    {"contains", "a grammar cannot count matching items"},
    {"additionalItems", "use prefixItems and items"},
    {"unevaluatedProperties", "use additionalProperties"},
    {"unevaluatedItems", "use items"},
};

// The whitespace allowed between JSON tokens: nothing, one space, or a newline and up to 20 spaces or tabs (one line
// of indentation), so that pretty-printed output fits and a model cannot pad without end.
const char* kWs = "| \" \" | \"\\n\" [ \\t]{0,20}";
const char* kJsonChar = "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})";
const char* kNumber = "\"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?";
// RFC 3339 full-date, partial-time with a time offset, date-time; RFC 4122's textual UUID; an email address as
// dot-atoms with a domain of at least two labels.
const char* kDate = "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])";
const char* kTime =
    "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? "
    "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
const char* kUuid =
    "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}";
const char* kEmailAtom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
const char* kEmailLabel = "[A-Za-z0-9] ([A-Za-z0-9-]{0,61} [A-Za-z0-9])?";

class Converter {
public:
    explicit Converter(const json& root) : root_(root) {}

    std::string run() {
        rules_.push_back({"root", ""});
        names_.insert("root");
        rules_[0].body = expr(root_, "", "root", 0);
        std::string out;
        for (const auto& r : rules_) out += r.name + " ::= " + r.body + "\n";
        return out;
    }

    std::string builtin(const std::string& name) {
        if (names_.count(name)) return name;
        names_.insert(name);
        rules_.push_back({name, ""});
        const size_t at = rules_.size() - 1;
        std::string body;
        if (name == "ws") body = kWs;
        else if (name == "json-char") body = kJsonChar;
        else if (name == "key-char") body = json_char_gbnf({{0, 0x10FFFF}});
        else if (name == "json-string") body = "\"\\\"\" " + builtin("json-char") + "* \"\\\"\"";
        else if (name == "json-number") body = kNumber;
        else if (name == "json-integer") body = integer_range_gbnf(std::nullopt, std::nullopt, kMaxFreeIntegerDigits);
        else if (name == "json-boolean") body = "\"true\" | \"false\"";
        else if (name == "json-value")
            body = builtin("json-object") + " | " + builtin("json-array") + " | " + builtin("json-string") + " | " +
                   builtin("json-number") + " | \"true\" | \"false\" | \"null\"";
        else if (name == "json-object") {
            const std::string kv = builtin("json-string") + " ws \":\" ws json-value";
            builtin("ws");
            body = "\"{\" ws (" + kv + " (ws \",\" ws " + kv + ")* ws)? \"}\"";
            builtin("json-value");
        } else if (name == "json-array") {
            builtin("ws");
            body = "\"[\" ws (json-value (ws \",\" ws json-value)* ws)? \"]\"";
            builtin("json-value");
        } else if (name == "format-date") body = kDate;
        else if (name == "format-time") body = kTime;
        else if (name == "format-date-time") body = builtin("format-date") + " \"T\" " + builtin("format-time");
        else if (name == "format-uuid") body = kUuid;
        else if (name == "format-email")
            body = std::string(kEmailAtom) + " (\".\" " + kEmailAtom + ")* \"@\" " + kEmailLabel + " (\".\" " +
                   kEmailLabel + ")+";
        rules_[at].body = body;
        return name;
    }

private:
    struct Rule {
        std::string name, body;
    };
    const json& root_;
    std::vector<Rule> rules_;
    std::set<std::string> names_;
    std::map<std::string, std::string> refs_;  // $ref -> its rule
    size_t nodes_ = 0;

    [[noreturn]] static void fail(const std::string& path, const std::string& what) {
        throw SchemaError("schema: at " + (path.empty() ? std::string("the root") : path) + ": " + what);
    }

    // A new rule named after `hint` (letters, digits and '-' only), made unique.
    std::string add_rule(const std::string& hint, const std::string& body) {
        std::string base;
        for (char c : hint) base += std::isalnum(uint8_t(c)) ? c : '-';
        if (base.size() > 48) base.resize(48);
        std::string name = base;
        for (int i = 2; names_.count(name); ++i) name = base + "-" + std::to_string(i);
        names_.insert(name);
        rules_.push_back({name, body});
        return name;
    }

    static bool annotations_only(const json& s, const std::set<std::string>& also) {
        for (const auto& [k, v] : s.items())
            if (!kAnnotations.count(k) && !also.count(k)) return false;
        return true;
    }
    static std::string first_other(const json& s, const std::set<std::string>& also) {
        for (const auto& [k, v] : s.items())
            if (!kAnnotations.count(k) && !also.count(k)) return k;
        return "";
    }

    // The GBNF expression of the texts schema `s` allows.
    std::string expr(const json& s, const std::string& path, const std::string& hint, int depth) {
        if (depth > kMaxSchemaNesting)
            fail(path, "subschemas nested more than " + std::to_string(kMaxSchemaNesting) + " deep");
        if (++nodes_ > kMaxSchemaNodes) fail(path, "more than " + std::to_string(kMaxSchemaNodes) + " subschemas");
        if (s.is_boolean()) {
            if (!s.get<bool>()) fail(path, "the schema false allows no value");
            return builtin("json-value");
        }
        if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
        for (const auto& [k, v] : s.items()) {
            if (kAnnotations.count(k) || kTypeOfKeyword.count(k) || kOtherKeywords.count(k)) continue;
            const auto why = kRefusedWhy.find(k);
            fail(path, "'" + k + "' is not supported" + (why == kRefusedWhy.end() ? "" : " (" + why->second + ")"));
        }
        if (s.contains("$ref")) {
            if (const std::string other = first_other(s, {"$ref"}); !other.empty())
                fail(path, "'$ref' together with '" + other + "' is not supported");
            return ref(s["$ref"], path, depth);
        }
        for (const char* k : {"anyOf", "oneOf"}) {
            if (!s.contains(k)) continue;
            // oneOf's "exactly one" cannot be enforced by a grammar: it is converted as anyOf.
            if (const std::string other = first_other(s, {k}); !other.empty())
                fail(path, std::string("'") + k + "' together with '" + other + "' is not supported");
            const json& alts = s[k];
            if (!alts.is_array() || alts.empty()) fail(path, std::string("'") + k + "' must be a non-empty array");
            std::string body;
            for (size_t i = 0; i < alts.size(); ++i)
                body += (i ? " | " : "") + expr(alts[i], path + "/" + k + "/" + std::to_string(i),
                                                hint + "-" + std::to_string(i), depth + 1);
            return add_rule(hint, body);
        }
        if (s.contains("allOf")) return expr(merge_all_of(s, path, depth), path, hint, depth + 1);
        if (s.contains("enum") || s.contains("const")) return enumeration(s, path, hint);
        std::vector<std::string> types = types_of(s, path);
        if (types.empty()) return builtin("json-value");
        std::string body;
        for (size_t i = 0; i < types.size(); ++i) body += (i ? " | " : "") + typed(s, types[i], path, hint, depth);
        return types.size() == 1 ? body : add_rule(hint, body);
    }

    std::vector<std::string> types_of(const json& s, const std::string& path) {
        std::vector<std::string> types;
        if (s.contains("type")) {
            const json& t = s["type"];
            if (t.is_string()) types.push_back(t.get<std::string>());
            else if (t.is_array() && !t.empty())
                for (const auto& e : t) types.push_back(e.is_string() ? e.get<std::string>() : "");
            else fail(path, "'type' must be a type name or a non-empty array of them");
            for (const auto& name : types)
                if (std::find(kTypes.begin(), kTypes.end(), name) == kTypes.end())
                    fail(path, "unknown type '" + name + "'");
        } else {
            for (const auto& [k, v] : s.items())
                if (const auto it = kTypeOfKeyword.find(k); it != kTypeOfKeyword.end())
                    if (std::find(types.begin(), types.end(), it->second) == types.end()) types.push_back(it->second);
        }
        // Each keyword must apply to one of the types (numeric keywords to number or integer).
        for (const auto& [k, v] : s.items()) {
            const auto it = kTypeOfKeyword.find(k);
            if (it == kTypeOfKeyword.end()) continue;
            bool applies = false;
            for (const auto& t : types)
                applies = applies || t == it->second || (it->second == "number" && t == "integer");
            if (!applies) fail(path, "'" + k + "' does not apply to the schema's type");
        }
        return types;
    }

    std::string typed(const json& s, const std::string& type, const std::string& path, const std::string& hint,
                      int depth) {
        if (type == "null") return "\"null\"";
        if (type == "boolean") return builtin("json-boolean");
        if (type == "integer") return integer(s, path, hint);
        if (type == "number") {
            for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
                if (s.contains(k))
                    fail(path, std::string("'") + k + "' on a number is not supported (only on integers)");
            return builtin("json-number");
        }
        if (type == "string") return string(s, path, hint);
        if (type == "array") return array(s, path, hint, depth);
        return object(s, path, hint, depth);
    }

    std::string ref(const json& r, const std::string& path, int depth) {
        if (!r.is_string()) fail(path, "'$ref' must be a string");
        const std::string target = r.get<std::string>();
        if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
        if (target != "#" && target.rfind("#/$defs/", 0) != 0 && target.rfind("#/definitions/", 0) != 0)
            fail(path, "'$ref' to '" + target + "' is not supported: only '#', '#/$defs/...' and '#/definitions/...'");
        if (refs_.size() >= kMaxSchemaRefs) fail(path, "more than " + std::to_string(kMaxSchemaRefs) + " $ref targets");
        const json* t = nullptr;
        try {
            t = &root_.at(json::json_pointer(target.substr(1)));
        } catch (const std::exception&) {
            fail(path, "'$ref' to '" + target + "': no such definition");
        }
        const std::string name =
            add_rule(target == "#" ? "root-ref" : "def-" + target.substr(target.find('/', 2) + 1), "");
        refs_[target] = name;
        const std::string body = expr(*t, target.substr(1), name, depth + 1);
        for (auto& rule : rules_)
            if (rule.name == name) rule.body = body;
        return name;
    }

    // The schema a $ref leads to (through any chain of them), for allOf.
    const json& resolve(const json& s, const std::string& path) {
        const json* cur = &s;
        for (int hops = 0; cur->is_object() && cur->contains("$ref"); ++hops) {
            if (hops > kMaxSchemaNesting)
                fail(path, "a chain of $ref longer than " + std::to_string(kMaxSchemaNesting));
            const json& r = (*cur)["$ref"];
            const std::string target = r.is_string() ? r.get<std::string>() : "";
            if (target != "#" && target.rfind("#/$defs/", 0) != 0 && target.rfind("#/definitions/", 0) != 0)
                fail(path, "'$ref' to '" + target +
                               "' is not supported: only '#', '#/$defs/...' and '#/definitions/...'");
            try {
                cur = &root_.at(json::json_pointer(target.substr(1)));
            } catch (const std::exception&) {
                fail(path, "'$ref' to '" + target + "': no such definition");
            }
        }
        return *cur;
    }

    // allOf of object schemas as one object schema: properties and required merged; where a part has
    // additionalProperties false, only its properties remain allowed.
    json merge_all_of(const json& s, const std::string& path, int depth) {
        const json& all = s["allOf"];
        if (!all.is_array() || all.empty()) fail(path, "'allOf' must be a non-empty array");
        std::vector<const json*> parts;
        json own = json::object();
        for (const auto& [k, v] : s.items())
            if (k != "allOf" && !kAnnotations.count(k)) own[k] = v;
        if (!own.empty()) parts.push_back(&own);
        for (const auto& p : all) parts.push_back(&resolve(p, path + "/allOf"));
        json props = json::object();
        std::vector<std::string> required;
        std::optional<std::set<std::string>> allowed;  // keys every closed part allows
        for (const json* p : parts) {
            if (!p->is_object()) fail(path, "'allOf': only object schemas can be merged");
            for (const auto& [k, v] : p->items()) {
                if (kAnnotations.count(k)) continue;
                if (k == "type" && v == "object") continue;
                if (k == "properties" || k == "required" || (k == "additionalProperties" && v.is_boolean())) continue;
                fail(path, "'allOf': '" + k + "' cannot be merged (only type object, properties, required and "
                           "additionalProperties true or false)");
            }
            if (p->contains("properties")) {
                if (!(*p)["properties"].is_object()) fail(path, "'properties' must be an object");
                for (const auto& [name, sub] : (*p)["properties"].items()) {
                    if (props.contains(name) && props[name] != sub)
                        fail(path, "'allOf': property '" + name + "' has different schemas in two parts");
                    props[name] = sub;
                }
            }
            if (p->contains("required") && (*p)["required"].is_array())
                for (const auto& r : (*p)["required"])
                    if (r.is_string() && std::find(required.begin(), required.end(), r.get<std::string>()) ==
                                             required.end())
                        required.push_back(r.get<std::string>());
            if (p->value("additionalProperties", true) == false) {
                std::set<std::string> mine;
                if (p->contains("properties"))
                    for (const auto& [name, sub] : (*p)["properties"].items()) mine.insert(name);
                if (allowed) {
                    std::set<std::string> both;
                    for (const auto& n : *allowed)
                        if (mine.count(n)) both.insert(n);
                    allowed = both;
                } else {
                    allowed = mine;
                }
            }
        }
        (void)depth;
        json merged = {{"type", "object"}};
        json kept = json::object();
        for (const auto& [name, sub] : props.items())
            if (!allowed || allowed->count(name)) kept[name] = sub;
        merged["properties"] = kept;
        for (const auto& r : required)
            if (!kept.contains(r)) fail(path, "'allOf': required property '" + r + "' is not allowed by every part");
        merged["required"] = required;
        merged["additionalProperties"] = !allowed.has_value();
        return merged;
    }

    std::string enumeration(const json& s, const std::string& path, const std::string& hint) {
        if (const std::string other = first_other(s, {"enum", "const", "type"}); !other.empty())
            fail(path, "'" + other + "' together with 'enum' or 'const' is not supported");
        if (s.contains("enum") && s.contains("const")) fail(path, "'enum' together with 'const' is not supported");
        json values = s.contains("const") ? json::array({s["const"]}) : s["enum"];
        if (!values.is_array() || values.empty()) fail(path, "'enum' must be a non-empty array");
        if (values.size() > kMaxEnumValues) fail(path, "'enum' has more than " + std::to_string(kMaxEnumValues) +
                                                           " values");
        const std::vector<std::string> types = s.contains("type") ? types_of(s, path) : std::vector<std::string>{};
        std::string body;
        for (const auto& v : values) {
            if (!types.empty()) {
                bool fits = false;
                for (const auto& t : types)
                    fits = fits || (t == "null" && v.is_null()) || (t == "boolean" && v.is_boolean()) ||
                           (t == "string" && v.is_string()) || (t == "object" && v.is_object()) ||
                           (t == "array" && v.is_array()) || (t == "number" && v.is_number()) ||
                           (t == "integer" && v.is_number_integer());
                if (!fits) continue;  // a value of another type never validates
            }
            body += (body.empty() ? "" : " | ") + gbnf_literal(v.dump());
        }
        if (body.empty()) fail(path, "no value of 'enum' or 'const' is of the schema's type");
        return add_rule(hint, body);
    }

    static std::optional<double> number_of(const json& s, const char* k, const std::string& path) {
        if (!s.contains(k)) return std::nullopt;
        if (!s[k].is_number()) fail(path, std::string("'") + k + "' must be a number");
        return s[k].get<double>();
    }

    std::string integer(const json& s, const std::string& path, const std::string& hint) {
        std::optional<double> lo, hi;
        if (auto v = number_of(s, "minimum", path)) lo = std::ceil(*v);
        if (auto v = number_of(s, "exclusiveMinimum", path)) lo = std::max(lo.value_or(-INFINITY), std::floor(*v) + 1);
        if (auto v = number_of(s, "maximum", path)) hi = std::floor(*v);
        if (auto v = number_of(s, "exclusiveMaximum", path)) hi = std::min(hi.value_or(INFINITY), std::ceil(*v) - 1);
        if (!lo && !hi) return builtin("json-integer");
        for (const auto& b : {lo, hi})
            if (b && std::fabs(*b) > double(kMaxIntegerBound))
                fail(path, "an integer bound beyond " + std::to_string(kMaxIntegerBound) + " in magnitude");
        std::optional<int64_t> l, h;
        if (lo) l = int64_t(*lo);
        if (hi) h = int64_t(*hi);
        if (l && h && *l > *h) fail(path, "no integer lies within the bounds");
        return add_rule(hint, integer_range_gbnf(l, h, kMaxFreeIntegerDigits));
    }

    uint32_t count_of(const json& s, const char* k, const std::string& path, uint32_t fallback) {
        if (!s.contains(k)) return fallback;
        if (!s[k].is_number_unsigned() && !(s[k].is_number_integer() && s[k].get<int64_t>() >= 0))
            fail(path, std::string("'") + k + "' must be a non-negative integer");
        const uint64_t v = s[k].get<uint64_t>();
        if (v > kMaxSchemaCount) fail(path, std::string("'") + k + "' above " + std::to_string(kMaxSchemaCount));
        return uint32_t(v);
    }

    std::string string(const json& s, const std::string& path, const std::string& hint) {
        const bool lengths = s.contains("minLength") || s.contains("maxLength");
        if (s.contains("format")) {
            if (lengths || s.contains("pattern"))
                fail(path, "'format' together with a length or pattern is not supported");
            const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
            if (f != "date" && f != "time" && f != "date-time" && f != "uuid" && f != "email")
                fail(path, "format '" + f + "' is not supported (only date, time, date-time, uuid and email)");
            return add_rule(hint, "\"\\\"\" " + builtin("format-" + f) + " \"\\\"\"");
        }
        if (s.contains("pattern")) {
            if (lengths) fail(path, "'pattern' together with 'minLength' or 'maxLength' is not supported");
            if (!s["pattern"].is_string()) fail(path, "'pattern' must be a string");
            std::string content;
            try {
                content = pattern_gbnf(s["pattern"].get<std::string>(), builtin("json-char"), kMaxSchemaCount);
            } catch (const std::invalid_argument& e) {
                fail(path, e.what());
            }
            return add_rule(hint, "\"\\\"\" " + content + " \"\\\"\"");
        }
        if (!lengths) return builtin("json-string");
        const uint32_t lo = count_of(s, "minLength", path, 0);
        const std::string ch = builtin("json-char");
        if (s.contains("maxLength")) {
            const uint32_t hi = count_of(s, "maxLength", path, 0);
            if (hi < lo) fail(path, "'maxLength' below 'minLength'");
            const std::string count = "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
            return add_rule(hint, "\"\\\"\" " + ch + count + " \"\\\"\"");
        }
        return add_rule(hint, "\"\\\"\" " + ch + "{" + std::to_string(lo) + ",} \"\\\"\"");
    }

    std::string array(const json& s, const std::string& path, const std::string& hint, int depth) {
        std::vector<std::string> prefix;
        if (s.contains("prefixItems")) {
            const json& p = s["prefixItems"];
            if (!p.is_array()) fail(path, "'prefixItems' must be an array");
            for (size_t i = 0; i < p.size(); ++i)
                prefix.push_back(expr(p[i], path + "/prefixItems/" + std::to_string(i), hint + "-" + std::to_string(i),
                                      depth + 1));
        }
        std::optional<std::string> item = builtin("json-value");
        if (s.contains("items")) {
            const json& it = s["items"];
            if (it.is_array()) fail(path, "'items' as an array is not supported (use prefixItems)");
            if (it.is_boolean() && !it.get<bool>()) item.reset();
            else item = expr(it, path + "/items", hint + "-item", depth + 1);
        }
        const uint32_t k = uint32_t(prefix.size());
        const uint32_t min = count_of(s, "minItems", path, 0);
        std::optional<uint32_t> max;
        if (s.contains("maxItems")) max = count_of(s, "maxItems", path, 0);
        if (!item) max = std::min(max.value_or(k), k);
        if (max && *max < min) fail(path, "no array length satisfies minItems, maxItems and the items allowed");
        builtin("ws");
        if (max && *max == 0) return add_rule(hint, "\"[\" ws \"]\"");
        const auto element = [&](uint32_t i) { return i < k ? prefix[i] : *item; };
        // The elements from index i on, each after a comma; empty where the array may end before them.
        std::string tail;
        {
            const uint32_t start = std::max<uint32_t>(k, 1);
            if (item && (!max || *max > start)) {
                const uint32_t a = min > start ? min - start : 0;
                tail = "(ws \",\" ws " + *item + "){" + std::to_string(a) + "," +
                       (max ? std::to_string(*max - start) : "") + "}";
            }
        }
        for (uint32_t i = k; i-- > 1;) {
            if (max && i >= *max) continue;
            std::string inner = "ws \",\" ws " + prefix[i] + (tail.empty() ? "" : " " + tail);
            tail = add_rule(hint + "-tail", i >= min ? "(" + inner + ")?" : inner);
        }
        const std::string elements = element(0) + (tail.empty() ? "" : " " + tail);
        return add_rule(hint, min > 0 ? "\"[\" ws " + elements + " ws \"]\"" : "\"[\" ws (" + elements + " ws)? \"]\"");
    }

    std::string object(const json& s, const std::string& path, const std::string& hint, int depth) {
        builtin("ws");
        std::vector<std::pair<std::string, std::string>> props;  // name, its member's rule
        std::set<std::string> required;
        if (s.contains("required")) {
            if (!s["required"].is_array()) fail(path, "'required' must be an array");
            for (const auto& r : s["required"]) {
                if (!r.is_string()) fail(path, "'required' must list property names");
                required.insert(r.get<std::string>());
            }
        }
        std::vector<std::string> names;
        if (s.contains("properties")) {
            if (!s["properties"].is_object()) fail(path, "'properties' must be an object");
            for (const auto& [name, sub] : s["properties"].items()) {
                const std::string value = expr(sub, path + "/properties/" + name, hint + "-" + name, depth + 1);
                props.push_back({name, add_rule(hint + "-" + name + "-kv",
                                                gbnf_literal(json(name).dump()) + " ws \":\" ws " + value)});
                names.push_back(name);
            }
        }
        for (const auto& r : required)
            if (std::find(names.begin(), names.end(), r) == names.end())
                fail(path, "required property '" + r + "' is not among 'properties'");
        // Properties outside `properties`, after them: any value, a schema's, or none.
        std::optional<std::string> extra;
        const json add = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
        if (!(add.is_boolean() && !add.get<bool>())) {
            const std::string value = add.is_boolean() ? builtin("json-value")
                                                       : expr(add, path + "/additionalProperties", hint + "-extra",
                                                              depth + 1);
            extra = add_rule(hint + "-extra-kv", other_key(names, path, hint) + " ws \":\" ws " + value);
        }
        // rest[i]: the members from property i on after one already written; first[i]: the same as the first ones
        // (no comma before, not empty).
        const size_t n = props.size();
        std::vector<std::string> rest(n + 1);
        std::vector<std::optional<std::string>> first(n + 1);
        if (extra) {
            rest[n] = "(ws \",\" ws " + *extra + ")*";
            first[n] = *extra + " " + rest[n];
        }
        for (size_t i = n; i-- > 0;) {
            const std::string& kv = props[i].second;
            const bool req = required.count(props[i].first) > 0;
            const std::string after = rest[i + 1].empty() ? "" : " " + rest[i + 1];
            const std::string sep_kv = "ws \",\" ws " + kv;
            rest[i] = add_rule(hint + "-rest", (req ? sep_kv : "(" + sep_kv + ")?") + after);
            std::string f = kv + after;
            if (!req && first[i + 1]) f += " | " + *first[i + 1];
            first[i] = add_rule(hint + "-first", f);
        }
        if (!first[0]) return add_rule(hint, "\"{\" ws \"}\"");
        return add_rule(hint, required.empty() ? "\"{\" ws (" + *first[0] + " ws)? \"}\""
                                               : "\"{\" ws " + *first[0] + " ws \"}\"");
    }

    // A property name that is none of `names`: one rule per node of their prefix tree, left at the first character
    // that differs. Names are compared as written, so an escape (always in its shortest form) always differs, and
    // names that themselves need escapes are refused.
    std::string other_key(const std::vector<std::string>& names, const std::string& path, const std::string& hint) {
        const std::string key_char = builtin("key-char");
        if (names.empty()) return "\"\\\"\" " + key_char + "* \"\\\"\"";
        struct Node {
            std::map<uint32_t, size_t> children;
            bool end = false;
        };
        std::vector<Node> nodes(1);
        for (const auto& name : names) {
            size_t at = 0;
            std::vector<uint32_t> cps;
            try {
                cps = utf8_code_points(name);
            } catch (const std::invalid_argument&) {
                fail(path, "a property name that is not UTF-8");
            }
            for (uint32_t cp : cps) {
                if (cp < 0x20 || cp == '"' || cp == '\\')
                    fail(path, "property '" + name + "': a name with '\"', '\\' or a control character together "
                               "with additionalProperties is not supported");
                if (!nodes[at].children.count(cp)) {
                    nodes[at].children[cp] = nodes.size();
                    nodes.emplace_back();
                }
                at = nodes[at].children[cp];
            }
            nodes[at].end = true;
        }
        // Rules from the leaves up, so each refers to rules already named.
        std::vector<std::string> rule(nodes.size());
        for (size_t i = nodes.size(); i-- > 0;) {
            std::vector<std::string> alts;
            if (!nodes[i].end) alts.push_back("");  // the name may stop here
            CharSet taken;
            for (const auto& [cp, child] : nodes[i].children) {
                alts.push_back(json_char_gbnf({{cp, cp}}) + " " + rule[child]);
                taken.push_back({cp, cp});
            }
            alts.push_back(json_char_gbnf(complement(taken)) + " " + key_char + "*");
            std::string body;
            for (size_t a = 0; a < alts.size(); ++a) body += (a ? " | " : "") + alts[a];
            rule[i] = add_rule(hint + "-key", body);
        }
        return "\"\\\"\" " + rule[0] + " \"\\\"\"";
    }
};

}  // namespace

std::string json_schema_value_to_gbnf(const nlohmann::ordered_json& schema) {
    std::string text = Converter(schema).run();
    try {
        parse_gbnf(text);  // the bounds of any grammar: a schema whose grammar passes them is refused here
    } catch (const GrammarError& e) {
        throw SchemaError(std::string("schema: its grammar is refused: ") + e.what());
    }
    return text;
}

std::string json_schema_to_gbnf(std::string_view schema_text) {
    if (schema_text.size() > kMaxSchemaBytes)
        throw SchemaError("schema: larger than " + std::to_string(kMaxSchemaBytes) + " bytes");
    json schema;
    try {
        // Nesting is bounded while parsing, before a deep document could exhaust the stack anywhere.
        schema = json::parse(schema_text, [](int depth, json::parse_event_t, json&) {
            if (depth > 2 * kMaxSchemaNesting + 8)
                throw SchemaError("schema: nested more than " + std::to_string(2 * kMaxSchemaNesting + 8) + " deep");
            return true;
        });
    } catch (const json::parse_error& e) {
        throw SchemaError(std::string("schema: not JSON: ") + e.what());
    }
    return json_schema_value_to_gbnf(schema);
}

std::string json_object_gbnf() { return std::string(kJsonObjectGbnf); }

}  // namespace zinc::grammar
