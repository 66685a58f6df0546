// Strings from a file made safe to show on a terminal.
#pragma once

#include <string>
#include <string_view>

namespace zinc::gguf {

// `s` with everything a terminal could act on written out as text: valid printable UTF-8 is kept as is; C0 and C1
// control characters and DEL become \n, \r, \t or \xNN (C0, DEL) and \u{NNNN} (C1); code points that reorder or
// break lines (bidirectional overrides and isolates, U+2028, U+2029) become \u{NNNN}; bytes that are not valid
// UTF-8 (stray continuation bytes, overlong forms, surrogates, truncated sequences, past U+10FFFF) become \xNN.
// A backslash is doubled, so every escape in the result came from this function.
// With max_bytes, only the first max_bytes bytes of s are shown (cut before a UTF-8 sequence that would not fit
// whole), followed by "..." when s is longer.
// Use it for any name or value read from a GGUF file before it reaches a terminal or an error message.
std::string printable(std::string_view s, size_t max_bytes = std::string_view::npos);

// A message that may quote untrusted text (an error naming a file's value, a template's raise_exception) made safe
// for a terminal: as printable(), but newlines and tabs stay and backslashes are not doubled, so that zinc's own
// messages read as written. The last line of defence: values should already have gone through printable().
std::string terminal_text(std::string_view s);

}  // namespace zinc::gguf
