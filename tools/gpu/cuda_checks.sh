#!/usr/bin/env bash
# Builds zinc for this machine's GPU and runs the CUDA tests (ctest label `cuda`) as parallel shards, since most of
# their time goes into CPU reference computations; with --sanitize every shard runs under compute-sanitizer memcheck.
#
#   tools/gpu/cuda_checks.sh [--sanitize] [--shards N] [--arch 90-real] [--filter GTEST_FILTER] [--timeout S]
#
# Logs: build-gpu/logs/ (one per shard). Exit status 0 when every shard passed (and memcheck found no error).
set -uo pipefail
cd "$(dirname "$0")/../.."
sanitize=0 shards=8 arch=90-real filter="" limit=600
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) sanitize=1; shift ;;
    --shards) shards=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
logs=build-gpu/logs
mkdir -p "$logs"
t0=$(date +%s)
if ! { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DZINC_CUDA=ON &&
       ninja -C build-gpu zinc zinc_cuda_tests; } > "$logs/build.log" 2>&1; then
  grep -E "error|FAILED" "$logs/build.log" | head -40
  exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
tag=$([ $sanitize = 1 ] && echo memcheck || echo tests)
for i in $(seq 0 $((shards - 1))); do
  cmd=(./build-gpu/tests/cuda/zinc_cuda_tests ${filter:+--gtest_filter=$filter})
  [ $sanitize = 1 ] && cmd=(env ZINC_UNDER_MEMCHECK=1 compute-sanitizer --tool memcheck --error-exitcode 99 "${cmd[@]}")
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$limit" "${cmd[@]}" > "$logs/$tag-$i.log" 2>&1 &
done
status=0
for job in $(jobs -p); do wait "$job" || status=1; done
echo "$tag: $(( $(date +%s) - t0 )) s"
cat "$logs"/$tag-*.log | grep -E "^\[  FAILED  \] [^0-9]" | sort -u
echo "passed: $(cat "$logs"/$tag-*.log | grep -c '^\[       OK \]'), failed: $(cat "$logs"/$tag-*.log | grep -c '^\[  FAILED  \] .*(')"
[ $sanitize = 1 ] && grep -h "ERROR SUMMARY" "$logs"/$tag-*.log | sort | uniq -c
exit $status
