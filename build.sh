#!/usr/bin/env bash
# zinc's one entry point for building:
#   bash build.sh run    set up, build (all CUDA architectures), generate text with the built-in model
#   bash build.sh test   set up, build the test configuration, run every test this machine can run, then the tests of
#                        the untrusted inputs again in a build with ASan and UBSan
#   bash build.sh build  set up and build only
set -euo pipefail
cd "$(dirname "$0")"

what=${1:-run}
jobs=$(nproc)

bash scripts/setup.sh

configure_and_build() {  # dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja "$@"
  cmake --build "$dir" -j "$jobs"
}

case "$what" in
  build|run)
    configure_and_build build -DCMAKE_BUILD_TYPE=Release -DZINC_TESTS=OFF
    if [ "$what" = run ]; then
      ./build/zinc devices
      # The built-in model: 5M parameters trained on the Brown corpus (data/brown/README.md); sampled, and -v
      # prints the seed that reproduces the text.
      ./build/zinc run -m data/brown/brown-qwen3-5m-bf16.gguf -p "The jury said" -n 80 --temp 0.8 --top-k 40 -v
    fi
    ;;
  test)
    # One CUDA architecture keeps nvcc's time down on small machines; the GPU tests target sm_90.
    configure_and_build build-test -DCMAKE_BUILD_TYPE=Release -DZINC_WERROR=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90-real
    (cd build-test && ctest --output-on-failure -j "$jobs" --timeout 1500)
    # The tests of what reads untrusted input (templates, JSON, GGUF files, HTTP clients) again, everything built with
    # AddressSanitizer and UndefinedBehaviorSanitizer: a leak, an overflow or undefined behaviour fails them.
    # (Without -Werror: the sanitizers' instrumentation makes GCC warn about the standard library's own code.)
    cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DZINC_SANITIZE=ON
    cmake --build build-sanitize -j "$jobs" --target zinc zinc_sanitize_tests zinc_server_tests
    (cd build-sanitize && ctest --output-on-failure -j "$jobs" --timeout 1500 -L sanitize)
    ;;
  *)
    echo "usage: bash build.sh run|test|build" >&2
    exit 2
    ;;
esac
