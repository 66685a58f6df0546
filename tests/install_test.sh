#!/usr/bin/env bash
# `cmake --install` puts the binary, its man page and its bash completion where a system looks for them, and each
# works from there: the installed zinc runs, the man page renders without a warning, the completion completes
# subcommands and options from the installed binary.
#
#   tests/install_test.sh BUILD_DIR
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null

bin=$prefix/bin/zinc
page=$prefix/share/man/man1/zinc.1
completion=$prefix/share/bash-completion/completions/zinc
for f in "$bin" "$page" "$completion"; do
  [ -f "$f" ] || { echo "FAIL: cmake --install did not write $f"; exit 1; }
done
"$bin" --version | grep -q '^zinc [0-9]' || { echo "FAIL: the installed zinc does not run"; exit 1; }

warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
[ -z "$warnings" ] || { echo "FAIL: the man page: $warnings"; exit 1; }
groff -man -Tutf8 "$page" 2>/dev/null | grep -q 'zinc - run GGUF language models' ||
  { echo "FAIL: the man page does not render its name"; exit 1; }

# What the completion offers for a command line (its words, the last being completed), one per line.
offered() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _zinc; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$completion" "$@"
}
expect() {  # what it should offer, then the words
  local want=$1; shift
  local got
  got=$(offered "$@" | sort | tr '\n' ' ')
  [ "$got" = "$want " ] || { echo "FAIL: completing '$*': got '$got', want '$want'"; exit 1; }
}
expect "serve" "$bin" se
expect "detokenize devices" "$bin" de
expect "--temp --temperature" "$bin" run --tem
expect "--max-queue" "$bin" serve --max-q
expect "--version" "$bin" --v
# After a subcommand, a word that is not an option is a file name.
touch "$prefix/model-for-completion.gguf"
expect "$prefix/model-for-completion.gguf" "$bin" run -m "$prefix/model-for"
echo "install: binary, man page and completion work"
