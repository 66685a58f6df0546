#!/usr/bin/env python3
"""Independent reference tokenizations for zinc's tokenizer tests (tests/unit/tokenizer_reference_test.cpp).

This is NOT Hugging Face tokenizers (not installed here): it is a small independent model of the same pipeline,
written from the published definitions, using the third-party `regex` module (which supports \\p{..} classes,
(?i:..) and lookahead like HF's Oniguruma) for pre-tokenization and a naive O(n^2) lowest-rank-first BPE:

    added-token split (longest first) -> NFC (the HF Qwen normalizer) -> Split(regex,
    Isolated) -> GPT-2 byte mapping -> BPE -> ids

For Tekken (Mistral) there is no NFC step, and a piece that is itself a token is that token without merging
(ignore_merges, as its tokenizer.json and llama.cpp's loader say).

Usage (from the repository root):
    python3 tests/data/tokenizer/make_reference_cases.py > tests/data/tokenizer/qwen3_reference_cases.json
    python3 tests/data/tokenizer/make_reference_cases.py tekken > tests/data/tokenizer/tekken_reference_cases.json
"""
import json
import lzma
import random
import sys
import unicodedata
from pathlib import Path

import regex

HERE = Path(__file__).resolve().parent


def bytes_to_unicode():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


class Ref:
    def __init__(self, tok):
        self.vocab = dict(tok["model"]["vocab"])
        self.added = {a["content"]: (a["id"], a["special"]) for a in tok["added_tokens"]}
        for c, (i, _) in self.added.items():
            self.vocab[c] = i
        self.ranks = {}
        for r, m in enumerate(tok["model"]["merges"]):
            a, b = m if isinstance(m, list) else m.split(" ", 1)
            self.ranks.setdefault((a, b), r)
        steps = tok["pre_tokenizer"]["pretokenizers"]
        self.pattern = regex.compile(steps[0]["pattern"]["Regex"])
        self.b2u = bytes_to_unicode()
        self.cache = {}
        self.ignore_merges = bool(tok["model"].get("ignore_merges"))

    def bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        syms = list(word)
        while len(syms) > 1:
            best = None
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            syms[i:i + 2] = [syms[i] + syms[i + 1]]
        ids = [self.vocab[s] for s in syms]
        self.cache[word] = ids
        return ids

    def encode_text(self, text, nfc):
        if nfc:
            text = unicodedata.normalize("NFC", text)
        out = []
        for m in self.pattern.finditer(text):
            piece = m.group(0)
            mapped = "".join(self.b2u[b] for b in piece.encode("utf-8"))
            out += self.bpe(mapped)
        return out

    def encode(self, text, parse_special, nfc=False):
        # llama.cpp-style partition: longest added token first; CONTROL ones only with parse_special.
        frags = [text]
        for content in sorted(self.added, key=len, reverse=True):
            tid, special = self.added[content]
            is_control = special or (content.startswith("<|") and content.endswith("|>"))
            if is_control and not parse_special:
                continue
            nxt = []
            for f in frags:
                if isinstance(f, int):
                    nxt.append(f)
                    continue
                parts = f.split(content)
                for k, p in enumerate(parts):
                    if k:
                        nxt.append(tid)
                    if p:
                        nxt.append(p)
            frags = nxt
        out = []
        for f in frags:
            out += [f] if isinstance(f, int) else self.encode_text(f, nfc)
        return out


def fixed_cases():
    return [
        "Hello world",
        "Hello, world! How are you today?",
        "I've been told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL",
        "don't DON'T can't it's IT'S they're we've I'm you'll he'd",
        "3 33 333 3333 33333 1234567890 3.14159 1,000,000 -42 +7",
        "a  b   c    d     e",
        "   leading and trailing spaces   ",
        "line one\nline two\n\nline four\r\nwindows\r\n\r\n",
        "tabs\there\t\tand\t \tmixed \t\n\t end",
        "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n",
        "我想在apple工作1314151天～",
        "日本語のテキストです。中文也可以！한국어 텍스트",
        "🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙",
        "कान्तिपुर नेपाली हिन्दी",
        "កាន់តែពិសេសអាច😁 ?",
        "нещо на Български, Русский текст",
        "Ελληνικά και العربية و עברית",
        "''''''```````\"\"\"\"......!!!!!!??????",
        "------======= ***** ##### $$$ %%% ^^^",
        "def foo(x):\n    return x * 2  # comment\n\nclass Bar:\n\tpass\n",
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHi!<|im_end|>",
        "text<|endoftext|>more text<|im_end|>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
        "a<|im_start|>b<|im_start|><|im_start|>c",
        "<|im_start",
        "x\u00a0y\u2003z\u3000w",
        "Caf\u00e9 na\u00efve r\u00e9sum\u00e9",
        "Cafe\u0301 decomposed",
        "ÀÉÎÕÜ ß ẞ İı ſ",
        "  \n",
        " ",
        "\n",
        "",
        "'s's'S 's",
        "hello\u2028world\u2029end\u0085x",
        "$100.00 is 10% of $1,000.00!",
        "https://example.com/path?query=1&b=2#frag",
        "email@example.com, user_name-123",
        "Mr. Smith's dog's bone. Isn't it?",
        "ＦＵＬＬ　ＷＩＤＴＨ　１２３",
        "١٢٣ ٤٥٦ arabic digits, Ⅻ roman, ½ fraction, ² superscript",
        "\U0001F468\u200d\U0001F469\u200d\U0001F467 family \U0001F1FA\U0001F1F8 flag",
    ]


