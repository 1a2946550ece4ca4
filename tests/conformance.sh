#!/usr/bin/env bash
# Proves homeward-relay against clients we did not write and against hostile input:
#   1. the Python contract suite (pytest + websockets)       tests/python/run.sh
#   2. TLS from outside with openssl s_client / verify      tests/tls/check-tls.sh
#   3. the fuzzer in its bounded CI mode (with the storm)   tests/fuzz/fuzz.py --ci
# Each part ends with "N passed, N failed"; this script adds them up, prints a closing
# "N passed, N failed" and exits non-zero if anything failed (or a part ended without its line).
#
#   bash tests/conformance.sh RELAY_BIN
#
# Needs python3 (with venv), openssl, curl. Installs pytest and websockets into
# tests/python/.venv with pip. FUZZ_ARGS adds fuzzer arguments (e.g. FUZZ_ARGS="--seed 7").
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
relay_bin="${1:-}"
if [ -z "$relay_bin" ] || [ ! -x "$relay_bin" ]; then
    echo "usage: $0 RELAY_BIN (an executable homeward-relay)" >&2
    exit 2
fi
relay_bin="$(cd "$(dirname "$relay_bin")" && pwd)/$(basename "$relay_bin")"
export HOMEWARD_RELAY_BIN="$relay_bin"
export HOMEWARD_PBKDF2_ITERATIONS="${HOMEWARD_PBKDF2_ITERATIONS:-210000}"

venv="$here/python/.venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || { echo "cannot create $venv"; echo "0 passed, 1 failed"; exit 1; }
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/python/requirements.txt" ||
    { echo "pip install failed"; echo "0 passed, 1 failed"; exit 1; }

total_passed=0
total_failed=0
summary=()
started=$SECONDS

run_part() {  # run_part NAME COMMAND...
    local name="$1"; shift
    local log; log="$(mktemp "${TMPDIR:-/tmp}/homeward-conformance.XXXXXX")"
    local t0=$SECONDS
    echo
    echo "==================== $name"
    "$@" 2>&1 | tee "$log"
    local status=${PIPESTATUS[0]}
    local line p f
    line="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)"
    rm -f "$log"
    if [ -n "$line" ]; then
        p="${line%% passed*}"
        f="${line#*, }"; f="${f%% failed*}"
    else
        p=0; f=1
        echo "($name ended without a 'N passed, N failed' line: counted as 1 failed)"
    fi
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "($name exited with $status: counted as 1 failed)"
    fi
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
    summary+=("$(printf '%-22s %5d passed, %3d failed  (%ds)' "$name" "$p" "$f" $((SECONDS - t0)))")
}

run_part "python contract suite" bash "$here/python/run.sh"
run_part "tls (openssl)" bash "$here/tls/check-tls.sh" "$relay_bin"
# shellcheck disable=SC2086
run_part "fuzzer (ci mode)" "$venv/bin/python" "$here/fuzz/fuzz.py" --bin "$relay_bin" --ci ${FUZZ_ARGS:-}

echo
echo "==================== conformance summary ($((SECONDS - started)) s)"
printf '%s\n' "${summary[@]}"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
