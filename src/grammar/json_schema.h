// JSON Schema to GBNF (docs/grammars.md §4): a schema becomes grammar text that parse_gbnf reads, so a schema is
// enforced by the same matcher and token mask as any grammar. Only a stated subset of the keywords is converted; every
// other keyword is refused by name rather than ignored, since an ignored constraint would let through output the
// schema forbids. Annotations (title, description, $schema, $id, $comment, default, examples) are ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace zinc::grammar {

// A schema refused: the message names where (a JSON pointer into the schema) and the keyword or value at fault.
class SchemaError : public std::runtime_error {
public:
    explicit SchemaError(const std::string& what) : std::runtime_error(what) {}
};

// The bounds that keep an untrusted schema's conversion and its grammar small.
inline constexpr size_t kMaxSchemaBytes = size_t(1) << 20;
inline constexpr int kMaxSchemaNesting = 64;        // subschemas within subschemas, $ref hops included
inline constexpr size_t kMaxSchemaNodes = 20000;    // subschemas converted, each $ref target once
inline constexpr size_t kMaxSchemaRefs = 1000;      // distinct $ref targets
inline constexpr size_t kMaxEnumValues = 1000;      // values of one enum
inline constexpr uint32_t kMaxSchemaCount = 1000;   // minItems, maxItems, minLength, maxLength, pattern's {m,n}
inline constexpr int64_t kMaxIntegerBound = 999999999999999999;  // |minimum|, |maximum| of integers: 18 digits
inline constexpr int kMaxFreeIntegerDigits = 18;     // digits of an integer with no bound on that side

// The GBNF grammar of the JSON texts a schema allows (its rule `root`). Throws SchemaError.
std::string json_schema_value_to_gbnf(const nlohmann::ordered_json& schema);
// The same from the schema's JSON text; also refuses text that is not JSON or is beyond the bounds above.
std::string json_schema_to_gbnf(std::string_view schema_text);
// The grammar of any JSON object (OpenAI's response_format json_object): kJsonObjectGbnf (json_object.h).
std::string json_object_gbnf();

}  // namespace zinc::grammar
