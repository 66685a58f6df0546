// JSON Schema to grammar (grammar/json_schema.h): for each schema, hand-written instances the converted grammar must
// take and ones it must refuse, read by the same matcher generation uses; keywords outside the supported set refused
// by name; bounds on untrusted schemas.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace {

using namespace zinc::grammar;

std::shared_ptr<const Grammar> schema_grammar(const std::string& schema) {
    return std::make_shared<const Grammar>(parse_gbnf(json_schema_to_gbnf(schema)));
}

bool full_match(const std::shared_ptr<const Grammar>& g, const std::string& s) {
    Matcher m(g);
    return m.advance_bytes(s) && m.can_end();
}

void check(const std::string& schema, const std::vector<std::string>& ok, const std::vector<std::string>& bad) {
    std::shared_ptr<const Grammar> g;
    try {
        g = schema_grammar(schema);
    } catch (const std::exception& e) {
        FAIL() << schema << "\n" << e.what();
    }
    for (const auto& s : ok) EXPECT_TRUE(full_match(g, s)) << schema << "\nshould take: " << s;
    for (const auto& s : bad) EXPECT_FALSE(full_match(g, s)) << schema << "\nshould refuse: " << s;
}

std::string error_of(const std::string& schema) {
    try {
        json_schema_to_gbnf(schema);
    } catch (const SchemaError& e) {
        return e.what();
    }
    ADD_FAILURE() << "accepted: " << schema;
    return "";
}

TEST(JsonSchema, Primitives) {
    check(R"({"type": "null"})", {"null"}, {"nul", "0", "\"null\""});
    check(R"({"type": "boolean"})", {"true", "false"}, {"1", "True", "null"});
    check(R"({"type": "integer"})", {"0", "-7", "123456789012345678"},
          {"01", "-0", "1.0", "+1", "1e3", "1234567890123456789"});
    check(R"({"type": "number"})", {"0", "-0.5", "3.25e-7", "1E+10", "-12"}, {".5", "1.", "01", "1e", "--1"});
    check(R"({"type": "string"})", {"\"\"", "\"a b\"", "\"caf\xC3\xA9\"", "\"q\\\"\\\\\\n\\u00e9\\/\""},
          {"\"a", "\"\x01\"", "\"\\x\"", "a"});
    check(R"({"type": ["integer", "null"]})", {"3", "null"}, {"\"3\"", "true"});
    check(R"({})", {"{\"a\": [1, {}]}", "1", "\"x\"", "null"}, {"{", "[1,]"});
    check(R"(true)", {"[]", "false"}, {""});
}

TEST(JsonSchema, EnumAndConst) {
    check(R"({"enum": ["red", "green", 3, null, {"a": [1]}]})", {"\"red\"", "\"green\"", "3", "null", "{\"a\":[1]}"},
          {"\"blue\"", "\"Red\"", "4", "\"3\""});
    check(R"({"type": "string", "enum": ["a", 1, "b"]})", {"\"a\"", "\"b\""}, {"1"});
    check(R"({"const": "x\"y"})", {"\"x\\\"y\""}, {"\"x\"", "\"xy\""});
}

TEST(JsonSchema, ObjectsInSchemaOrder) {
    const std::string person = R"({"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name"], "additionalProperties": false})";
    check(person,
          {"{\"name\": \"Ann\"}", "{\"name\":\"Ann\",\"age\":3}", "{\"name\": \"A\", \"tags\": [\"x\", \"y\"]}",
           "{\"name\": \"A\", \"age\": 1, \"tags\": []}", "{\n  \"name\": \"A\",\n  \"age\": 1\n}"},
          {"{}", "{\"age\": 3}", "{\"age\": 3, \"name\": \"A\"}", "{\"name\": \"A\", \"x\": 1}",
           "{\"name\": \"A\",}", "{\"name\": 1}", "{\"name\": \"A\"      \n}"});
    // Optional properties only: the empty object, any subset in order.
    check(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
               "additionalProperties": false})",
          {"{}", "{ }", "{\"a\": 1}", "{\"b\": 2}", "{\"a\": 1, \"b\": 2}"},
          {"{\"b\": 2, \"a\": 1}", "{,}", "{\"c\": 1}"});
}

