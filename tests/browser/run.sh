#!/usr/bin/env bash
# Runs the web app's browser tests: Playwright for Python driving Debian's Chromium against a
# homeward-relay it starts on 127.0.0.1. HOMEWARD_RELAY_BIN picks the binary (default: .build/release,
# then .build/debug). Needs the Debian packages chromium and libjs-leaflet (.ci/run installs them);
# Playwright itself comes from PyPI into tests/browser/.venv and never downloads a browser.
#
#   bash tests/browser/run.sh                 # all cases
#   bash tests/browser/run.sh --screenshots   # and save phone-size screenshots to docs/screenshots/
#   bash tests/browser/run.sh -k alarm        # extra arguments go to pytest
#
# Ends with a "N passed, N failed" line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"

export HOMEWARD_PBKDF2_ITERATIONS="${HOMEWARD_PBKDF2_ITERATIONS:-210000}"
cd "$here/../.."
junit="$(mktemp "${TMPDIR:-/tmp}/homeward-browser.XXXXXX.xml")"
trap 'rm -f "$junit"' EXIT
set +e
"$venv/bin/python" -m pytest "$here" -q -rfs -p no:cacheprovider --junitxml="$junit" "$@"
status=$?
set -e
"$venv/bin/python" "$here/../python/junit_summary.py" "$junit" "$status"
exit "$status"
