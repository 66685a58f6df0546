#!/usr/bin/env bash
# zinc's one entry point for building:
#   bash build.sh run    set up, build (all CUDA architectures), run the demo job
#   bash build.sh test   set up, build the test configuration, run every test this machine can run
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
      ./build/zinc run -m build/demo.gguf -p zinc -n 64
    fi
    ;;
  test)
    # One CUDA architecture keeps nvcc's time down on small machines; the GPU tests target sm_90.
    configure_and_build build-test -DCMAKE_BUILD_TYPE=Release -DZINC_WERROR=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90-real
    cd build-test
    ctest --output-on-failure -j "$jobs" --timeout 1500
    ;;
  *)
    echo "usage: bash build.sh run|test|build" >&2
    exit 2
    ;;
esac