def random_cases(n, seed):
    rnd = random.Random(seed)
    pools = [
        " ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", "'", "'s", "'LL", "a", "Z", "é", "ß", "ж", "中", "文",
        "の", "한", "ก", "ั", "्", "क", "0", "7", "١", "½", "!", "?", ".", ",", "-", "_", "(", ")", "{", "}", "/",
        "\\", "\"", "#", "$", "€", "😀", "🦙", "\u200d", "\ufe0f", "hello", "World", "THE", "don't", "123456",
        "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>", "\u0301", "\U00010400", "\x7f", "\x00",
    ]
    out = []
    for _ in range(n):
        k = rnd.randint(1, 25)
        out.append("".join(rnd.choice(pools) for _ in range(k)))
    return out


def nfc_cases(n, seed):
    """[input, NFC(input)] pairs that exercise decomposition, reordering and composition."""
    rnd = random.Random(seed)
    pool = ["a", "e", "o", "u", "A", "E", "ı", "Å", "é", "ǖ", "ṩ", "\u0300", "\u0301", "\u0302", "\u0308",
            "\u0323", "\u0327", "\u0338", "\u0345", "\u05b4", "\u0915", "\u093c", "\u0958", "\u0b47",
            "\u0b3e", "\u1100", "\u1161", "\u11a8", "\uac00", "\uac01", "\u212b", "\u2126", "\u1e9b",
            "\u0344", "\uf900", "\U0001d15e", "\U00011099", "\U000110ba", "=", " ", "x"]
    out = []
    for _ in range(n):
        t = "".join(rnd.choice(pool) for _ in range(rnd.randint(1, 8)))
        out.append([t, unicodedata.normalize("NFC", t)])
    return out


# Split regexes per pre-tokenizer (docs/formats.md §4.7), for the scanner cross-check.
PRE_REGEXES = {
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen35": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "gpt-4o": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "tekken": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "gpt-2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}


def pretokenize_cases(n, seed):
    rnd = random.Random(seed)
    pool = [" ", "  ", "\n", "\r", "\t", "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b", "'", "'s", "'S", "'ll",
            "'Re", "a", "Z", "É", "ß", "ǅ", "ʰ", "ж", "中", "の", "ก", "ั", "्", "क", "ा", "\u0301", "0", "7", "١",
            "½", "Ⅻ", "!", "?", ".", "/", "//", "-", "(", "😀", "\u200d", "\ufe0f", "Hello", "WORLD", "NASA",
            "don't", "123456", "x"]
    texts = ["".join(rnd.choice(pool) for _ in range(rnd.randint(1, 20))) for _ in range(n)]
    return {pre: [[t, regex.findall(p, t)] for t in texts] for pre, p in PRE_REGEXES.items()}


def tekken():
    tok = json.loads(lzma.open(HERE.parents[2] / "data" / "tokenizers" / "tekken" / "tokenizer.json.xz").read())
    ref = Ref(tok)
    texts = fixed_cases() + [t.replace("<|im_start|>", "[INST]").replace("<|im_end|>", "[/INST]")
                             for t in fixed_cases()[20:24]] + random_cases(400, 4321)
    cases = [{"text": t, "ids": ref.encode(t, parse_special=False), "ids_special": ref.encode(t, parse_special=True)}
             for t in texts]
    json.dump({
        "description": "Tekken (Mistral Nemo's tokenizer.json) reference tokenizations from make_reference_cases.py "
                       f"(python regex module {regex.__version__} + naive BPE with ignore_merges; llama.cpp-style "
                       "added-token split; no normalizer)",
        "pre": "tekken",
        "cases": cases,
    }, sys.stdout, ensure_ascii=True, indent=0)
    sys.stdout.write("\n")


def main():
    if sys.argv[1:] == ["tekken"]:
        return tekken()
    tok = json.loads(lzma.open(HERE.parents[2] / "data" / "tokenizers" / "qwen3" / "tokenizer.json.xz").read())
    ref = Ref(tok)
    texts = fixed_cases() + random_cases(400, 1234)
    cases = []
    for t in texts:
        cases.append({
            "text": t,
            "ids": ref.encode(t, parse_special=False, nfc=True),
            "ids_special": ref.encode(t, parse_special=True, nfc=True),
        })
    json.dump({
        "description": "Qwen3 reference tokenizations from make_reference_cases.py (python regex module "
                       f"{regex.__version__} + naive BPE; llama.cpp-style added-token split; NFC from Python "
                       f"{sys.version.split()[0]} / Unicode {unicodedata.unidata_version})",
        "pre": "qwen2",
        "cases": cases,
        "nfc_cases": nfc_cases(300, 99),
        "pretokenize_cases": pretokenize_cases(300, 7),
    }, sys.stdout, ensure_ascii=True, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
