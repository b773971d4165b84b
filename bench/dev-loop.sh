#!/usr/bin/env bash
# `wasmsched dev` from save to result, in each language: a project
# `wasmsched new` writes, `dev` running in it, then ROUNDS code edits (a
# comment added to the policy's source, so the tests run and, in Rust,
# the build) and ROUNDS edits of the settings alone. Each figure is from
# the save (a rename over the file, as editors do) to the round's result
# line. docs/benchmarks.md records what it printed.
#
#   bench/dev-loop.sh [--wasmsched BIN] [--rounds N] [--langs "rust python js"]
#
# Needs what the projects need (cargo with the wasm target, python3 with
# venv, node and npm) and the interpreters `policies/install-toolchains.sh`
# builds, found beside BIN as `wasmsched` finds them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
wasmsched="$root/target/release/wasmsched" rounds=5 langs="rust python js"
while [ $# -gt 0 ]; do
    case "$1" in
        --wasmsched) wasmsched=$(realpath "$2"); shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --langs) langs=$2; shift 2 ;;
        *) echo "usage: bench/dev-loop.sh [--wasmsched BIN] [--rounds N] [--langs \"rust python js\"]" >&2; exit 2 ;;
    esac
done
work=$(mktemp -d)
dev_pid=
trap '[ -n "$dev_pid" ] && kill "$dev_pid" 2>/dev/null; rm -rf "$work"' EXIT

now() { date +%s.%N; }

# Saves FILE with LINE appended, as an editor does (a new file renamed
# over the old one).
save() {
    local file=$1 line=$2
    { cat "$file"; echo "$line"; } > "$file.saving"
    mv "$file.saving" "$file"
}

# Waits until OUT has COUNT lines that end a round (passed or failed);
# prints the seconds since STARTED.
wait_rounds() {
    local out=$1 count=$2 started=$3
    while [ "$(grep -cE '^(✓ round|   the last good result|   no good result)' "$out")" -lt "$count" ]; do
        sleep 0.02
    done
    echo "$(now) - $started" | bc
}

for lang in $langs; do
    dir=$work/$lang
    "$wasmsched" new zones --lang "$lang" --dir "$dir" > /dev/null
    case $lang in
        rust) source=src/lib.rs comment="//" ;;
        python)
            source=src/app.py comment="#"
            (cd "$dir" && python3 -m venv .venv && .venv/bin/pip install --quiet -r requirements.txt) ;;
        js) source=src/policy.js comment="//" ;;
    esac
    out=$work/$lang.out
    (cd "$dir" && PATH="$(dirname "$wasmsched"):$PATH" exec "$wasmsched" dev > "$out" 2>&1) &
    dev_pid=$!
    first=$(wait_rounds "$out" 1 "$(now)")
    grep -q "✓ round 1" "$out" || { cat "$out"; exit 1; }
    n=1 code=() settings=()
    for i in $(seq 1 "$rounds"); do
        n=$((n + 1)); started=$(now); save "$dir/$source" "$comment edit $i"
        code+=("$(wait_rounds "$out" "$n" "$started")")
        n=$((n + 1)); started=$(now); save "$dir/zones.yaml" "# edit $i"
        settings+=("$(wait_rounds "$out" "$n" "$started")")
    done
    kill "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
    dev_pid=
    grep -q "✗" "$out" && { cat "$out"; echo "$lang: a round failed" >&2; exit 1; }
    median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    printf '%-7s first round %6.2f s; code edit: median %5.2f s (%s); settings edit: median %5.2f s (%s)\n' \
        "$lang" "$first" "$(median "${code[@]}")" "$(printf '%.2f ' "${code[@]}")" \
        "$(median "${settings[@]}")" "$(printf '%.2f ' "${settings[@]}")"
done
