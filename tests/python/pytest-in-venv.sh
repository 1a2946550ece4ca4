#!/usr/bin/env bash
# Runs pytest on one suite directory inside that directory's own virtualenv (SUITE/.venv, filled from
# SUITE/requirements.txt), from the repository root, and ends with a "N passed, N failed" line
# (junit_summary.py). Shared by tests/python/run.sh and tests/browser/run.sh.
#
#   bash tests/python/pytest-in-venv.sh SUITE_DIR [pytest arguments...]
set -euo pipefail
suite="$(cd "$1" && pwd)"
shift
here="$(cd "$(dirname "$0")" && pwd)"
venv="$suite/.venv"

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$suite/requirements.txt"

export HOMEWARD_PBKDF2_ITERATIONS="${HOMEWARD_PBKDF2_ITERATIONS:-210000}"
cd "$here/../.."
junit="$(mktemp "${TMPDIR:-/tmp}/homeward-pytest.XXXXXX.xml")"
trap 'rm -f "$junit"' EXIT
set +e
"$venv/bin/python" -m pytest "$suite" -q -rfs -p no:cacheprovider --junitxml="$junit" "$@"
status=$?
set -e
"$venv/bin/python" "$here/junit_summary.py" "$junit" "$status"
exit "$status"
