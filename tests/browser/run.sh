#!/usr/bin/env bash
# Runs the web app's browser tests: Playwright for Python driving Debian's Chromium against a
# homeward-relay they start on 127.0.0.1. HOMEWARD_RELAY_BIN picks the binary (default: .build/release,
# then .build/debug). Needs the Debian packages chromium and libjs-leaflet (.ci/run installs them);
# Playwright comes from PyPI into tests/browser/.venv and never downloads a browser.
#
#   bash tests/browser/run.sh                 # all cases
#   bash tests/browser/run.sh --screenshots   # and save phone-size screenshots to docs/screenshots/
#   bash tests/browser/run.sh -k alarm        # extra arguments go to pytest
#
# Ends with a "N passed, N failed" line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
exec bash "$here/../python/pytest-in-venv.sh" "$here" "$@"
