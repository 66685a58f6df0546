#!/usr/bin/env bash
# zinc's one entry point for building:
#   bash build.sh run    set up, build, generate text with the built-in model
#   bash build.sh test   set up, build the test configuration, run every test this machine can run but the `slow` ones
#   bash build.sh slow   after `test` (CI runs both, .ci/run): the tests labelled `slow`, then the tests of
#                        the untrusted inputs again in a build with ASan and UBSan
#   bash build.sh build  set up and build only
#
# The CUDA backend is compiled for the GPUs this machine has, and left out on a machine without one;
# ZINC_CMAKE_ARGS=-DZINC_CUDA_ARCHS=all builds it for every architecture zinc supports (packages, releases).
set -euo pipefail
cd "$(dirname "$0")"

what=${1:-run}
jobs=$(nproc)

case "$what" in
  build|run) bash scripts/setup.sh build ;;
  test|slow) bash scripts/setup.sh test ;;
esac

configure() {  # dir, extra cmake args...
  local dir=$1; shift
  # shellcheck disable=SC2086  # ZINC_CMAKE_ARGS is a list of arguments
  cmake -S . -B "$dir" -G Ninja "$@" ${ZINC_CMAKE_ARGS:-}
}

case "$what" in
  build|run)
    configure build -DCMAKE_BUILD_TYPE=Release -DZINC_TESTS=OFF
    # `run` needs the binary only; `build` adds the tools that make the project's own data (tools/).
    # shellcheck disable=SC2046
    cmake --build build -j "$jobs" $([ "$what" = run ] && echo --target zinc)
    if [ "$what" = run ]; then
      ./build/zinc devices
      # The built-in model: 5M parameters trained on the Brown corpus (data/brown/README.md); sampled, and -v
      # prints the seed that reproduces the text.
      ./build/zinc run -m data/brown/brown-qwen3-5m-bf16.gguf -p "The jury said" -n 80 --temp 0.8 --top-k 40 -v
    fi
    ;;
  test|slow)
    configure build-test -DCMAKE_BUILD_TYPE=Release -DZINC_WERROR=ON
    cmake --build build-test -j "$jobs"
    if [ "$what" = test ]; then
      # The tests that take tens of seconds each are labelled `slow`; CI runs them after these (bash build.sh slow).
      (cd build-test && ctest --output-on-failure -j "$jobs" --timeout 1500 -LE slow)
      exit 0
    fi
    (cd build-test && ctest --output-on-failure -j "$jobs" --timeout 1500 -L slow)
    # The tests of what reads untrusted input (templates, JSON, GGUF files, HTTP clients) again, everything built with
    # AddressSanitizer and UndefinedBehaviorSanitizer: a leak, an overflow or undefined behaviour fails them.
    # (Without -Werror: the sanitizers' instrumentation makes GCC warn about the standard library's own code.)
    configure build-sanitize -DCMAKE_BUILD_TYPE=Debug -DZINC_SANITIZE=ON
    cmake --build build-sanitize -j "$jobs" --target zinc zinc_sanitize_tests zinc_server_tests gguf_corpus_runner \
      template_corpus_runner
    (cd build-sanitize && ctest --output-on-failure -j "$jobs" --timeout 1500 -L sanitize)
    ;;
  *)
    echo "usage: bash build.sh run|test|slow|build" >&2
    exit 2
    ;;
esac
