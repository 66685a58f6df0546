#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need. Idempotent; run as root on Debian 12.
# Without root it only reports what is missing, so a user with a ready machine can still build.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config xz-utils
  libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
  clang libclang-rt-14-dev            # libFuzzer and the sanitizer runtimes
  python3 python3-numpy               # test tools that read .npy fixtures
  libedit-dev                         # line editing and history in zinc chat
  libcpp-httplib-dev                  # the HTTP server of zinc serve
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build packages are installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run this script as root (or install them) and try again" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
