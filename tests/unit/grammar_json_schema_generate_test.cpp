// Generation under JSON Schemas on the committed Brown model: at temperature 1, 20 seeds per schema, every output
// parses as JSON and satisfies the schema, checked field by field here, independently of the converter.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/open_model.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "zinc_binary.h"

namespace {

namespace engine = zinc::engine;
using namespace zinc::grammar;
using json = nlohmann::json;

const std::string kBrown = ZINC_BROWN_DIR "/brown-qwen3-5m-bf16.gguf";

// The text generated for `prompt` under `schema` with `seed`; fails the test where it does not complete.
std::string generate(engine::Session& s, const std::shared_ptr<const Grammar>& g, uint64_t seed) {
    engine::SamplerParams sp;
    sp.temperature = 1.0f;
    sp.seed = seed;
    engine::Sampler sampler(sp);
    Matcher m(g);
    engine::GenerateOptions go;
    go.max_tokens = 400;
    go.grammar = &m;
    std::string text;
    const auto ids = s.tokenizer().encode("The answer is", true, true);
    const auto r = s.generate(ids, go, sampler, [&](int32_t, const std::string& t) {
        text += t;
        return true;
    });
    EXPECT_TRUE(r.stop == engine::GenerateResult::Stop::EndOfGeneration ||
                r.stop == engine::GenerateResult::Stop::Grammar)
        << "seed " << seed << ": " << engine::stop_reason(r.stop) << ": " << text;
    return text;
}

template <class Validate>
void generate_and_validate(const std::string& schema, Validate validate) {
    engine::OpenOptions o;
    o.path = kBrown;
    o.backend.backend = "cpu";
    o.backend.threads = 2;
    o.context = {512, 64};
    auto om = engine::open_model(o);
    const auto g = std::make_shared<const Grammar>(parse_gbnf(json_schema_to_gbnf(schema)));
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        const std::string text = generate(*om.session, g, seed);
        json v;
        try {
            v = json::parse(text);
        } catch (const json::parse_error& e) {
            ADD_FAILURE() << "seed " << seed << ": not JSON: " << text;
            continue;
        }
        SCOPED_TRACE("seed " + std::to_string(seed) + ": " + text);
        validate(v);
    }
}

TEST(JsonSchemaGenerate, ObjectWithRangesEnumsAndFormats) {
    generate_and_validate(R"({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer", "minimum": 18, "maximum": 99},
        "color": {"enum": ["red", "green", "blue"]},
        "day": {"type": "string", "format": "date"},
        "ok": {"type": "boolean"}},
        "required": ["name", "age", "color"], "additionalProperties": false})",
                          [](const json& v) {
                              ASSERT_TRUE(v.is_object());
                              for (const auto& [k, x] : v.items())
                                  EXPECT_TRUE(k == "name" || k == "age" || k == "color" || k == "day" || k == "ok")
                                      << k;
                              ASSERT_TRUE(v.contains("name") && v["name"].is_string());
                              const auto n = v["name"].get<std::string>();
                              size_t chars = 0;  // code points: the bytes that do not continue a UTF-8 sequence
                              for (unsigned char b : n) chars += (b & 0xC0) != 0x80;
                              EXPECT_GE(chars, 1u);
                              EXPECT_LE(chars, 8u);
                              ASSERT_TRUE(v.contains("age") && v["age"].is_number_integer());
                              EXPECT_GE(v["age"].get<int>(), 18);
                              EXPECT_LE(v["age"].get<int>(), 99);
                              ASSERT_TRUE(v.contains("color") && v["color"].is_string());
                              const auto c = v["color"].get<std::string>();
                              EXPECT_TRUE(c == "red" || c == "green" || c == "blue") << c;
                              if (v.contains("day")) {
                                  ASSERT_TRUE(v["day"].is_string());
                                  const std::regex date("[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])");
                                  EXPECT_TRUE(std::regex_match(v["day"].get<std::string>(), date));
                              }
                              if (v.contains("ok")) {
                                  EXPECT_TRUE(v["ok"].is_boolean());
                              }
                          });
}

TEST(JsonSchemaGenerate, RecursiveTreeWithPatterns) {
    generate_and_validate(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2}$"},
        "kids": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/leaf"}}},
        "required": ["id"], "additionalProperties": false},
        "leaf": {"type": "array", "minItems": 1, "maxItems": 3,
                 "items": {"type": "integer", "minimum": -5, "maximum": 5}}}})",
                          [](const json& v) {
                              ASSERT_TRUE(v.is_object());
                              ASSERT_TRUE(v.contains("id") && v["id"].is_string());
                              const std::regex id("[A-Z]{2}-[0-9]{2}");
                              EXPECT_TRUE(std::regex_match(v["id"].get<std::string>(), id));
                              EXPECT_LE(v.size(), 2u);
                              if (!v.contains("kids")) return;
                              ASSERT_TRUE(v["kids"].is_array());
                              EXPECT_LE(v["kids"].size(), 2u);
                              for (const auto& leaf : v["kids"]) {
                                  ASSERT_TRUE(leaf.is_array());
                                  EXPECT_GE(leaf.size(), 1u);
                                  EXPECT_LE(leaf.size(), 3u);
                                  for (const auto& x : leaf) {
                                      ASSERT_TRUE(x.is_number_integer());
                                      EXPECT_GE(x.get<int>(), -5);
                                      EXPECT_LE(x.get<int>(), 5);
                                  }
                              }
                          });
}

TEST(JsonSchemaGenerate, CliRefusesUnsupportedSchemaBeforeLoading) {
    const auto r = zinc::test::run_zinc("run -m '" + kBrown + "' -p 'The' -j '{\"not\": {}}'");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("--json-schema: schema: at the root: 'not' is not supported"), std::string::npos) << r.err;
    const auto both = zinc::test::run_zinc("run -m '" + kBrown + "' -p 'The' -j '{}' --grammar 'root ::= \"a\"'");
    EXPECT_NE(both.status, 0);
}

TEST(JsonSchemaGenerate, CliConstrainsRun) {
    const auto r = zinc::test::run_zinc("run -m '" + kBrown + "' -p 'He said' -n 200 --temp 1 --seed 5 -t 2 "
                                        "--json-schema '{\"type\": \"array\", \"maxItems\": 3, \"items\": "
                                        "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 50}}'");
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(r.out.rfind("He said", 0), 0u) << r.out;
    const json v = json::parse(r.out.substr(7, r.out.size() - 8));
    ASSERT_TRUE(v.is_array());
    EXPECT_LE(v.size(), 3u);
    for (const auto& x : v) EXPECT_TRUE(x.is_number_integer() && x.get<int>() >= 0 && x.get<int>() <= 50) << x;
}

}  // namespace
