#!/usr/bin/env bash
# Runs `zinc bench` and llama.cpp's llama-bench on the same GGUF, in the same run, with the same
# prompt and generation lengths and repetitions, and prints both tables.
#
#   bench/side_by_side.sh MODEL.gguf [-p 512] [-n 128] [-r 5] [-t THREADS]
#
# LLAMA_BENCH must point at a llama-bench binary (built separately; llama.cpp is not part of zinc).
# ZINC defaults to build/zinc; LLAMA_BENCH_ARGS adds flags to llama-bench.
set -euo pipefail
model=${1:?usage: bench/side_by_side.sh MODEL.gguf [-p N] [-n N] [-r N] [-t N]}
shift
p=512 n=128 r=5 t=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    -p) p=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -r) r=$2; shift 2 ;;
    -t) t=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
zinc=${ZINC:-$(dirname "$0")/../build/zinc}
: "${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench binary}"

echo "## $(basename "$model") — $(date -u +%Y-%m-%d) — zinc $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $t threads"
echo
echo "### zinc"
"$zinc" bench -m "$model" -p "$p" -n "$n" -r "$r" -t "$t"
echo
echo "### llama.cpp"
# shellcheck disable=SC2086  # LLAMA_BENCH_ARGS holds extra flags, e.g. "-ngl 99 -fa 1"
"$LLAMA_BENCH" -m "$model" -p "$p" -n "$n" -r "$r" -t "$t" ${LLAMA_BENCH_ARGS:-}
