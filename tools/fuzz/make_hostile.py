#!/usr/bin/env python3
"""Writes the hostile GGUF corpus tests/data/gguf/hostile/*.gguf and its manifest EXPECTED.txt
(`<file> <substring of the expected error message>`), using only the standard library.
Also writes tests/fuzz/corpus/report_*.gguf: files the reader accepts but whose `zinc inspect` report is at risk
(escape sequences in names and values, general.file_type out of any integer range, large nested arrays, split keys);
the sanitized corpus runner checks their reports.

usage: python3 tools/fuzz/make_hostile.py
"""
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "gguf" / "hostile"
FUZZ_CORPUS = ROOT / "tests" / "fuzz" / "corpus"

# value type tags
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
# tensor type ids used here
T_F32, T_F16, T_Q4_0, T_Q8_0, T_F64 = 0, 1, 2, 8, 28


def u32(v): return struct.pack("<I", v & 0xFFFFFFFF)
def u64(v): return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)
def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return u64(len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + u32(vtype) + payload


def kv_str(key, s): return kv(key, STR, gstr(s))
def kv_u32(key, v): return kv(key, U32, u32(v))


def arr(elem, count, payload): return u32(elem) + u64(count) + payload


def tinfo(name, ne, ttype, offset, n_dims=None):
    nd = len(ne) if n_dims is None else n_dims
    return gstr(name) + u32(nd) + b"".join(u64(d) for d in ne) + u32(ttype) + u64(offset)


def header(n_tensors, n_kv, version=3, magic=b"GGUF"):
    return magic + u32(version) + u64(n_tensors) + u64(n_kv)


def gguf(kvs=(), tensors=(), data=b"", align=32, n_tensors=None, n_kv=None, version=3, pad=True):
    body = header(len(tensors) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv, version)
    body += b"".join(kvs) + b"".join(tensors)
    if pad:
        body += b"\0" * ((-len(body)) % align)
    return body + data


ARCH = kv_str("general.architecture", "llama")
F32_4 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)


def base_file():
    """A valid file: a long string first (so truncations inside it pass the count plausibility check),
    an array of strings, two F32 tensors."""
    kvs = [kv_str("general.description", "x" * 120), ARCH,
           kv("tokenizer.ggml.tokens", ARR, arr(STR, 3, gstr("a") + gstr("bc") + gstr("def"))),
           kv("llama.block_count", U32, u32(1))]
    tensors = [tinfo("a.weight", [4], T_F32, 0), tinfo("b.weight", [4, 1], T_F32, 32)]
    data = F32_4 + b"\0" * 16 + F32_4 + b"\0" * 16
    return gguf(kvs, tensors, data), len(kvs), len(tensors)


cases = []  # (name, bytes, expected substring)


def add(name, data, expect):
    cases.append((name, data, expect))


# --- header ---
add("empty", b"", "file too small")
add("short_header", b"GGUF" + u32(3) + b"\0" * 8, "file too small")
add("bad_magic", b"GGUX" + base_file()[0][4:], "bad magic")
add("ggjt_magic", b"tjgg" + base_file()[0][4:], "bad magic")
add("version_0", gguf([ARCH], version=0), "unsupported GGUF version 0")
add("version_1", gguf([ARCH], version=1), "unsupported GGUF version 1")
add("version_4", gguf([ARCH], version=4), "unsupported GGUF version 4")
add("version_huge", gguf([ARCH], version=0x7FFF0001), "unsupported GGUF version")
be = b"GGUF" + struct.pack(">I", 3) + struct.pack(">Q", 0) + struct.pack(">Q", 1) + \
    struct.pack(">Q", 20) + b"general.architecture" + struct.pack(">I", STR) + struct.pack(">Q", 5) + b"llama"
add("big_endian_v3", be, "big-endian")
add("big_endian_v2", b"GGUF" + struct.pack(">I", 2) + be[8:], "big-endian")
add("kv_count_huge", header(0, 1 << 62) + ARCH, "implausible kv count")
add("kv_count_negative", header(0, -1) + ARCH, "negative kv count")
add("tensor_count_huge", header(1 << 40, 1) + ARCH, "implausible tensor count")
add("tensor_count_negative", header(-5, 1) + ARCH, "negative tensor count")
add("kv_count_plus_one", gguf([ARCH], n_kv=2, pad=False), "file truncated: key")

