#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace zinc::tokenizer::unicode {

namespace {

// Flags of U+0000..U+FFFF, expanded from the range table on first use (128 KiB) so that lookups in the
// Basic Multilingual Plane are one load; the rest is a binary search.
struct BmpTable {
    std::array<uint16_t, 0x10000> f{};
    BmpTable() {
        for (size_t i = 0; i < kRangeTableSize; ++i) {
            const uint32_t lo = kRangeTable[i].first;
            if (lo > 0xFFFF) break;
            const uint32_t hi = i + 1 < kRangeTableSize ? std::min<uint32_t>(kRangeTable[i + 1].first, 0x10000) : 0x10000;
            for (uint32_t c = lo; c < hi; ++c) f[c] = kRangeTable[i].flags;
        }
    }
};

const BmpTable& bmp() {
    static const BmpTable t;
    return t;
}

}  // namespace

uint16_t flags(uint32_t cp) {
    if (cp <= 0xFFFF) return bmp().f[cp];
    if (cp > kMaxCodepoint) return 0;
    const RangeEntry* end = kRangeTable + kRangeTableSize;
    const RangeEntry* it =
        std::upper_bound(kRangeTable, end, cp, [](uint32_t c, const RangeEntry& e) { return c < e.first; });
    return (it - 1)->flags;  // kRangeTable[0].first == 0, so it > kRangeTable
}

Decoded decode_utf8(std::string_view s, size_t pos) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    const unsigned char b0 = p[pos];
    if (b0 < 0x80) return {b0, 1, true, false};
    uint32_t len = 0, cp = 0, min = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) { len = 2; cp = b0 & 0x1F; min = 0x80; }
    else if (b0 >= 0xE0 && b0 <= 0xEF) { len = 3; cp = b0 & 0x0F; min = 0x800; }
    else if (b0 >= 0xF0 && b0 <= 0xF4) { len = 4; cp = b0 & 0x07; min = 0x10000; }
    else return {kReplacement, 1, false, false};
    for (uint32_t k = 1; k < len; ++k) {
        if (pos + k >= n) return {kReplacement, 1, false, true};
        const unsigned char b = p[pos + k];
        if ((b & 0xC0) != 0x80) return {kReplacement, 1, false, false};
        cp = (cp << 6) | (b & 0x3F);
        // Reject overlong / surrogate / too-large forms as soon as the second byte shows them,
        // so that "incomplete" is only reported for prefixes that can still become valid.
        if (k == 1) {
            if (len == 3 && ((b0 == 0xE0 && b < 0xA0) || (b0 == 0xED && b > 0x9F))) return {kReplacement, 1, false, false};
            if (len == 4 && ((b0 == 0xF0 && b < 0x90) || (b0 == 0xF4 && b > 0x8F))) return {kReplacement, 1, false, false};
        }
    }
    if (cp < min || cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) return {kReplacement, 1, false, false};
    return {cp, len, true, false};
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacement;
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string to_utf8(uint32_t cp) {
    std::string s;
    append_utf8(s, cp);
    return s;
}

std::vector<uint32_t> decode_utf8_all(std::string_view s, std::vector<size_t>* offsets) {
    std::vector<uint32_t> cps;
    cps.reserve(s.size());
    if (offsets) {
        offsets->clear();
        offsets->reserve(s.size() + 1);
    }
    for (size_t pos = 0; pos < s.size();) {
        const Decoded d = decode_utf8(s, pos);
        cps.push_back(d.cp);
        if (offsets) offsets->push_back(pos);
        pos += d.len;
    }
    if (offsets) offsets->push_back(s.size());
    return cps;
}

size_t complete_prefix_length(std::string_view s) {
    // Only the last 3 bytes can start an unfinished sequence.
    const size_t start = s.size() > 3 ? s.size() - 3 : 0;
    for (size_t pos = start; pos < s.size(); ++pos) {
        const auto b = static_cast<unsigned char>(s[pos]);
        if ((b & 0xC0) == 0x80) continue;  // continuation byte: not a sequence start
        const Decoded d = decode_utf8(s, pos);
        if (d.incomplete) return pos;
        pos += d.len - 1;
    }
    return s.size();
}

std::string sanitize_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t pos = 0; pos < s.size();) {
        const Decoded d = decode_utf8(s, pos);
        if (d.valid) out.append(s.substr(pos, d.len));
        else append_utf8(out, kReplacement);
        pos += d.len;
    }
    return out;
}

