#include "gguf/printable.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace zinc::gguf {

namespace {

// Length of the valid UTF-8 sequence starting at s[i] and its code point; 0 if the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i, uint32_t* cp) {
    const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
    const uint8_t b0 = b(0);
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    size_t n = 0;
    uint8_t lo = 0x80, hi = 0xbf;  // allowed range of the second byte (excludes overlong forms and surrogates)
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        n = 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        n = 3;
        if (b0 == 0xe0) lo = 0xa0;
        if (b0 == 0xed) hi = 0x9f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        n = 4;
        if (b0 == 0xf0) lo = 0x90;
        if (b0 == 0xf4) hi = 0x8f;
    } else {
        return 0;
    }
    if (s.size() - i < n || b(1) < lo || b(1) > hi) return 0;
    uint32_t v = b0 & (0xff >> (n + 1));
    for (size_t k = 1; k < n; ++k) {
        if ((b(k) & 0xc0) != 0x80) return 0;
        v = (v << 6) | (b(k) & 0x3f);
    }
    *cp = v;
    return n;
}

// Code points that make a terminal act, or that change how the text around them is laid out.
bool needs_escape(uint32_t cp) {
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string terminal_text(std::string_view s) {
    std::string r;
    size_t from = 0;
    for (size_t i = 0; i <= s.size(); ++i) {
        if (i < s.size() && s[i] != '\n' && s[i] != '\t' && s[i] != '\\') continue;
        r += printable(s.substr(from, i - from));
        if (i < s.size()) r += s[i];
        from = i + 1;
    }
    return r;
}

std::string printable(std::string_view s, size_t max_bytes) {
    size_t cut = s.size();
    if (cut > max_bytes) {
        // Decode up to max_bytes so that a valid sequence is either shown whole or not at all.
        cut = 0;
        while (cut < max_bytes) {
            uint32_t cp = 0;
            const size_t n = std::max<size_t>(utf8_sequence(s, cut, &cp), 1);
            if (cut + n > max_bytes) break;
            cut += n;
        }
    }
    const bool cut_short = cut < s.size();
    s = s.substr(0, cut);
    std::string r;
    r.reserve(s.size() + (cut_short ? 3 : 0));
    char buf[16];
    for (size_t i = 0; i < s.size();) {
        uint32_t cp = 0;
        const size_t n = utf8_sequence(s, i, &cp);
        if (n == 0) {
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<uint8_t>(s[i]));
            r += buf;
            ++i;
            continue;
        }
        if (cp == '\\') {
            r += "\\\\";
        } else if (cp == '\n') {
            r += "\\n";
        } else if (cp == '\r') {
            r += "\\r";
        } else if (cp == '\t') {
            r += "\\t";
        } else if (cp < 0x80 && needs_escape(cp)) {
            std::snprintf(buf, sizeof buf, "\\x%02x", cp);
            r += buf;
        } else if (needs_escape(cp)) {
            std::snprintf(buf, sizeof buf, "\\u{%04x}", cp);
            r += buf;
        } else {
            r.append(s.substr(i, n));
        }
        i += n;
    }
    if (cut_short) r += "...";
    return r;
}

}  // namespace zinc::gguf
