#!/usr/bin/env python3
"""Renders every chat template in tests/data/chat/templates/*.jinja for a set of conversations
exactly as Hugging Face transformers' apply_chat_template does, into
tests/data/chat/template_goldens.json, which the C++ Jinja engine is tested against byte for byte.

The environment is transformers' (utils/chat_template_utils.py, _compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]),
a `tojson` filter that is json.dumps(ensure_ascii=False) with insertion-ordered keys, and the
globals raise_exception and strftime_now. render() gets messages, tools (None when there are
none), documents=None, add_generation_prompt and the extra keyword arguments.

usage: make_template_goldens.py [--extract]
  --extract  first (re)write the templates taken from the fixture GGUFs and committed tokenizer
             configs (see tests/data/chat/templates/README.md)
Cases a template rejects (raise_exception) are left out of the goldens.
"""
import glob
import json
import lzma
import os
import struct
import sys
from datetime import datetime, timezone

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = os.path.join(ROOT, "tests", "data", "chat", "templates")
OUT = os.path.join(ROOT, "tests", "data", "chat", "template_goldens.json")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name, e.g. Zürich."},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "integer", "default": 5}},
                   "required": ["query"]}}}
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}

SYSTEM = {"role": "system", "content": "You are a helpful assistant.\nAnswer briefly."}
CASES = [
    ("single_user", [{"role": "user", "content": "Hello!"}], None, {}),
    ("single_user_no_prompt", [{"role": "user", "content": "Hello!"}], None, {"add_generation_prompt": False}),
    ("system_user", [SYSTEM, {"role": "user", "content": "What is 2+2?"}], None, {}),
    ("multi_turn", [SYSTEM, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
                    {"role": "user", "content": "Tell me a joke."}], None, {}),
    ("multi_turn_closed", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
                           {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Goodbye!"}],
     None, {"add_generation_prompt": False}),
    ("thinking_off", [{"role": "user", "content": "Quick answer: capital of France?"}], None, {"enable_thinking": False}),
    ("thinking_on", [{"role": "user", "content": "Quick answer: capital of France?"}], None, {"enable_thinking": True}),
    ("assistant_reasoning", [{"role": "user", "content": "2+2?"},
                             {"role": "assistant", "content": "<think>\nsimple sum\n</think>\n\n4"},
                             {"role": "user", "content": "and 3+3?"}], None, {}),
    ("whitespace_unicode", [{"role": "user", "content": "  padded\n\ttabbed  "},
                            {"role": "assistant", "content": "héllo 世界 🙂 \"quoted\" \\ back"},
                            {"role": "user", "content": "again"}], None, {}),
    ("tools_offered", [SYSTEM, {"role": "user", "content": "Weather in Paris?"}], [WEATHER, SEARCH], {}),
    ("tools_no_system", [{"role": "user", "content": "Weather in Paris?"}], [WEATHER], {}),
    ("tool_call_and_result", [{"role": "user", "content": "Weather in Paris?"},
                              {"role": "assistant", "content": "", "tool_calls": [CALL]},
                              {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
                               "content": "{\"temperature\": 21, \"sky\": \"sunny\"}"}],
     [WEATHER], {}),
    ("tool_call_then_answer", [{"role": "user", "content": "Weather in Paris?"},
                               {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL]},
                               {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "21C"},
                               {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"},
                               {"role": "assistant", "content": "It is 21C and sunny."},
                               {"role": "user", "content": "Thanks"}],
     [WEATHER], {"enable_thinking": False}),
]
VARIABLES = {"bos_token": "<s>", "eos_token": "</s>"}
# The time strftime_now formats, fixed so that the goldens do not change from day to day; the C++ test passes it too.
NOW = datetime(2026, 1, 15, 9, 30, 0, tzinfo=timezone.utc)
# The special tokens transformers passes come from each model's tokenizer.
TOKENS = {"qwen3": {"bos_token": None, "eos_token": "<|im_end|>"},
          "qwen35": {"bos_token": None, "eos_token": "<|im_end|>"},
          "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>"},
          "gemma4": {"bos_token": "<bos>", "eos_token": "<eos>"},
          "gpt-oss": {"bos_token": "<|startoftext|>", "eos_token": "<|return|>"},
          "llama3.1": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
          "mistral-nemo": {"bos_token": "<s>", "eos_token": "</s>"},
          "deepseek-r1-qwen": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
          "phi3.5": {"bos_token": "<s>", "eos_token": "<|endoftext|>"}}


def read_gguf_string(path, key):
    """The string value of one metadata key of a GGUF file, or None."""
    with open(path, "rb") as f:
        def u(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def s():
            return f.read(u("Q")).decode("utf-8")
        sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

        def val(t):
            if t == 8:
                return s()
            if t == 9:
                et, n = u("I"), u("Q")
                return [val(et) for _ in range(n)]
            return u(sizes[t])
        if f.read(4) != b"GGUF":
            raise ValueError(path + " is not a GGUF file")
        u("I"), u("Q")
        for _ in range(u("Q")):
            k, t = s(), u("I")
            v = val(t)
            if k == key:
                return v
    return None


def extract():
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "tokenizers", "*", "tokenizer_config.json.xz"))):
        name = os.path.basename(os.path.dirname(path))
        found[name] = json.loads(lzma.open(path).read())["chat_template"]
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "*", "*-f32.gguf"))):
        t = read_gguf_string(path, "tokenizer.chat_template")
        if t is not None and t not in found.values():
            found[os.path.basename(os.path.dirname(path))] = t
    for name, text in found.items():
        with open(os.path.join(TEMPLATES, name + ".jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(text)


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    if "--extract" in sys.argv:
        extract()
    env = environment()
    goldens = []
    for path in sorted(glob.glob(os.path.join(TEMPLATES, "*.jinja"))):
        name = os.path.basename(path)[:-len(".jinja")]
        with open(path, encoding="utf-8", newline="") as f:
            template = env.from_string(f.read())
        for case, messages, tools, extra in CASES:
            extra = dict(extra)
            add_generation_prompt = extra.pop("add_generation_prompt", True)
            variables = {**VARIABLES, **TOKENS.get(name, {}), **extra}
            try:
                text = template.render(messages=messages, tools=tools, documents=None,
                                       add_generation_prompt=add_generation_prompt, **variables)
            except jinja2.exceptions.TemplateError as e:
                print(f"{name}/{case}: rejected ({e}), left out", file=sys.stderr)
                continue
            goldens.append({"template": name, "case": case, "messages": messages, "tools": tools,
                            "add_generation_prompt": add_generation_prompt, "variables": variables,
                            "now": int(NOW.timestamp()), "expected": text})
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(goldens)} cases written to {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