# --- truncation at every section of a valid file ---
base, nkv, nt = base_file()
min_needed = 24 + nkv * 14 + nt * 25
kv_end = len(header(0, 0)) + sum(len(k) for k in [kv_str("general.description", "x" * 120), ARCH])
cuts = {
    "trunc_in_first_key_len": 28,
    "trunc_in_first_key": 40,
    "trunc_in_string_value": 130,
    "trunc_in_second_key": kv_end - 20,
    "trunc_in_value_type": kv_end - 9 - 4 - 2,
}
# locate later sections by searching the base file
i_tok = base.index(b"tokenizer.ggml.tokens")
cuts["trunc_in_array_header"] = i_tok + 21 + 4 + 6
cuts["trunc_in_string_array_elem"] = i_tok + 21 + 4 + 12 + 9 + 4
i_bc = base.index(b"llama.block_count")
cuts["trunc_in_u32_value"] = i_bc + 17 + 4 + 2
i_a = base.index(b"a.weight")
cuts["trunc_in_tensor_name"] = i_a + 3
cuts["trunc_in_n_dims"] = i_a + 8 + 2
cuts["trunc_in_ne"] = i_a + 8 + 4 + 5
cuts["trunc_in_tensor_type"] = i_a + 8 + 4 + 8 + 2
cuts["trunc_in_tensor_offset"] = i_a + 8 + 4 + 8 + 4 + 3
i_b = base.index(b"b.weight")
end_infos = i_b + 8 + 4 + 16 + 4 + 8
cuts["trunc_in_second_tensor_info"] = i_b + 8 + 4 + 12
for name, at in cuts.items():
    add(name, base[:at], "implausible" if at < min_needed else "file truncated")
add("trunc_in_padding", base[:end_infos + 3], "data section would start")
data_start = end_infos + (-end_infos) % 32
add("trunc_in_first_tensor_data", base[:data_start + 7], "extends past the end of the file")
add("trunc_in_last_tensor_data", base[:data_start + 32 + 15], "extends past the end of the file")

# --- strings and KV records ---
add("key_len_huge", header(0, 1) + u64(1 << 40) + b"k" * 64, "exceeds the limit")
add("key_len_overflow", header(0, 1) + u64(0xFFFFFFFFFFFFFFF8) + b"k" * 64, "exceeds the limit")
add("key_len_past_eof", header(0, 1) + u64(1000) + b"k" * 64, "file truncated: key length 1000")
add("string_value_len_huge", gguf([kv("general.architecture", STR, u64(1 << 31) + b"llama" * 4)]),
    "exceeds the limit")
add("string_value_past_eof", gguf([kv("general.architecture", STR, u64(500) + b"llama" * 4)], pad=False),
    "file truncated: string value length 500")
add("value_type_13", gguf([ARCH, kv("x.bad", 13, u32(0))]), "invalid value type 13")
add("value_type_huge", gguf([ARCH, kv("x.bad", 0xFFFFFFFF, u32(0))]), "invalid value type 4294967295")
add("array_elem_type_13", gguf([ARCH, kv("x.arr", ARR, arr(13, 1, u32(0)))]), "invalid array element type 13")
add("array_elem_type_huge", gguf([ARCH, kv("x.arr", ARR, arr(0x80000000, 1, u32(0)))]), "invalid array element type")
add("array_count_huge", gguf([ARCH, kv("x.arr", ARR, arr(U8, 1 << 40, b"\0" * 16))]), "array count 1099511627776 exceeds")
add("array_count_max_u64", gguf([ARCH, kv("x.arr", ARR, arr(U64, 0xFFFFFFFFFFFFFFFF, b"\0" * 16))]), "exceeds the limit")
add("array_count_past_eof", gguf([ARCH, kv("x.arr", ARR, arr(U32, 1 << 29, b"\0" * 16))]), "file truncated: array of")
add("string_array_count_past_eof", gguf([ARCH, kv("x.arr", ARR, arr(STR, 1 << 20, gstr("a") * 4))]),
    "file truncated: array of")
add("string_array_elem_len_huge", gguf([ARCH, kv("x.arr", ARR, arr(STR, 2, gstr("a") + u64(1 << 50) + b"zz"))]),
    "string array element length")
nested = arr(U8, 1, b"\1")
for _ in range(10):
    nested = arr(ARR, 1, nested)
add("nested_array_too_deep", gguf([ARCH, kv("x.deep", ARR, nested)]), "nested arrays deeper than")
add("nested_array_bad_inner_type", gguf([ARCH, kv("x.n", ARR, arr(ARR, 1, arr(77, 1, b"\0")))]),
    "invalid array element type 77")
add("nested_array_inner_count_huge", gguf([ARCH, kv("x.n", ARR, arr(ARR, 2, arr(U8, 1, b"\0") + arr(U16, 1 << 33, b"")))]),
    "exceeds the limit")
add("duplicate_key", gguf([ARCH, kv_u32("llama.block_count", 1), kv_u32("llama.block_count", 2)]),
    "duplicate key 'llama.block_count'")