TEST(JsonSchema, AdditionalProperties) {
    // Absent (true): any other name after the declared ones, never a declared name again.
    check(R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})",
          {"{\"id\": 1}", "{\"id\": 1, \"i\": \"x\", \"idx\": [], \"\": null}"},
          {"{\"id\": 1, \"id\": 2}", "{\"i\": 1}"});
    check(R"({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}})",
          {"{}", "{\"a\": 1, \"b\": 22}"}, {"{\"a\": -1}", "{\"a\": \"x\"}"});
    check(R"({"type": "object"})", {"{}", "{\"k\": {\"x\": [true]}}"}, {"[]", "{\"k\"}"});
}

TEST(JsonSchema, Arrays) {
    check(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
          {"[1, 2]", "[1,2,3]", "[ 1 , 2 ]"}, {"[]", "[1]", "[1,2,3,4]", "[1,\"a\"]"});
    check(R"({"type": "array", "items": {"type": "boolean"}})", {"[]", "[ ]", "[true]", "[true, false, true]"},
          {"[true,]", "[,]"});
    check(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})",
          {"[]", "[\"a\"]", "[\"a\", 1]"}, {"[1]", "[\"a\", 1, 2]"});
    check(R"({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "null"}, "minItems": 2})",
          {"[\"a\", null]", "[\"a\", null, null]"}, {"[\"a\"]", "[null, null]"});
    // Nested arrays: a 2 by at most 2 matrix of small integers.
    check(R"({"type": "array", "minItems": 2, "maxItems": 2,
               "items": {"type": "array", "maxItems": 2, "items": {"type": "integer", "minimum": 0, "maximum": 9}}})",
          {"[[],[]]", "[[1, 2], [3]]"}, {"[[1, 2, 3], []]", "[[10], []]", "[[]]"});
}

TEST(JsonSchema, StringLengths) {
    check(R"({"type": "string", "minLength": 2, "maxLength": 3})",
          {"\"ab\"", "\"abc\"", "\"\\n\\u0041\"", "\"\xC3\xA9\xC3\xA9\""},
          {"\"a\"", "\"abcd\"", "\"\""});
}

TEST(JsonSchema, Patterns) {
    check(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3,4}$"})", {"\"AB-123\"", "\"ZZ-0000\""},
          {"\"AB-12\"", "\"ab-123\"", "\"AB-12345\"", "\"xAB-123\""});
    check(R"({"type": "string", "pattern": "^(cat|dog)s?$"})", {"\"cat\"", "\"dogs\""}, {"\"cow\"", "\"cats!\""});
    // Unanchored: the pattern may match anywhere.
    check(R"({"type": "string", "pattern": "ab+"})", {"\"ab\"", "\"xxabbby\""}, {"\"a\"", "\"ba\""});
    check(R"({"type": "string", "pattern": "^a.c$"})", {"\"abc\"", "\"a\\\"c\"", "\"a\xC3\xA9" "c\""},
          {"\"a\\nc\"", "\"ac\""});
    check(R"({"type": "string", "pattern": "^[^a-z]+$"})", {"\"AB\"", "\"\\\\\"", "\"\\t\""}, {"\"Ab\"", "\"\""});
    check(R"({"type": "string", "pattern": "^(?:\\w+\\.)*\\w+$"})", {"\"a.b_c.d\"", "\"x\""}, {"\"a..b\"", "\".a\""});
}

