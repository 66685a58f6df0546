// What `zinc inspect` prints about a GGUF model: a human-readable report and a JSON document.
// They live here rather than in the command so that tests and the sanitized fuzz corpus runner can call them.
#pragma once

#include <string>
#include <string_view>

#include "gguf/split.h"

namespace zinc::gguf {

// Header, metadata (arrays and long strings abbreviated), tensors and totals by type, as aligned tables.
// Every string from the file goes through printable(), so the report is safe to send to a terminal.
std::string describe_text(const Model& m, std::string_view path);

// The same as one JSON document, in the shape tests/unit/gguf_golden_check.h compares with gguf-py's dump.
// The output is ASCII: the JSON library escapes control and non-ASCII characters (\uXXXX) and replaces bytes
// that are not UTF-8 with U+FFFD. Arrays of more than 64 values (all levels counted) are summarized.
std::string describe_json(const Model& m, std::string_view path);

}  // namespace zinc::gguf
