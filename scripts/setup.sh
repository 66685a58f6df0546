#!/usr/bin/env bash
# Installs what a step needs, and only that, so that a first build does not wait for the tests' browser:
#
#   bash scripts/setup.sh build   the Debian packages that building zinc needs
#   bash scripts/setup.sh test    those, the packages the tests need, and the npm packages of the server's tests
#                                 (tests/server/package-lock.json, into tests/server/node_modules)
#
# Idempotent; run as root on Debian 12. Without root it only reports what is missing, so a user with a ready machine
# can still build.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-test}
case "$what" in
  build|test) ;;
  *) echo "usage: bash scripts/setup.sh build|test" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build ccache pkg-config xz-utils
  libcli11-dev nlohmann-json3-dev
  libedit-dev                         # line editing and history in zinc chat
  libboost-dev                        # Boost.Beast and Asio (header-only): the HTTP server of zinc serve
  libcurl4-openssl-dev libssl-dev     # zinc pull and -hf: downloads from the hub, checked with sha256
)
if [ "$what" = test ]; then
  packages+=(
    libgtest-dev libgmock-dev
    clang libclang-rt-14-dev          # libFuzzer and the sanitizer runtimes
    python3 python3-numpy             # test tools that read .npy fixtures
    groff-base                        # the man page's check (tests/install_test.sh)
    chromium                          # the chat page's browser test (tests/server/browser.test.mjs)
  )
  # Node.js and npm run the server's client tests. A machine that has them already (from Debian or elsewhere) keeps
  # them: Debian's npm package would not install beside another Node.js.
  command -v node >/dev/null || packages+=(nodejs)
  command -v npm >/dev/null || packages+=(npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: the packages to $what zinc are installed"
elif [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run this script as root (or install them) and try again" >&2
  exit 1
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

[ "$what" = test ] || exit 0

# The npm packages of the server's tests, exactly as the lock file has them; again only when the lock file has changed
# since they were installed (a copy of it is kept beside them).
tests=tests/server
if cmp -s "$tests/package-lock.json" "$tests/node_modules/.installed-lock.json" 2>/dev/null; then
  echo "setup: the server tests' npm packages are installed"
else
  echo "setup: installing the server tests' npm packages (npm ci in $tests)"
  (cd "$tests" && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.installed-lock.json)
fi
