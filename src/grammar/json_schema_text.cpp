// GBNF text for the pieces of a schema's grammar: literals, characters inside JSON strings and integer ranges
// (json_schema_parts.h).
// GCC 12 warns of overlapping copies in std::string concatenation where there are none (its bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "grammar/json_schema_parts.h"

namespace zinc::grammar::schema {
namespace {

// A code point as a GBNF escape; ASCII letters and digits as themselves.
std::string escape_cp(uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
        return std::string(1, char(cp));
    char buf[16];
    if (cp < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02X", unsigned(cp));
    else if (cp < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04X", unsigned(cp));
    else
        std::snprintf(buf, sizeof buf, "\\U%08X", unsigned(cp));
    return buf;
}

bool contains(const CharSet& set, uint32_t cp) {
    for (const auto& [lo, hi] : set)
        if (cp >= lo && cp <= hi) return true;
    return false;
}

// A hex digit of a \u escape, either case.
std::string hex_digit_gbnf(unsigned d) {
    const char* digits = "0123456789abcdef";
    if (d < 10) return std::string("\"") + digits[d] + "\"";
    return std::string("[") + digits[d] + char(digits[d] - 'a' + 'A') + "]";
}

}  // namespace

std::string gbnf_literal(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", unsigned(c));
            out += buf;
        } else {
            out += char(c);  // UTF-8 bytes pass through: the parser reads the literal as UTF-8
        }
    }
    return out + "\"";
}

std::string json_char_gbnf(const CharSet& set) {
    // The part written as itself: the set less the control characters, '"' and '\'.
    std::string cls;
    for (auto [lo, hi] : set) {
        const auto emit = [&](uint32_t a, uint32_t b) {
            if (a > b) return;
            cls += escape_cp(a);
            if (b != a) cls += "-" + escape_cp(b);
        };
        lo = std::max<uint32_t>(lo, 0x20);
        if (lo > hi) continue;
        // Split around '"' (0x22) and '\' (0x5C).
        uint32_t a = lo;
        for (uint32_t special : {uint32_t('"'), uint32_t('\\')}) {
            if (special >= a && special <= hi) {
                if (special > a) emit(a, special - 1);
                a = special + 1;
            }
        }
        emit(a, hi);
    }
    std::vector<std::string> alts;
    if (!cls.empty()) alts.push_back("[" + cls + "]");
    if (contains(set, '"')) alts.push_back("\"\\\\\\\"\"");  // \"
    if (contains(set, '\\')) alts.push_back("\"\\\\\\\\\"");  // \\ (two backslashes in the text)
    for (uint32_t c = 0; c < 0x20; ++c) {
        if (!contains(set, c)) continue;
        const char* short_form = c == 8 ? "b" : c == 9 ? "t" : c == 10 ? "n" : c == 12 ? "f" : c == 13 ? "r" : nullptr;
        if (short_form) alts.push_back(std::string("\"\\\\") + short_form + "\"");
        alts.push_back("\"\\\\u00" + std::string(1, char('0' + c / 16)) + "\" " + hex_digit_gbnf(c % 16));
    }
    if (alts.empty()) throw std::invalid_argument("a character class that matches no character");
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

namespace {

// Digit strings of one length from a to b (same length, a <= b), each digit position bounded.
std::string same_length(const std::string& a, const std::string& b) {
    if (a.empty()) return "";
    if (a[0] == b[0]) {
        const std::string rest = same_length(a.substr(1), b.substr(1));
        return "\"" + std::string(1, a[0]) + "\"" + (rest.empty() ? "" : " " + rest);
    }
    const size_t n = a.size() - 1;
    const std::string zeros(n, '0'), nines(n, '9');
    const auto any_digits = [&](char lo, char hi) {
        std::string s = lo == hi ? "\"" + std::string(1, lo) + "\"" : "[" + std::string(1, lo) + "-" + hi + "]";
        if (n) s += " [0-9]" + (n > 1 ? "{" + std::to_string(n) + "}" : std::string());
        return s;
    };
    if (a.substr(1) == zeros && b.substr(1) == nines) return any_digits(a[0], b[0]);
    std::vector<std::string> alts;
    char lo = a[0], hi = b[0];
    if (a.substr(1) != zeros) {
        alts.push_back("\"" + std::string(1, a[0]) + "\" (" + same_length(a.substr(1), nines) + ")");
        ++lo;
    }
    const bool b_full = b.substr(1) == nines;
    if (!b_full) --hi;
    if (lo <= hi) alts.push_back(any_digits(lo, hi));
    if (!b_full) alts.push_back("\"" + std::string(1, b[0]) + "\" (" + same_length(zeros, b.substr(1)) + ")");
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

// The non-negative integers from lo to hi (hi missing: any with at most max_digits digits) as alternatives.
void non_negative(uint64_t lo, std::optional<uint64_t> hi, int max_digits, std::vector<std::string>& alts) {
    const std::string a = std::to_string(lo);
    const int last_len = hi ? int(std::to_string(*hi).size()) : max_digits;
    for (int len = int(a.size()); len <= last_len; ++len) {
        std::string from = len == int(a.size()) ? a : "1" + std::string(len - 1, '0');
        std::string to = hi && len == last_len ? std::to_string(*hi) : std::string(len, '9');
        if (!hi && len > int(a.size())) {  // every longer length at once
            alts.push_back("[1-9] [0-9]{" + std::to_string(len - 1) + "," + std::to_string(max_digits - 1) + "}");
            break;
        }
        alts.push_back(same_length(from, to));
    }
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi, int free_digits) {
    if (lo && hi && *lo > *hi) throw std::invalid_argument("the range is empty");
    std::vector<std::string> alts;
    // Negative values: "-" and a magnitude in [max(1, -hi), -lo].
    if (!lo || *lo < 0) {
        const uint64_t mag_lo = hi && *hi < 0 ? uint64_t(-*hi) : 1;
        std::optional<uint64_t> mag_hi;
        if (lo) mag_hi = uint64_t(-*lo);
        std::vector<std::string> neg;
        non_negative(mag_lo, mag_hi, free_digits, neg);
        std::string body;
        for (size_t i = 0; i < neg.size(); ++i) body += (i ? " | " : "") + neg[i];
        alts.push_back("\"-\" (" + body + ")");
    }
    if (!hi || *hi >= 0) {
        const uint64_t from = lo && *lo > 0 ? uint64_t(*lo) : 0;
        std::optional<uint64_t> to;
        if (hi) to = uint64_t(*hi);
        non_negative(from, to, free_digits, alts);
    }
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

}  // namespace zinc::grammar::schema
