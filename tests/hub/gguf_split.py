#!/usr/bin/env python3
"""Splits a GGUF file into shards as llama.cpp's gguf-split does (`<prefix>-%05d-of-%05d.gguf`): the first shard keeps
the metadata, every shard carries split.no, split.count and split.tensors.count, and the tensors are shared out in
file order. zinc has no split command; the hub tests need a real split model to pull and run.

    gguf_split.py IN.gguf OUT_PREFIX COUNT
"""
import struct
import sys

# Sizes of the fixed-size GGUF value types; 8 = string, 9 = array.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError("truncated GGUF file")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64()).decode("utf-8")

    def skip_value(self, t):
        if t in FIXED:
            self.take(FIXED[t])
        elif t == 8:
            self.take(self.u64())
        elif t == 9:
            inner, n = self.u32(), self.u64()
            for _ in range(n):
                self.skip_value(inner)
        else:
            raise ValueError(f"unknown GGUF value type {t}")


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def split_keys(no, count, n_tensors):
    return (gguf_string("split.no") + struct.pack("<IH", 2, no) + gguf_string("split.count") +
            struct.pack("<IH", 2, count) + gguf_string("split.tensors.count") + struct.pack("<Ii", 5, n_tensors))


def split(path, prefix, count):
    data = open(path, "rb").read()
    r = Reader(data)
    if r.take(4) != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file")
    version, n_tensors, n_kv = r.u32(), r.u64(), r.u64()
    alignment = 32
    kv_start = r.pos
    for _ in range(n_kv):
        key = r.string()
        t = r.u32()
        if key == "general.alignment":
            alignment = struct.unpack("<I", r.data[r.pos:r.pos + 4])[0]
        r.skip_value(t)
    kv_bytes = data[kv_start:r.pos]
    tensors = []  # (name, info bytes without the offset, offset)
    for _ in range(n_tensors):
        start = r.pos
        r.string()
        n_dims = r.u32()
        r.take(8 * n_dims + 4)
        head = data[start:r.pos]
        tensors.append((head, r.u64()))
    data_start = (r.pos + alignment - 1) // alignment * alignment
    tensors.sort(key=lambda t: t[1])
    ends = [t[1] for t in tensors[1:]] + [len(data) - data_start]
    per = (len(tensors) + count - 1) // count
    paths = []
    for k in range(count):
        part = list(zip(tensors, ends))[k * per:(k + 1) * per]
        kv = (kv_bytes if k == 0 else b"") + split_keys(k, count, len(tensors))
        out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(part), (n_kv if k == 0 else 0) + 3) + kv)
        offset = 0
        blobs = []
        for (head, start), end in part:
            out += head + struct.pack("<Q", offset)
            blob = data[data_start + start:data_start + end]
            blob += b"\0" * (-len(blob) % alignment)
            blobs.append(blob)
            offset += len(blob)
        out += b"\0" * (-len(out) % alignment)
        for blob in blobs:
            out += blob
        name = f"{prefix}-{k + 1:05d}-of-{count:05d}.gguf"
        with open(name, "wb") as f:
            f.write(out)
        paths.append(name)
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    print("\n".join(split(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