add("empty_key", gguf([ARCH, kv_u32("", 1)]), "empty key")
add("u64_value_truncated", header(0, 1) + gstr("general.x") + u32(U64) + b"\1\2\3", "file truncated: UINT64 value")

# --- alignment ---
T1 = [tinfo("w", [4], T_F32, 0)]
add("alignment_wrong_type", gguf([ARCH, kv("general.alignment", U64, u64(32))], T1, F32_4 + b"\0" * 16),
    "general.alignment has type UINT64, expected UINT32")
add("alignment_string", gguf([ARCH, kv_str("general.alignment", "32")], T1, F32_4 + b"\0" * 16),
    "general.alignment has type STRING")
add("alignment_zero", gguf([ARCH, kv_u32("general.alignment", 0)], T1, F32_4), "is not a non-zero power of two")
add("alignment_not_pow2", gguf([ARCH, kv_u32("general.alignment", 48)], T1, F32_4, align=48),
    "general.alignment 48 is not a non-zero power of two")

# --- tensor infos ---
def tfile(tensors, data=F32_4 + b"\0" * 16, kvs=(ARCH,), **kw):
    return gguf(list(kvs), tensors, data, **kw)


add("tensor_name_too_long", tfile([tinfo("t" * 64, [4], T_F32, 0)]), "tensor name too long (64 bytes")
add("tensor_name_empty", tfile([tinfo("", [4], T_F32, 0)]), "empty tensor name")
add("tensor_name_len_huge", tfile([u64(1 << 45) + b"abc" + b"\0" * 40]), "tensor name length")
add("duplicate_tensor_name", tfile([tinfo("w", [4], T_F32, 0), tinfo("w", [4], T_F32, 32)], F32_4 * 4),
    "duplicate tensor name 'w'")
add("n_dims_5", tfile([tinfo("w", [4, 1, 1, 1, 1], T_F32, 0)]), "n_dims 5 exceeds 4")
add("n_dims_huge", tfile([tinfo("w", [4], T_F32, 0, n_dims=0xFFFFFFFF)]), "n_dims 4294967295 exceeds 4")
add("negative_ne", tfile([tinfo("w", [4, -1], T_F32, 0)]), "negative dimension ne[1] = -1")
add("element_count_overflow", tfile([tinfo("w", [1 << 32, 1 << 32], T_F32, 0)]), "element count overflows")
add("element_count_overflow_4d", tfile([tinfo("w", [1 << 16, 1 << 16, 1 << 16, 1 << 16], T_F32, 0)]),
    "element count overflows")
for tid in (4, 5, 31, 32, 33, 36, 37, 38):
    add(f"type_removed_{tid}", tfile([tinfo("w", [32], tid, 0)]), f"tensor type id {tid} was removed")
add("type_43", tfile([tinfo("w", [4], 43, 0)]), "invalid tensor type id 43")
add("type_huge", tfile([tinfo("w", [4], 0xFFFFFFFF, 0)]), "invalid tensor type id 4294967295")
add("ne0_not_block_multiple", tfile([tinfo("w", [33, 1], T_Q4_0, 0)], b"\0" * 64),
    "ne[0] = 33 is not a multiple of the block size 32")
add("nbytes_overflow", tfile([tinfo("w", [1 << 62], T_F64, 0)]), "byte size overflows")
add("offset_misaligned", tfile([tinfo("w", [4], T_F32, 16)], b"\0" * 64), "offset 16 is not a multiple of the alignment 32")
add("offset_out_of_bounds", tfile([tinfo("w", [4], T_F32, 1 << 20)]), "extends past the end of the file")
add("offset_overflow", tfile([tinfo("w", [4], T_F32, 0xFFFFFFFFFFFFFFE0)]), "extends past the end of the file")
add("nbytes_past_eof", tfile([tinfo("w", [1 << 20], T_F32, 0)]), "extends past the end of the file")
add("tensors_overlap", tfile([tinfo("w", [8], T_F32, 0), tinfo("v", [4], T_F32, 0)], b"\0" * 64),
    "tensors 'w' and 'v' overlap")
add("tensors_overlap_partial", tfile([tinfo("w", [16], T_F32, 0), tinfo("v", [4], T_F32, 32)], b"\0" * 96),
    "overlap")

# --- names from the file in error messages: escaped, never sent raw to the terminal ---
add("duplicate_key_escape", gguf([ARCH, kv_u32("x\x1b[2J", 1), kv_u32("x\x1b[2J", 2)]), r"duplicate key 'x\x1b[2J'")
add("duplicate_tensor_name_escape",
    tfile([tinfo("\x1b]0;t\x07", [4], T_F32, 0), tinfo("\x1b]0;t\x07", [4], T_F32, 32)], F32_4 * 4),
    r"duplicate tensor name '\x1b]0;t\x07'")

