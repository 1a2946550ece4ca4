#!/usr/bin/env bash
# Runs the independent end-to-end suite against a built homeward-relay.
# HOMEWARD_RELAY_BIN picks the binary (default: .build/release, then .build/debug).
# Extra arguments go to pytest (e.g. -k alarms, -m "not slow").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"

export HOMEWARD_PBKDF2_ITERATIONS="${HOMEWARD_PBKDF2_ITERATIONS:-210000}"
cd "$here/../.."
junit="$(mktemp "${TMPDIR:-/tmp}/homeward-pytest.XXXXXX.xml")"
trap 'rm -f "$junit"' EXIT
set +e
"$venv/bin/python" -m pytest "$here" -q -rf -p no:cacheprovider --junitxml="$junit" "$@"
status=$?
set -e
# A closing "N passed, N failed" line (errors count as failed; skipped tests are neither).
"$venv/bin/python" "$here/summary.py" "$junit" "$status"
exit "$status"
