#!/usr/bin/env python3
"""Generates src/tokenizer/unicode_tables.cpp: code point property ranges for the tokenizer's pre-tokenizers.

Uses only the standard library (`unicodedata`), so the Unicode version is the one of the Python that runs it;
it is recorded in the generated file. Run from the repository root:

    python3 tools/unicode/make_unicode_tables.py            # writes src/tokenizer/unicode_tables.cpp
    python3 tools/unicode/make_unicode_tables.py --check    # exits 1 if the committed file is out of date

Tables:
- kRangeTable: general-category / White_Space flags;
- kCombiningClass: canonical combining class ranges (ccc != 0);
- kDecomp / kDecompData: full canonical decompositions (NFD of one code point; Hangul syllables excluded, they
  are decomposed algorithmically);
- kCompose: primary composites (pair -> composite, sorted by pair), i.e. canonical pair decompositions that NFC
  recomposes (composition exclusions and singletons are left out).

The flags table is a sorted list of (first code point, flags) entries covering U+0000..U+10FFFF: each entry's flags
hold up to (not including) the next entry's first code point. Flag bits are defined in src/tokenizer/unicode.h
and must match FLAGS below.
"""
import argparse
import sys
import unicodedata
from pathlib import Path

# Must match zinc::tokenizer::unicode::Flag in src/tokenizer/unicode.h.
FLAGS = {
    "L": 1 << 0,    # letter (Lu Ll Lt Lm Lo)
    "N": 1 << 1,    # number (Nd Nl No)
    "P": 1 << 2,    # punctuation
    "S": 1 << 3,    # symbol
    "M": 1 << 4,    # mark
    "Z": 1 << 5,    # separator (Zs Zl Zp)
    "C": 1 << 6,    # other (Cc Cf Cs Co Cn)
    "WS": 1 << 7,   # White_Space property (regex \s)
    "Lu": 1 << 8,
    "Ll": 1 << 9,
    "Lt": 1 << 10,
    "Lm": 1 << 11,
    "Lo": 1 << 12,
    "Nd": 1 << 13,
    "NFC": 1 << 14,  # may change under NFC: has a canonical decomposition, ccc != 0, or composes with a previous
                     # code point (second element of a primary composite, Hangul V/T jamo)
}

# The White_Space property (PropList.txt); unicodedata does not expose it. Unchanged since Unicode 6.3.
WHITE_SPACE = set(range(0x09, 0x0E)) | {0x20, 0x85, 0xA0, 0x1680} | set(range(0x2000, 0x200B)) | {
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000}


def nfc_sensitive() -> set:
    out = set()
    for cp in range(0x110000):
        c = chr(cp)
        if unicodedata.combining(c) or unicodedata.normalize("NFD", c) != c:
            out.add(cp)
        dm = unicodedata.decomposition(c)
        if dm and not dm.startswith("<"):
            parts = [int(x, 16) for x in dm.split()]
            if len(parts) == 2 and unicodedata.normalize("NFC", c) == c:
                out.add(parts[1])
    out |= set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))  # Hangul V and T jamo
    return out


NFC_SENSITIVE = nfc_sensitive()


def flags_of(cp: int) -> int:
    cat = unicodedata.category(chr(cp))
    f = FLAGS[cat[0]] if cat[0] in FLAGS else 0
    if cat in FLAGS:
        f |= FLAGS[cat]
    if cp in WHITE_SPACE:
        f |= FLAGS["WS"]
    if cp in NFC_SENSITIVE:
        f |= FLAGS["NFC"]
    return f


def is_hangul_syllable(cp: int) -> bool:
    return 0xAC00 <= cp <= 0xD7A3


def rows(items, per_row):
    out = []
    for k in range(0, len(items), per_row):
        out.append("    " + ",".join(items[k:k + per_row]) + ",")
    return out


def nfc_tables() -> list:
    # Canonical combining classes as ranges of equal class.
    ccc = []
    for cp in range(0x110000):
        c = unicodedata.combining(chr(cp))
        if c and ccc and ccc[-1][1] == cp - 1 and ccc[-1][2] == c:
            ccc[-1][1] = cp
        elif c:
            ccc.append([cp, cp, c])
    # Full canonical decompositions.
    decomp = []
    data = []
    for cp in range(0x110000):
        if is_hangul_syllable(cp):
            continue
        d = unicodedata.normalize("NFD", chr(cp))
        if d != chr(cp):
            decomp.append((cp, len(data), len(d)))
            data += [ord(x) for x in d]
    # Primary composites.
    comp = []
    for cp in range(0x110000):
        dm = unicodedata.decomposition(chr(cp))
        if not dm or dm.startswith("<"):
            continue
        parts = [int(x, 16) for x in dm.split()]
        if len(parts) == 2 and unicodedata.normalize("NFC", chr(cp)) == chr(cp):
            comp.append((parts[0], parts[1], cp))
    comp.sort()
    lines = ["const CccRange kCombiningClass[] = {"]
    lines += rows([f"{{0x{a:X},0x{b:X},{c}}}" for a, b, c in ccc], 6)
    lines += ["};", f"const size_t kCombiningClassSize = {len(ccc)};", ""]
    lines += ["const DecompEntry kDecomp[] = {"]
    lines += rows([f"{{0x{cp:X},{off},{n}}}" for cp, off, n in decomp], 6)
    lines += ["};", f"const size_t kDecompSize = {len(decomp)};", ""]
    lines += ["const uint32_t kDecompData[] = {"]
    lines += rows([f"0x{x:X}" for x in data], 12)
    lines += ["};", ""]
    lines += ["const ComposeEntry kCompose[] = {"]
    lines += rows([f"{{0x{a:X},0x{b:X},0x{c:X}}}" for a, b, c in comp], 5)
    lines += ["};", f"const size_t kComposeSize = {len(comp)};", ""]
    return lines


def generate() -> str:
    entries = []
    prev = None
    for cp in range(0x110000):
        f = flags_of(cp)
        if f != prev:
            entries.append((cp, f))
            prev = f
    lines = [
        "// GENERATED by tools/unicode/make_unicode_tables.py -- do not edit.",
        f"// Python {sys.version.split()[0]}, Unicode {unicodedata.unidata_version} (unicodedata); "
        f"{len(entries)} ranges.",
        "#include \"tokenizer/unicode.h\"",
        "",
        "namespace zinc::tokenizer::unicode {",
        "",
        f"const char* const kUnicodeVersion = \"{unicodedata.unidata_version}\";",
        "",
        f"const RangeEntry kRangeTable[] = {{",
    ]
    row = []
    for cp, f in entries:
        row.append(f"{{0x{cp:X},0x{f:X}}}")
        if len(row) == 8:
            lines.append("    " + ",".join(row) + ",")
            row = []
    if row:
        lines.append("    " + ",".join(row) + ",")
    lines += [
        "};",
        f"const size_t kRangeTableSize = {len(entries)};",
        "",
    ]
    lines += nfc_tables()
    lines += [
        "}  // namespace zinc::tokenizer::unicode",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="src/tokenizer/unicode_tables.cpp")
    ap.add_argument("--check", action="store_true", help="compare with the existing file instead of writing")
    args = ap.parse_args()
    text = generate()
    out = Path(args.out)
    if args.check:
        if not out.is_file() or out.read_text() != text:
            print(f"{out} is out of date (or made with another Unicode version)", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