TEST(JsonSchema, Formats) {
    check(R"({"type": "string", "format": "date"})", {"\"2024-02-29\"", "\"1999-12-31\""},
          {"\"2024-13-01\"", "\"2024-00-10\"", "\"2024-1-01\"", "\"2024-01-32\""});
    check(R"({"type": "string", "format": "time"})", {"\"23:59:59Z\"", "\"08:00:00.123+05:30\""},
          {"\"24:00:00Z\"", "\"08:00:00\"", "\"8:00:00Z\""});
    check(R"({"format": "date-time"})", {"\"2024-05-01T12:30:00Z\"", "\"2024-05-01T12:30:00.5-01:00\""},
          {"\"2024-05-01 12:30:00Z\"", "\"2024-05-01\""});
    check(R"({"type": "string", "format": "uuid"})", {"\"123e4567-e89b-12d3-a456-426614174000\""},
          {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""});
    check(R"({"type": "string", "format": "email"})", {"\"ann.lee+x@example.co.uk\"", "\"a@b.io\""},
          {"\"a@b\"", "\"@b.io\"", "\"a..b@c.io\"", "\"a@-b.io\""});
}

TEST(JsonSchema, IntegerRanges) {
    // Every integer in and around each range, so each digit-range grammar is exact.
    const struct {
        const char* schema;
        int lo, hi;
    } cases[] = {{R"({"type": "integer", "minimum": 0, "maximum": 9})", 0, 9},
                 {R"({"type": "integer", "minimum": 7, "maximum": 123})", 7, 123},
                 {R"({"type": "integer", "minimum": -250, "maximum": -17})", -250, -17},
                 {R"({"type": "integer", "minimum": -42, "maximum": 1009})", -42, 1009},
                 {R"({"type": "integer", "exclusiveMinimum": 99, "exclusiveMaximum": 1000})", 100, 999},
                 {R"({"type": "integer", "minimum": 10.5, "maximum": 20.5})", 11, 20}};
    for (const auto& c : cases) {
        const auto g = schema_grammar(c.schema);
        for (int v = -1100; v <= 1100; ++v)
            EXPECT_EQ(full_match(g, std::to_string(v)), v >= c.lo && v <= c.hi) << c.schema << " " << v;
        EXPECT_FALSE(full_match(g, "-0"));
    }
    check(R"({"type": "integer", "minimum": 5})", {"5", "6", "99", "100000000000000000"}, {"4", "-5", "0"});
    check(R"({"type": "integer", "maximum": -3})", {"-3", "-1000"}, {"-2", "0", "3"});
}

TEST(JsonSchema, AnyOfOneOfAllOf) {
    check(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})", {"1", "\"a\""},
          {"\"ab\"", "null"});
    check(R"({"oneOf": [{"const": 1}, {"const": 2}]})", {"1", "2"}, {"3"});
    check(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"properties": {"b": {"type": "boolean"}}}]})",
          {"{\"a\": 1}", "{\"a\": 1, \"b\": true}", "{\"a\": 1, \"c\": 2}"},
          {"{\"b\": true}", "{\"a\": 1, \"b\": 3}"});
    // additionalProperties false beside allOf allows only the properties beside it (none): nothing satisfies it.
    EXPECT_NE(error_of(R"({"allOf": [{"properties": {"a": {}}, "required": ["a"]}], "additionalProperties": false})")
                  .find("required property 'a' is not allowed by every part"),
              std::string::npos);
}

TEST(JsonSchema, RefsAndRecursion) {
    // A tree: each node a value and its children, recursively.
    const std::string tree = R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
        "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["v"], "additionalProperties": false}}})";
    check(tree, {"{\"v\": 1}", "{\"v\": 1, \"kids\": [{\"v\": 2}, {\"v\": 3, \"kids\": [{\"v\": 4, \"kids\": []}]}]}"},
          {"{\"v\": 1, \"kids\": [{}]}", "{\"kids\": []}", "{\"v\": 1, \"kids\": [{\"v\": \"x\"}]}"});
    check(R"({"definitions": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/definitions/n"}})",
          {"[1, 2]"}, {"[\"1\"]"});
    // The root itself: a list of lists.
    check(R"({"type": "array", "items": {"$ref": "#"}, "maxItems": 2})", {"[]", "[[], [[]]]"}, {"[1]", "[[], [], []]"});
}

TEST(JsonSchema, AnnotationsIgnored) {
    check(R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "title": "T",
               "description": "d", "default": 1, "examples": [1], "type": "integer"})",
          {"1"}, {"\"1\""});
}