# --- memory: a header that would take far more memory than the file is large ---
# 10,000 empty nested arrays: 12 bytes each in the file, about 230 bytes each in memory.
add("memory_nested_empty_arrays", gguf([ARCH, kv("x.nested", ARR, arr(ARR, 10000, arr(U8, 0, b"") * 10000))]),
    "key 'x.nested': the metadata and tensor infos would take more than")

# --- files the reader accepts, for the fuzz corpus: their report must stay safe ---
report_cases = []  # (name, bytes)


def report(name, data):
    report_cases.append((name, data))


T4 = [tinfo("w", [4], T_F32, 0)]
report("escapes", gguf([
    kv_str("general.architecture", b"ll\x9bama"),                    # invalid UTF-8 (a lone C1 byte)
    kv_str("general.name", b"\x1b]0;title\x07\x1b[2Jname"),          # OSC title, clear screen
    kv_str("x.\x1b[31mred", "c1 \u009b[0m bidi \u202e txt \u2028 nl\ttab"),
    kv("x.strings", ARR, arr(STR, 3, gstr(b"\x1b[A") + gstr(b"\xed\xa0\x80") + gstr(b"\xf4\x90\x80\x80"))),
    kv("x.nested_strings", ARR, arr(ARR, 1, arr(STR, 1, gstr(b"\x1bP\x1b\\")))),
], [tinfo(b"\x1b[1mt\x00\xff", [4], T_F32, 0)], F32_4 + b"\0" * 16))
report("file_type_u64_max", gguf([ARCH, kv("general.file_type", U64, u64(-1))], T4, F32_4 + b"\0" * 16))
report("file_type_i64_min", gguf([ARCH, kv("general.file_type", I64, u64(1 << 63))], T4, F32_4 + b"\0" * 16))
report("file_type_negative", gguf([ARCH, kv("general.file_type", I32, u32(-7))], T4, F32_4 + b"\0" * 16))
report("file_type_f32_huge", gguf([ARCH, kv("general.file_type", F32, struct.pack("<f", 3e38))]))
report("file_type_f64_huge", gguf([ARCH, kv("general.file_type", F64, struct.pack("<d", -1e300))]))
report("file_type_f64_nan", gguf([ARCH, kv("general.file_type", F64, struct.pack("<d", float("nan")))]))
report("file_type_string", gguf([ARCH, kv_str("general.file_type", "\x1b[2J15")]))
report("file_type_array", gguf([ARCH, kv("general.file_type", ARR, arr(U32, 2, u32(15) + u32(7)))]))
deep = arr(U8, 3, b"\1\2\3")
for _ in range(8):
    deep = arr(ARR, 2, deep + deep[:4] + u64(0))  # each level: the level below, then an empty array of it
report("nested_arrays", gguf([
    ARCH,
    kv("x.big_inner", ARR, arr(ARR, 1, arr(U8, 3000, bytes(range(256)) * 11 + b"\0" * 184))),
    kv("x.many_empty", ARR, arr(ARR, 200, arr(I64, 0, b"") * 200)),
    kv("x.deep", ARR, deep),
]))
report("split_count_one", gguf([ARCH, kv("split.count", U16, struct.pack("<H", 1)),
                                kv("split.no", U16, struct.pack("<H", 0)),
                                kv("split.tensors.count", I32, u32(1))], T4, F32_4 + b"\0" * 16))
report("split_shard", gguf([ARCH, kv("split.count", U16, struct.pack("<H", 3)),
                            kv("split.no", U16, struct.pack("<H", 1)),
                            kv("split.tensors.count", I32, u32(1))], T4, F32_4 + b"\0" * 16))

OUT.mkdir(parents=True, exist_ok=True)
for old in OUT.glob("*.gguf"):
    old.unlink()
names = set()
with open(OUT / "EXPECTED.txt", "w") as m:
    m.write("# <file> <substring of the error zinc must report>; generated by tools/fuzz/make_hostile.py\n")
    for name, data, expect in cases:
        assert name not in names, name
        names.add(name)
        (OUT / f"{name}.gguf").write_bytes(data)
        m.write(f"{name}.gguf {expect}\n")
print(f"{len(cases)} hostile files in {OUT}")
for old in FUZZ_CORPUS.glob("report_*.gguf"):
    old.unlink()
for name, data in report_cases:
    (FUZZ_CORPUS / f"report_{name}.gguf").write_bytes(data)
print(f"{len(report_cases)} report inputs in {FUZZ_CORPUS}")
