#!/usr/bin/env python3
"""Writes the small reference GGUF files in tests/data/gguf/golden/ with gguf-py's GGUFWriter, and next to each
the JSON that gguf-py's gguf_dump.py prints for it (<file>.dump.json), so unit tests can compare zinc's view of the
files against gguf-py's without Python.

usage: PYTHONPATH=<llama.cpp>/gguf-py /usr/bin/python3 tools/gguf/make_golden.py
gguf-py is an outside tool used only when regenerating; the committed files are what the tests use.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGUFValueType as VT, GGMLQuantizationType as QT

root = Path(__file__).resolve().parents[2]
out = root / "tests" / "data" / "gguf" / "golden"
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(1234)


def all_types():
    w = gguf.GGUFWriter(str(out / "all_types.gguf"), "testarch")
    w.add_name("all value types")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.5)
    w.add_bool("t.bool_true", True)
    w.add_bool("t.bool_false", False)
    w.add_string("t.string", "hello, wörld")
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", 3.140625)
    for key, vt, vals in [
        ("a.u8", VT.UINT8, [0, 1, 255]),
        ("a.i8", VT.INT8, [-128, 0, 127]),
        ("a.u16", VT.UINT16, [0, 65535]),
        ("a.i16", VT.INT16, [-32768, 32767]),
        ("a.u32", VT.UINT32, [1, 2, 3, 4000000000]),
        ("a.i32", VT.INT32, [-1, 0, 1]),
        ("a.f32", VT.FLOAT32, [0.25, -1.5, 1e10]),
        ("a.bool", VT.BOOL, [True, False, True]),
        ("a.string", VT.STRING, ["a", "", "bc", "ünïcödé"]),
        ("a.u64", VT.UINT64, [0, 18446744073709551615]),
        ("a.i64", VT.INT64, [-9223372036854775808, 9223372036854775807]),
        ("a.f64", VT.FLOAT64, [0.125, -2.0]),
    ]:
        w.add_key_value(key, vals, VT.ARRAY, sub_type=vt)
    w.add_key_value("a.nested", [[1, 2, 3], [4], [5, 6]], VT.ARRAY, sub_type=VT.ARRAY)
    w.add_key_value("a.long", list(range(100)), VT.ARRAY, sub_type=VT.INT32)
    w.add_tensor("f32.weight", rng.standard_normal((3, 4)).astype(np.float32))
    w.add_tensor("f16.bias", rng.standard_normal(8).astype(np.float16))
    q8 = rng.integers(0, 256, size=(2, 2 * 34), dtype=np.uint8)  # 2 rows of 64 elements = 2 Q8_0 blocks each
    q8[:, 0::34] = 0  # keep the f16 scales finite
    q8[:, 1::34] = 0x3C
    w.add_tensor("q8.weight", q8, raw_dtype=QT.Q8_0)
    w.add_tensor("i32.ids", np.arange(5, dtype=np.int32))
    w.add_tensor("f32.cube", rng.standard_normal((2, 3, 4, 5)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny_llama():
    w = gguf.GGUFWriter(str(out / "tiny_llama.gguf"), "llama")
    w.add_custom_alignment(64)
    w.add_name("tiny llama")
    w.add_file_type(7)
    w.add_quantization_version(2)
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    tokens = ["<unk>", "<s>", "</s>"] + [f"tok{i}" for i in range(197)]
    w.add_token_list(tokens)
    w.add_token_scores([float(-i) for i in range(len(tokens))])
    w.add_token_types([2, 3, 3] + [1] * (len(tokens) - 3))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_tensor("token_embd.weight", rng.standard_normal((200, 64)).astype(np.float16))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(64, dtype=np.float32))
    q8 = np.zeros((64, 2 * 34), dtype=np.uint8)
    q8[:, 1::34] = 0x3C
    w.add_tensor("blk.0.attn_q.weight", q8, raw_dtype=QT.Q8_0)
    w.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def split():
    w = gguf.GGUFWriter(str(out / "split.gguf"), "llama", split_max_tensors=2)
    w.add_name("split model")
    w.add_block_count(1)
    for i in range(5):
        w.add_tensor(f"t{i}.weight", np.full((2, 8), i, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


all_types()
tiny_llama()
split()

dump = Path(gguf.__file__).resolve().parent / "scripts" / "gguf_dump.py"
for f in sorted(out.glob("*.gguf")):
    j = subprocess.run([sys.executable, str(dump), "--json", "--json-array", f.name], cwd=out, check=True,
                       capture_output=True, text=True, env=dict(os.environ)).stdout
    (out / (f.name + ".dump.json")).write_text(json.dumps(json.loads(j), indent=1, sort_keys=False) + "\n")
    print(f"{f.name}: {f.stat().st_size} bytes")
