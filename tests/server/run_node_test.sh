#!/usr/bin/env bash
# Runs one Node.js test file of tests/server against the given zinc binary and model; exits 77 (ctest's skip) with
# the reason when Node.js, the npm packages (scripts/setup.sh installs them) or Chromium (for the browser test) are
# missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
test_file=$1 needs=$2  # needs: node, or browser (node and Chromium)
if ! command -v node >/dev/null; then
  echo "SKIPPED: Node.js is not installed (scripts/setup.sh installs it)"
  exit 77
fi
if [ ! -d "$here/node_modules/openai" ] || [ ! -d "$here/node_modules/playwright-core" ]; then
  echo "SKIPPED: the npm packages of tests/server are not installed (scripts/setup.sh, or npm ci in tests/server)"
  exit 77
fi
if [ "$needs" = browser ] && [ ! -x /usr/bin/chromium ]; then
  echo "SKIPPED: Debian's chromium is not installed (scripts/setup.sh installs it)"
  exit 77
fi
exec node --test --test-reporter=spec "$here/$test_file"
