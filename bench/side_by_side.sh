#!/usr/bin/env bash
# Runs `zinc bench` and llama.cpp's llama-bench on the models of the performance table (docs/architecture.md §7),
# on the GPU, each pair on the same file, and writes a dated results file (bench/results/): the machine, the tests of
# both tools side by side, and each tool's figures as it reported them. With --cpu, the CPU table instead.
#
#   bench/side_by_side.sh --llama-bench PATH [--cpu [-t N]] [--models DIR] [-r N] [--only PRESET]...
#                         [--remove-models] [--save]
#
#   --llama-bench PATH  a llama-bench binary (built separately; llama.cpp is not part of zinc); or set LLAMA_BENCH
#   --cpu               the CPU table, against a CPU build of llama-bench: Qwen3-0.6B Q8_0 and Q4_K_M, Qwen3.5-9B
#                       and Qwen3.6-35B-A3B Q4_K_M at 2 layers; pp128 and tg32
#   -t N                threads of both tools with --cpu (default: the logical CPUs)
#   --models DIR        where the model files are, made with `zinc synth` (default seed) when missing
#                       (default ./bench-models)
#   -r N                repetitions of each test (default 3)
#   --only PRESET       only this preset (may be given several times)
#   --remove-models     delete each model file once both tools have run on it (the five files take 57 GiB)
#   --save              write it to bench/results/DATE-side-by-side-gpu-COMMIT.md (or -cpu-) instead of printing it
#
# ZINC is the zinc binary (default: build/zinc of this checkout); LLAMA_BUILD names llama.cpp's build where its JSON
# cannot (a build from a source tree without git). Each model runs pp512 and tg128, and Qwen3-8B also
# tg128 after 8192 tokens of context (-d 8192) and an 8192-token prompt (pp8192, whose time is the time to the first
# token), with
#   zinc bench -m F --backend cuda -p 512 -n 128 -r N -o json
#   llama-bench -m F -ngl 99 -fa 1 -p 512 -n 128 -r N -o json
# and with --cpu
#   zinc bench -m F --backend cpu -p 128 -n 32 -r N -t T -o json
#   llama-bench -m F -p 128 -n 32 -r N -t T -o json
# A failed run is recorded as such and the others go on.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
zinc=${ZINC:-$root/build/zinc}
llama_bench=${LLAMA_BENCH:-}
models=./bench-models
reps=3
save=0
remove=0
cpu=0
threads=$(nproc)
only=()

# The performance table: preset, `zinc synth --type` (gpt-oss: its experts in MXFP4 as released, the rest Q8_0),
# and whether it also runs at depth 8192.
presets=(
  "qwen3-8b Q4_K_M depth"
  "qwen3.5-9b Q4_K_M"
  "qwen3.6-35b-a3b Q4_K_M"
  "gemma-4-26b-a4b Q4_K_M"
  "gpt-oss-20b MXFP4_MOE"
)
# The CPU table: preset, type, and the layers kept (`zinc synth --layers`; "all": the whole model).
cpu_presets=(
  "qwen3-0.6b Q8_0 all"
  "qwen3-0.6b Q4_K_M all"
  "qwen3.5-9b Q4_K_M 2"
  "qwen3.6-35b-a3b Q4_K_M 2"
)

# usage STATUS: the help at the top of this file, on stdout for --help, else on stderr.
usage() {
  if [ "$1" = 0 ]; then
    sed -n '6,18p' "$0" | sed 's/^# \{0,1\}//'
  else
    sed -n '6,18p' "$0" | sed 's/^# \{0,1\}//' >&2
  fi
  exit "$1"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --llama-bench) llama_bench=${2:?--llama-bench needs a path}; shift 2 ;;
    --models) models=${2:?--models needs a directory}; shift 2 ;;
    -r) reps=${2:?-r needs a count}; shift 2 ;;
    --cpu) cpu=1; shift ;;
    -t) threads=${2:?-t needs a count}; shift 2 ;;
    --only) only+=("${2:?--only needs a preset}"); shift 2 ;;
    --remove-models) remove=1; shift ;;
    --save) save=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "side_by_side.sh: unknown option $1" >&2; usage 2 ;;
  esac
done

[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "side_by_side.sh: -r expects a count >= 1, not '$reps'" >&2; exit 2; }
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || { echo "side_by_side.sh: -t expects a count >= 1, not '$threads'" >&2; exit 2; }
if [ "$cpu" = 1 ]; then presets=("${cpu_presets[@]}"); fi
names=$(printf '%s\n' "${presets[@]}" | cut -d' ' -f1 | sort -u)
for p in "${only[@]}"; do
  grep -qxF -- "$p" <<<"$names" ||
    { echo "side_by_side.sh: --only $p is not one of: ${names//$'\n'/ }" >&2; exit 2; }
