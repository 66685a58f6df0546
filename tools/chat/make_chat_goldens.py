#!/usr/bin/env python3
"""Renders chat conversations with a model's real Jinja chat template, the way Hugging Face's
apply_chat_template does (jinja2 with trim_blocks and lstrip_blocks), into a JSON golden file.

usage: make_chat_goldens.py TOKENIZER_CONFIG_JSON[.xz] OUT.json [CASES]
CASES: qwen3 (default) or gemma3 (strictly alternating user/assistant turns, as Gemma's template requires).
"""
import json
import lzma
import sys

import jinja2

CASES = [
    {"messages": [{"role": "user", "content": "Hello!"}]},
    {"messages": [{"role": "user", "content": "Hello!"}], "enable_thinking": False},
    {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}]},
    {"messages": [{"role": "user", "content": "2+2?"},
                  {"role": "assistant", "content": "<think>\nsimple\n</think>\n\n4"},
                  {"role": "user", "content": "and 3+3?"}]},
    {"messages": [{"role": "user", "content": "2+2?"},
                  {"role": "assistant", "content": "<think>\nsimple\n</think>\n\n4"}],
     "add_generation_prompt": False},
    {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "a"},
                  {"role": "assistant", "content": "b"}, {"role": "system", "content": "late system"},
                  {"role": "user", "content": "multi\nline\n\ttabbed"}], "enable_thinking": False},
    {"messages": [{"role": "user", "content": "weather?"},
                  {"role": "assistant", "content": "checking"},
                  {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "20C"}]},
    {"messages": [{"role": "user", "content": "unicode: héllo 世界 🙂"}]},
    {"messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
                  {"role": "user", "content": "q2"}, {"role": "assistant", "content": "<think>r2</think>a2"}],
     "add_generation_prompt": False},
]

GEMMA3_CASES = [
    {"messages": [{"role": "user", "content": "Hello!"}]},
    {"messages": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "What is 2+2?"}]},
    {"messages": [{"role": "user", "content": "  padded\n"}, {"role": "assistant", "content": "\n reply "}],
     "add_generation_prompt": False},
    {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "multi\nline\n\ttabbed"}]},
    {"messages": [{"role": "user", "content": "unicode: héllo 世界 🙂"}, {"role": "assistant", "content": "ok"},
                  {"role": "user", "content": "again"}]},
]


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def main():
    path, out = sys.argv[1], sys.argv[2]
    cases = GEMMA3_CASES if len(sys.argv) > 3 and sys.argv[3] == "gemma3" else CASES
    raw = lzma.open(path).read() if path.endswith(".xz") else open(path, "rb").read()
    template = json.loads(raw)["chat_template"]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)
    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(template)
    goldens = []
    for case in cases:
        kwargs = {"messages": case["messages"], "add_generation_prompt": case.get("add_generation_prompt", True),
                  "bos_token": "<bos>"}
        if "enable_thinking" in case:
            kwargs["enable_thinking"] = case["enable_thinking"]
        goldens.append({**case, "add_generation_prompt": kwargs["add_generation_prompt"],
                        "enable_thinking": case.get("enable_thinking", True), "expected": tmpl.render(**kwargs)})
    with open(out, "w") as f:
        json.dump(goldens, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
