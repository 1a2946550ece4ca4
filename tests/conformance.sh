#!/usr/bin/env bash
# Proves homeward-relay against clients we did not write and against hostile input:
#   1. the Python contract suite (pytest + websockets)       tests/python/run.sh
#   2. TLS from outside with openssl s_client / verify      tests/tls/check-tls.sh
#   3. the fuzzer in its bounded CI mode (with the storm)   tests/fuzz/fuzz.py --ci
# Each part ends with "N passed, N failed"; this script adds them up, prints a closing
# "N passed, N failed" and exits non-zero if anything failed (or a part ended without its line).
#
#   bash tests/conformance.sh [--no-fuzz] RELAY_BIN
#
# The relays the parts start inherit the environment, so HOMEWARD_TLS_BACKEND=openssl runs them all
# on the system's OpenSSL. --no-fuzz leaves out part 3 (CI runs the fuzzer once, on the default backend).
#
# Needs python3 (with venv), openssl, curl. Installs pytest and websockets into
# tests/python/.venv with pip. FUZZ_ARGS adds fuzzer arguments (e.g. FUZZ_ARGS="--seed 7").
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fuzz=1
if [ "${1:-}" = "--no-fuzz" ]; then fuzz=0; shift; fi
relay_bin="${1:-}"
if [ -z "$relay_bin" ] || [ ! -x "$relay_bin" ]; then
    echo "usage: $0 [--no-fuzz] RELAY_BIN (an executable homeward-relay)" >&2
    exit 2
fi
relay_bin="$(cd "$(dirname "$relay_bin")" && pwd)/$(basename "$relay_bin")"
export HOMEWARD_RELAY_BIN="$relay_bin"
export HOMEWARD_PBKDF2_ITERATIONS="${HOMEWARD_PBKDF2_ITERATIONS:-210000}"

# shellcheck source=parts.sh
source "$here/parts.sh"
setup_python_venv || exit 1

run_part "python contract suite" bash "$here/python/run.sh"
run_part "tls (openssl)" bash "$here/tls/check-tls.sh" "$relay_bin"
if [ "$fuzz" -eq 1 ]; then
    # shellcheck disable=SC2086
    run_part "fuzzer (ci mode)" "$venv/bin/python" "$here/fuzz/fuzz.py" --bin "$relay_bin" --ci ${FUZZ_ARGS:-}
fi

print_summary "conformance summary"
