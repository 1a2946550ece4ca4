#!/usr/bin/env bash
# Runs the independent end-to-end suite against a built homeward-relay.
# HOMEWARD_RELAY_BIN picks the binary (default: .build/release, then .build/debug).
# Extra arguments go to pytest (e.g. -k alarms, -m "not slow"). Ends with "N passed, N failed".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/pytest-in-venv.sh" "$here" "$@"