bool valid_utf8(std::string_view s) {
    for (size_t pos = 0; pos < s.size();) {
        const Decoded d = decode_utf8(s, pos);
        if (!d.valid) return false;
        pos += d.len;
    }
    return true;
}

}  // namespace zinc::tokenizer::unicode

// ---------------------------------------------------------------------------------------------------------------
// Normalization (NFC)

namespace zinc::tokenizer::unicode {

namespace {

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
    if (cp >= kSBase && cp < kSBase + kSCount) {
        const uint32_t s = cp - kSBase;
        out.push_back(kLBase + s / kNCount);
        out.push_back(kVBase + (s % kNCount) / kTCount);
        if (s % kTCount) out.push_back(kTBase + s % kTCount);
        return;
    }
    const DecompEntry* end = kDecomp + kDecompSize;
    const DecompEntry* it = std::lower_bound(kDecomp, end, cp, [](const DecompEntry& e, uint32_t c) { return e.cp < c; });
    if (it != end && it->cp == cp) {
        out.insert(out.end(), kDecompData + it->offset, kDecompData + it->offset + it->len);
    } else {
        out.push_back(cp);
    }
}

// Primary composite of (a, b), or 0.
uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
        return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
        return a + (b - kTBase);
    const ComposeEntry* end = kCompose + kComposeSize;
    const ComposeEntry* it = std::lower_bound(kCompose, end, std::pair{a, b}, [](const ComposeEntry& e, std::pair<uint32_t, uint32_t> k) {
        return e.first != k.first ? e.first < k.first : e.second < k.second;
    });
    return (it != end && it->first == a && it->second == b) ? it->composite : 0;
}

}  // namespace

uint8_t combining_class(uint32_t cp) {
    if (cp < 0x300) return 0;
    const CccRange* end = kCombiningClass + kCombiningClassSize;
    const CccRange* it = std::upper_bound(kCombiningClass, end, cp, [](uint32_t c, const CccRange& r) { return c < r.first; });
    if (it == kCombiningClass) return 0;
    --it;
    return cp <= it->last ? it->ccc : 0;
}

std::vector<uint32_t> nfc(const std::vector<uint32_t>& cps) {
    std::vector<uint32_t> d;
    d.reserve(cps.size() + 8);
    for (uint32_t c : cps) decompose(c, d);
    // Canonical ordering: stable sort of every run of non-starters by combining class.
    std::vector<uint8_t> cc(d.size());
    for (size_t i = 0; i < d.size(); ++i) cc[i] = combining_class(d[i]);
    for (size_t i = 0; i < d.size();) {
        if (cc[i] == 0) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < d.size() && cc[j] != 0) ++j;
        if (j - i > 1) {
            std::vector<std::pair<uint8_t, uint32_t>> run;
            for (size_t k = i; k < j; ++k) run.emplace_back(cc[k], d[k]);
            std::stable_sort(run.begin(), run.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
            for (size_t k = i; k < j; ++k) {
                cc[k] = run[k - i].first;
                d[k] = run[k - i].second;
            }
        }
        i = j;
    }
    // Canonical composition.
    if (d.empty()) return d;
    size_t starter = 0, out = 1;
    int last_cc = cc[0] == 0 ? 0 : 256;  // a leading non-starter blocks everything after it
    bool have_starter = cc[0] == 0;
    for (size_t i = 1; i < d.size(); ++i) {
        const uint32_t ch = d[i];
        const int ch_cc = cc[i];
        const uint32_t comp = have_starter ? compose(d[starter], ch) : 0;
        if (comp && (last_cc < ch_cc || last_cc == 0)) {
            d[starter] = comp;
            continue;
        }
        if (ch_cc == 0) {
            starter = out;
            have_starter = true;
        }
        last_cc = ch_cc;
        d[out] = ch;
        cc[out] = static_cast<uint8_t>(ch_cc);
        ++out;
    }
    d.resize(out);
    return d;
}

std::string nfc_utf8(std::string_view s) {
    bool high = false;
    for (size_t pos = 0; pos < s.size();) {
        const Decoded dd = decode_utf8(s, pos);
        if (!dd.valid) return std::string(s);
        if (dd.cp >= 0x300 && (flags(dd.cp) & kNfcCheck)) high = true;
        pos += dd.len;
    }
    if (!high) return std::string(s);
    std::string out;
    out.reserve(s.size());
    for (uint32_t c : nfc(decode_utf8_all(s))) append_utf8(out, c);
    return out;
}

}  // namespace zinc::tokenizer::unicode
