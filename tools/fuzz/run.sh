#!/usr/bin/env bash
# Builds the libFuzzer target for the GGUF reader with clang in build-fuzz/ and runs it.
# usage: tools/fuzz/run.sh [SECONDS] [extra libFuzzer flags...]   (default 60 seconds)
# New interesting inputs go to build-fuzz/corpus; crashes to build-fuzz/artifacts (add them to tests/fuzz/corpus).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
shift || true
build=$root/build-fuzz
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DZINC_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j2 gguf_fuzz
mkdir -p "$build/corpus" "$build/artifacts"
exec "$build/tests/fuzz/gguf_fuzz" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$@" \
  "$build/corpus" "$root/tests/fuzz/corpus" "$root/tests/data/gguf"
