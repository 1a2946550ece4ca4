#!/usr/bin/env bash
# The cluster test: PostgreSQL + nats-server + three relays + haproxy on loopback (tests/cluster/cluster.py).
#   1. the Python contract suite with its clients spread over the three nodes and the balancer
#      (a fresh cluster; tests that need a relay process of their own are skipped, with the reason);
#   2. the cross-node checks and fault cases of tests/cluster (a cluster of their own, which they
#      kill -9, restart and cut off from PostgreSQL and NATS).
# Ends with "N passed, N failed"; exits non-zero if anything failed.
#
#   bash tests/cluster/run.sh [--no-contract] RELAY_BIN [pytest arguments for part 2, e.g. -k faults]
#
# --no-contract runs part 2 only. The relays inherit the environment, so HOMEWARD_CACHE=connected runs
# them all with --cache connected (each holds only the users it serves, read from PostgreSQL on demand);
# the default is a whole cache. Every port (PostgreSQL, nats-server, relays, haproxy) is a free one the
# system picks, so two runs at once do not collide.
#
# Installs nothing: needs postgresql, nats-server and haproxy (Debian packages; .ci/run installs them)
# and python3 with venv (pytest and websockets go into tests/python/.venv for part 1 and
# tests/cluster/.venv for part 2, as tests/python/pytest-in-venv.sh does for every suite).
# HOMEWARD_CLUSTER_KEEP=1 keeps the clusters' directories (logs, databases) for a look afterwards.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
contract_part=1
if [ "${1:-}" = "--no-contract" ]; then
    contract_part=0
    shift
fi
relay_bin="${1:-}"
if [ -z "$relay_bin" ] || [ ! -x "$relay_bin" ]; then
    echo "usage: $0 [--no-contract] RELAY_BIN (an executable homeward-relay) [pytest arguments]" >&2
    exit 2
fi
shift
relay_bin="$(cd "$(dirname "$relay_bin")" && pwd)/$(basename "$relay_bin")"
export HOMEWARD_RELAY_BIN="$relay_bin"
export HOMEWARD_PBKDF2_ITERATIONS="${HOMEWARD_PBKDF2_ITERATIONS:-210000}"

missing=()
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || missing+=(postgresql)
command -v nats-server >/dev/null || missing+=(nats-server)
command -v haproxy >/dev/null || missing+=(haproxy)
if [ ${#missing[@]} -gt 0 ]; then
    echo "missing: ${missing[*]} (apt-get install ${missing[*]})"
    echo "0 passed, 1 failed"
    exit 1
fi

# shellcheck source=../parts.sh
source "$here/../parts.sh"
setup_python_venv || exit 1

echo "relays: --cache ${HOMEWARD_CACHE:-whole}"

if [ "$contract_part" -eq 1 ]; then
    run_part "contract suite on 3 nodes" "$venv/bin/python" "$here/cluster.py" "$relay_bin" run -- \
        bash "$here/../python/run.sh" -rfs
fi

run_part "cross-node and fault cases" bash "$here/../python/pytest-in-venv.sh" "$here" "$@"

print_summary "cluster summary"
