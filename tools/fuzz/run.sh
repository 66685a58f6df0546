#!/usr/bin/env bash
# Builds a libFuzzer target with clang in build-fuzz/ and runs it: the GGUF reader (gguf, the default) or the Jinja
# engine (template).
# usage: tools/fuzz/run.sh [--template] [SECONDS] [extra libFuzzer flags...]   (default 60 seconds)
# New interesting inputs go to build-fuzz/corpus-TARGET; crashes to build-fuzz/artifacts (add them to
# tests/fuzz/corpus, or tests/fuzz/templates).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
target=gguf
if [ "${1:-}" = --template ]; then
  target=template
  shift
fi
secs=${1:-60}
shift || true
build=$root/build-fuzz
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DZINC_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j2 "${target}_fuzz"
mkdir -p "$build/corpus-$target" "$build/artifacts"
if [ "$target" = gguf ]; then
  seeds=("$root/tests/fuzz/corpus" "$root/tests/data/gguf")
else
  seeds=("$root/tests/fuzz/templates" "$root/tests/data/chat/templates")
fi
cd "$build"  # libFuzzer writes its jobs' logs (fuzz-N.log) where it runs
exec "$build/tests/fuzz/${target}_fuzz" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$@" "$build/corpus-$target" "${seeds[@]}"
