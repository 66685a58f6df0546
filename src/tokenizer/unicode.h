// Unicode support for the tokenizer: code point properties (generated tables) and UTF-8 helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::tokenizer::unicode {

// Property bits of a code point; must match FLAGS in tools/unicode/make_unicode_tables.py.
enum Flag : uint16_t {
    kLetter = 1 << 0,       // \p{L}
    kNumber = 1 << 1,       // \p{N}
    kPunct = 1 << 2,        // \p{P}
    kSymbol = 1 << 3,       // \p{S}
    kMark = 1 << 4,         // \p{M}
    kSeparator = 1 << 5,    // \p{Z}
    kOther = 1 << 6,        // \p{C} (also unassigned code points)
    kWhitespace = 1 << 7,   // White_Space, regex \s
    kUpper = 1 << 8,        // \p{Lu}
    kLower = 1 << 9,        // \p{Ll}
    kTitle = 1 << 10,       // \p{Lt}
    kModifier = 1 << 11,    // \p{Lm}
    kOtherLetter = 1 << 12, // \p{Lo}
    kDigit = 1 << 13,       // \p{Nd}
    kNfcCheck = 1 << 14,    // may change under NFC (decomposes, ccc != 0, or composes with what precedes it)
};

struct RangeEntry {
    uint32_t first;  // first code point of the range; it runs up to the next entry's first
    uint16_t flags;
};
// Generated (unicode_tables.cpp).
extern const RangeEntry kRangeTable[];
extern const size_t kRangeTableSize;
extern const char* const kUnicodeVersion;

// Normalization data (generated).
struct CccRange {
    uint32_t first, last;
    uint8_t ccc;
};
struct DecompEntry {
    uint32_t cp;
    uint32_t offset;  // into kDecompData
    uint32_t len;
};
struct ComposeEntry {
    uint32_t first, second, composite;
};
extern const CccRange kCombiningClass[];
extern const size_t kCombiningClassSize;
extern const DecompEntry kDecomp[];
extern const size_t kDecompSize;
extern const uint32_t kDecompData[];
extern const ComposeEntry kCompose[];
extern const size_t kComposeSize;

inline constexpr uint32_t kReplacement = 0xFFFD;
inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Property flags of a code point (0 for values above U+10FFFF).
uint16_t flags(uint32_t cp);
inline bool is_letter(uint32_t cp) { return flags(cp) & kLetter; }
inline bool is_number(uint32_t cp) { return flags(cp) & kNumber; }
inline bool is_mark(uint32_t cp) { return flags(cp) & kMark; }
inline bool is_whitespace(uint32_t cp) { return flags(cp) & kWhitespace; }

// One step of strict UTF-8 decoding at s[pos] (pos < s.size()).
struct Decoded {
    uint32_t cp;     // the code point, or U+FFFD when !valid
    uint32_t len;    // bytes consumed: the sequence length, or 1 for an invalid byte
    bool valid;
    bool incomplete; // !valid because s ends inside an otherwise valid sequence (a streaming decoder should wait)
};
// Rejects overlong forms, surrogates, code points above U+10FFFF and stray continuation bytes.
Decoded decode_utf8(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of cp (U+FFFD for surrogates or values above U+10FFFF).
void append_utf8(std::string& out, uint32_t cp);
std::string to_utf8(uint32_t cp);

// Decodes a whole string; invalid bytes become U+FFFD (one per byte). If offsets is given, it receives the byte
// offset of every code point plus a final s.size().
std::vector<uint32_t> decode_utf8_all(std::string_view s, std::vector<size_t>* offsets = nullptr);

// Length of the longest prefix of s that does not end inside a possibly still incomplete UTF-8 sequence:
// everything before it can be emitted, the rest may be completed by more bytes.
size_t complete_prefix_length(std::string_view s);

// Replaces every invalid byte of s by U+FFFD.
std::string sanitize_utf8(std::string_view s);

// True when s is complete, valid UTF-8 (strict, as decode_utf8): nothing sanitize_utf8 would replace.
bool valid_utf8(std::string_view s);

// Canonical combining class of a code point (0 for starters).
uint8_t combining_class(uint32_t cp);
// Unicode Normalization Form C of a code point sequence / of valid UTF-8 text.
std::vector<uint32_t> nfc(const std::vector<uint32_t>& cps);
// NFC of UTF-8 text. Text that is not valid UTF-8 is returned unchanged (HF tokenizers never sees such input).
// Fast path: text without kNfcCheck code points is already in NFC and is returned as is.
std::string nfc_utf8(std::string_view s);

// Simple ASCII-only case fold.
inline uint32_t ascii_lower(uint32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; }

}  // namespace zinc::tokenizer::unicode