TEST(JsonSchema, UnsupportedKeywordsRefusedByName) {
    const struct {
        const char* schema;
        const char* part;
    } cases[] = {
        {R"({"not": {"type": "string"}})", "'not' is not supported"},
        {R"({"type": "integer", "if": {"minimum": 0}, "then": {"maximum": 3}})", "'if' is not supported"},
        {R"({"type": "object", "dependentSchemas": {"a": {}}})", "'dependentSchemas' is not supported"},
        {R"({"type": "object", "patternProperties": {"^x": {}}})", "'patternProperties' is not supported"},
        {R"({"type": "array", "uniqueItems": true})", "'uniqueItems' is not supported"},
        {R"({"type": "integer", "multipleOf": 3})", "'multipleOf' is not supported"},
        {R"({"$ref": "https://example.com/s.json"})", "'$ref' to 'https://example.com/s.json' is not supported"},
        {R"({"$ref": "#/$defs/missing"})", "no such definition"},
        {R"({"properties": {"a": {"minProperties": 1}}})", "at /properties/a: 'minProperties' is not supported"},
        {R"({"type": "string", "format": "ipv4"})", "format 'ipv4' is not supported"},
        {R"({"type": "string", "pattern": "^(?=a)b$"})", "lookahead"},
        {R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
        {R"({"type": "string", "pattern": "\\bword"})", "word boundary"},
        {R"({"type": "string", "pattern": "a*?"})", "lazy"},
        {R"({"type": "string", "pattern": "a^b"})", "anchor '^'"},
        {R"({"type": "number", "minimum": 0})", "'minimum' on a number is not supported"},
        {R"({"type": "string", "minimum": 0})", "'minimum' does not apply"},
        {R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})", "'allOf': 'type' cannot be merged"},
        {R"({"type": "array", "items": [{"type": "string"}]})", "'items' as an array"},
        {R"({"type": "foo"})", "unknown type 'foo'"},
        {R"(false)", "allows no value"},
        {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "required property 'b'"},
    };
    for (const auto& c : cases) {
        const std::string e = error_of(c.schema);
        EXPECT_NE(e.find(c.part), std::string::npos) << c.schema << "\n" << e;
    }
}

TEST(JsonSchema, Bounds) {
    EXPECT_NE(error_of("{\"type\": ").find("not JSON"), std::string::npos);
    EXPECT_NE(error_of(R"({"type": "string", "maxLength": 100000})").find("'maxLength' above 1000"), std::string::npos);
    EXPECT_NE(error_of(R"({"type": "integer", "minimum": -1e19})").find("beyond"), std::string::npos);
    std::string many = R"({"enum": [)";
    for (int i = 0; i <= int(kMaxEnumValues); ++i) many.append(i ? "," : "").append(std::to_string(i));
    EXPECT_NE(error_of(many + "]}").find("more than 1000 values"), std::string::npos);
    std::string deep;
    for (int i = 0; i < 200; ++i) deep += R"({"type": "array", "items": )";
    deep += "{}";
    for (int i = 0; i < 200; ++i) deep += "}";
    EXPECT_NE(error_of(deep).find("deep"), std::string::npos);
    // A $ref to itself and nothing else: left recursion, refused by the grammar's own check.
    EXPECT_NE(error_of(R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})").find("grammar is refused"),
              std::string::npos);
    EXPECT_NE(error_of(std::string(kMaxSchemaBytes + 1, ' ')).find("larger than"), std::string::npos);
}

TEST(JsonSchema, AnyJsonObject) {
    const auto g = std::make_shared<const Grammar>(parse_gbnf(json_object_gbnf()));
    for (const char* ok : {"{}", "{\"a\": [1, 2.5, null, {\"b\": \"\\u00e9\"}]}", "{\n  \"x\": true\n}"})
        EXPECT_TRUE(full_match(g, ok)) << ok;
    for (const char* bad : {"[]", "1", "{\"a\": 1,}", "{\"a\" 1}", "{'a': 1}"}) EXPECT_FALSE(full_match(g, bad)) << bad;
}

}  // namespace
