# Sourced by tests/conformance.sh and tests/cluster/run.sh: runs parts that each end with a
# "N passed, N failed" line, adds them up, and prints a closing summary with the same line.
#
#   source tests/parts.sh
#   setup_python_venv || exit 1   # tests/python/.venv with pytest and websockets, in $venv
#   run_part NAME COMMAND...      # as many as there are parts
#   print_summary TITLE           # the table and the total; returns non-zero if anything failed
#
# A part that ends without its line counts as 1 failed, and so does one that exits non-zero
# while reporting no failure.

setup_python_venv() {
    venv="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/python/.venv"
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv" || { echo "cannot create $venv"; echo "0 passed, 1 failed"; return 1; }
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$venv/../requirements.txt" ||
        { echo "pip install failed"; echo "0 passed, 1 failed"; return 1; }
}

total_passed=0
total_failed=0
summary=()
started=$SECONDS

run_part() {  # run_part NAME COMMAND...
    local name="$1"; shift
    local log; log="$(mktemp "${TMPDIR:-/tmp}/homeward-part.XXXXXX")"
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
    summary+=("$(printf '%-28s %5d passed, %3d failed  (%ds)' "$name" "$p" "$f" $((SECONDS - t0)))")
}

print_summary() {  # print_summary TITLE
    echo
    echo "==================== $1 ($((SECONDS - started)) s)"
    printf '%s\n' "${summary[@]}"
    echo "$total_passed passed, $total_failed failed"
    [ "$total_failed" -eq 0 ]
}