done
[ -n "$llama_bench" ] || { echo "side_by_side.sh: give --llama-bench PATH or set LLAMA_BENCH" >&2; exit 2; }
[ -x "$llama_bench" ] || { echo "side_by_side.sh: $llama_bench is not an executable" >&2; exit 2; }
[ -x "$zinc" ] || { echo "side_by_side.sh: $zinc is not an executable (build zinc or set ZINC)" >&2; exit 2; }

selected() {
  [ ${#only[@]} -eq 0 ] && return 0
  local p
  for p in "${only[@]}"; do [ "$p" = "$1" ] && return 0; done
  return 1
}

mkdir -p "$models"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run_tool NAME OUT CMD...: runs CMD with its output in OUT; on failure OUT says so, with the last line of the error.
run_tool() {
  local name=$1 out=$2
  shift 2
  echo "side_by_side.sh: $name: $*" >&2
  local rc=0
  "$@" >"$out" 2>"$work/err" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "$name failed (exit $rc): $(tail -n 1 "$work/err")" >"$out"
    return 1
  fi
}

# The rows of one model: its tests in both JSON outputs (zinc's and llama-bench's share n_prompt, n_gen, n_depth,
# avg_ts and stddev_ts), matched by test. A missing or failed output leaves its column "—".
summary_rows() {
  python3 - "$@" <<'PY'
import json, sys

label, zinc_files, llama_files = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()

def rates(paths):
    r = {}
    for path in paths:
        try:
            with open(path) as f:
                for t in json.load(f):
                    r[(t["n_prompt"], t["n_gen"], t.get("n_depth", 0))] = (t["avg_ts"], t.get("stddev_ts", 0.0))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a failed run: its tests show "—"
    return r

def name(p, g, d):
    s = f"pp{p}" if g == 0 else f"tg{g}" if p == 0 else f"pp{p}+tg{g}"
    return s + (f" @ d{d}" if d else "")

z, l = rates(zinc_files), rates(llama_files)

def first_token(key):  # an 8192-token prompt: the seconds before the first token, zinc / llama.cpp
    secs = lambda r: f"{key[0] / r[0]:.2f} s" if r and r[0] > 0 else "—"
    return f" (first token after {secs(z.get(key))} / {secs(l.get(key))})" if key[0] >= 8192 and key[1] == 0 else ""

for key in sorted(set(z) | set(l), key=lambda k: (k[2], k[1] > 0, k)):
    cell = lambda r: f"{r[0]:,.2f} ± {r[1]:.2f}" if r else "—"
    ratio = f"{z[key][0] / l[key][0]:.2f}" if key in z and key in l and l[key][0] > 0 else "—"
    print(f"| {label} | {name(*key)}{first_token(key)} | {cell(z.get(key))} | {cell(l.get(key))} | {ratio} |")
PY
}

# One tool's JSON records as a table of the fields that tell the runs apart (or its error line).
json_table() {
  python3 - "$@" <<'PY'
import json, sys

rows = []
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            rows += json.load(f)
    except (OSError, ValueError):
        with open(path) as f:
            print(f.read().strip())
if rows:
    wanted = ("model_type", "model_size", "backends", "n_gpu_layers", "n_ubatch", "type_k", "type_v", "flash_attn",
              "n_prompt", "n_gen", "n_depth", "avg_ts", "stddev_ts", "gbps")
    keys = [k for k in wanted if k in rows[0]]
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        cell = lambda v: "—" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)
        print("| " + " | ".join(cell(r.get(k)) for k in keys) + " |")
PY
}

# llama.cpp's build as its JSON gives it ("d32676d77 (6410)"), or LLAMA_BUILD (for a build made outside llama.cpp's
# git checkout, whose JSON says "unknown"), or "?".
llama_build() {
  if [ -n "${LLAMA_BUILD:-}" ]; then echo "$LLAMA_BUILD"; return; fi
  python3 -c '
import json, sys
try:
    t = json.load(open(sys.argv[1]))[0]
    print("%s (%s)" % (t["build_commit"], t["build_number"]))
except Exception:
    print("?")' "$1"
}

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
gpu_name=${gpu%%,*}
gpu_driver=${gpu#*, }
commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')
rows="" details="" build="?"

for entry in "${presets[@]}"; do
  read -r preset type extra <<<"$entry"
  selected "$preset" || continue
  file=$models/$preset-$type.gguf
  name=$preset-$type
  synth=()
  label="$preset $type"
  if [ "$cpu" = 1 ] && [ "$extra" != all ]; then
    name=$preset-$type-${extra}l
    file=$models/$name.gguf
    synth=(--layers "$extra")
    label="$preset $type, $extra layers"
  fi
  if [ ! -f "$file" ]; then
    echo "side_by_side.sh: making $file" >&2
    "$zinc" synth --preset "$preset" --type "$type" "${synth[@]}" -o "$file"
  fi
  # The tests: pp512 and tg128, for depth also tg128 at 8192 and pp8192; on the CPU pp128 and tg32.
  if [ "$cpu" = 1 ]; then
    tests=("-p 128 -n 32")
    zinc_args=(--backend cpu -t "$threads")
    llama_args=(-t "$threads")
  else
    tests=("-p 512 -n 128")
    if [ "${extra:-}" = depth ]; then tests+=("-p 0 -n 128 -d 8192" "-p 8192 -n 0"); fi
    zinc_args=(--backend cuda)
    llama_args=(-ngl 99 -fa 1)
  fi
  zinc_json="" llama_json=""
  for i in "${!tests[@]}"; do
    read -r -a t <<<"${tests[$i]}"
    run_tool zinc "$work/$name-z$i.json" "$zinc" bench -m "$file" "${zinc_args[@]}" "${t[@]}" -r "$reps" -o json || true
    run_tool llama-bench "$work/$name-l$i.json" "$llama_bench" -m "$file" "${llama_args[@]}" "${t[@]}" -r "$reps" \
      -o json || true
    zinc_json+=" $work/$name-z$i.json"
    llama_json+=" $work/$name-l$i.json"
    if [ "$build" = "?" ]; then build=$(llama_build "$work/$name-l$i.json"); fi
  done
  r=$(summary_rows "$label" "$zinc_json" "$llama_json")
  if [ -n "$r" ]; then rows+=$r$'\n'; fi
  details+="### $label ($(du -h "$file" | cut -f1))"$'\n\n'
  # shellcheck disable=SC2086  # the lists are of paths without spaces (mktemp's and the preset names)
  details+="zinc:"$'\n\n'"$(json_table $zinc_json)"$'\n\n'
  # shellcheck disable=SC2086
  details+="llama.cpp:"$'\n\n'"$(json_table $llama_json)"$'\n\n'
  if [ "$remove" = 1 ]; then rm -f "$file"; fi
done

if [ "$cpu" = 1 ]; then
  cpu_name=$(grep -m 1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
  isa=$(grep -m 1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' |
    grep -xE 'avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni' | tr '\n' ' ' || true)
  section=$(cat <<EOF
## CPU — $(date -u +%Y-%m-%d) — zinc $commit — side by side with llama.cpp $build

Machine: ${cpu_name:-?}, $(nproc) logical CPUs (${isa% }), $threads threads. Models made by
\`zinc synth --preset P --type T\` (default seed; \`--layers 2\` where the table says so), each engine on the same
file:

\`\`\`
zinc bench -m F --backend cpu -p 128 -n 32 -r $reps -t $threads -o json
llama-bench -m F -p 128 -n 32 -r $reps -t $threads -o json
\`\`\`

| model | test | zinc t/s | llama.cpp t/s | zinc / llama.cpp |
|---|---|---:|---:|---:|
$rows
$details
EOF
)
else
section=$(cat <<EOF
## GPU — $(date -u +%Y-%m-%d) — zinc $commit — side by side with llama.cpp $build

Machine: ${gpu_name:-no nvidia-smi}, driver ${gpu_driver:-?}. Models made by \`zinc synth --preset P --type T\`
(default seed), each engine on the same file:

\`\`\`
zinc bench -m F --backend cuda -p 512 -n 128 -r $reps -o json      # Qwen3-8B also: -p 0 -n 128 -d 8192
llama-bench -m F -ngl 99 -fa 1 -p 512 -n 128 -r $reps -o json      # Qwen3-8B also: -p 0 -n 128 -d 8192
\`\`\`

| model | test | zinc t/s | llama.cpp t/s | zinc / llama.cpp |
|---|---|---:|---:|---:|
$rows
$details
EOF
)
fi

if [ "$save" = 1 ]; then
  file="$here/results/$(date -u +%Y-%m-%d)-side-by-side-$([ "$cpu" = 1 ] && echo cpu || echo gpu)-$commit.md"
  printf '# %s\n' "${section#\#\# }" >"$file"
  echo "side_by_side.sh: wrote $file (add its figures to bench/results/README.md)" >&2
else
  printf '%s\n' "$section"
fi
